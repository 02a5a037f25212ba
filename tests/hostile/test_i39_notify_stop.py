"""A dispatcher that stops while a receiver never answers (issue 39, attacked): ``stop``
waits ``timeout_s`` for the delivery in progress, then ends it — it no longer waits out
the silent target's own ``timeout_s`` (up to 300 s) in the process's exit. Run in a
subprocess: the process must end soon after ``stop``; a live target beside the silent
one was told."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests._helpers import need_module
from tests.notify._receivers import Receiver

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys, time
    from intermission.notify import Email, Notifier, Webhook
    from intermission.stores import SQLiteStore
    from intermission.testing.conformance import paused_ops
    kind, silent, live, db = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    secret = "s" * 16
    if kind == "webhook":
        dead = Webhook(f"http://127.0.0.1:{silent}/hook", secret=secret, timeout_s=200,
                       name="dead")
    else:
        dead = Email(("127.0.0.1", silent), sender="a@example.com", to=["b@example.com"],
                     timeout_s=200, name="dead")
    store = SQLiteStore(db, outbox=True)
    notifier = Notifier(store, [dead, Webhook(live, secret=secret, name="live")])
    store.save(paused_ops("stop-1"))
    notifier.start(poll_s=0.05)
    time.sleep(3)  # (the silent target's attempt is in progress)
    notifier.stop(timeout_s=1)
    print("stopped", flush=True)
""")


@pytest.mark.parametrize("kind", ["webhook", "email"])
def test_stop_ends_an_attempt_a_silent_receiver_holds(kind: str, tmp_path: Path) -> None:
    need_module("httpx", "the HTTP targets need httpx (extra notify)")
    receiver = Receiver(secret="s" * 16)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepted by the kernel, never read nor answered
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                SCRIPT,
                kind,
                str(silent.getsockname()[1]),
                receiver.url + "/hook",
                str(tmp_path / "s.db"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )  # fmt: skip (before: the process waited the silent target's 200 s)
    finally:
        silent.close()
        receiver.stop()
    assert done.returncode == 0 and "stopped" in done.stdout, done.stderr
    assert receiver.total() == 1  # the live target was told, beside the silent one
