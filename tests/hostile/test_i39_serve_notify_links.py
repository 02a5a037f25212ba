"""``serve --notify FILE`` with no public URL links to the server's own console (issue 39,
attacked): on an IPv6 address that URL needs brackets (``http://[::1]:PORT``), and with
``--port 0`` (a free port) it names the port the server got, not port 0."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module
from tests.notify._receivers import SECRET, Receiver, wait_until

ROOT = Path(__file__).resolve().parents[2]


def _serve(tmp_path: Path, host: str, port: int, receiver: Receiver) -> tuple[Any, str]:
    config = tmp_path / "notify.yaml"
    config.write_text(textwrap.dedent(f"""
        poll_s: 30
        targets:
          - {{type: webhook, url: "{receiver.url}/hook", secret_env: IM_HOOK_SECRET}}
    """))  # fmt: skip
    log = tmp_path / "serve.log"
    env = {**os.environ, "IM_HOOK_SECRET": SECRET,
           "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}  # fmt: skip
    cmd = [sys.executable, "-m", "intermission", "serve", "--store", str(tmp_path / "s.db"),
           "--agents", "tests.agui.agents:AGENTS", "--host", host, "--port", str(port),
           "--notify", str(config)]  # fmt: skip
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not (found := re.search(r"serving AG-UI on (\S+)/ ", log.read_text())):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return proc, found.group(1)


@pytest.mark.parametrize(("host", "port"), [("::1", 0), ("127.0.0.1", 0), ("::1", None)])
def test_serve_links_to_the_url_it_listens_on(tmp_path: Path, host: str, port: int | None) -> None:
    need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
    import httpx
    from tests.notify._receivers import free_port

    receiver = Receiver()
    proc, url = _serve(tmp_path, host, free_port() if port is None else port, receiver)
    try:
        assert not url.endswith(":0")
        body = {"threadId": "t-link", "runId": "r1", "state": {}, "tools": [], "context": [],
                "forwardedProps": {},
                "messages": [{"id": "u", "role": "user", "content": "go"}]}  # fmt: skip
        r = httpx.post(f"{url}/agents/ops", json=body, timeout=120,
                       headers={"Accept": "text/event-stream"})  # fmt: skip
        assert r.status_code == 200, r.text
        wait_until(lambda: receiver.total() == 1, timeout_s=25, what="the notification")
        (sent,) = receiver.bodies
        link = sent["link"]
        assert link.startswith(f"{url}/#thread=t-link&interrupt="), link
        # the link opens: the console page answers at it
        assert httpx.get(link, timeout=60).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        receiver.stop()
