"""Run ``python -m intermission serve`` in a subprocess and talk to it (raw HTTP, the JS
client). Every event read back is validated against ``ag_ui.core``'s models."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from ag_ui import core as ag
from pydantic import TypeAdapter

ROOT = Path(__file__).resolve().parents[2]
JS = ROOT / "tests" / "js"
EVENT = TypeAdapter(ag.Event)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One ``serve`` process on 127.0.0.1 (``kill()`` is SIGKILL: no clean shutdown)."""

    def __init__(
        self,
        store: str,
        effects: Path,
        token: str | None = None,
        auth: Path | None = None,
        *,
        agents: str = "tests.agui.agents:AGENTS",
        extra: tuple[str, ...] = (),
        script: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """``auth``: a ``serve --auth`` file; ``extra``: more ``serve`` options; ``script``:
        a test server module run as ``python -m SCRIPT STORE PORT`` instead of ``serve``;
        ``env``: more environment variables (say libfaketime's)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = token
        self.log = effects
        if script is not None:
            cmd = [sys.executable, "-m", script, store, str(self.port)]
        else:
            cmd = [sys.executable, "-m", "intermission", "serve", "--store", store,
                   "--agents", agents, "--port", str(self.port), *extra]  # fmt: skip
        if token:  # (from a file: a token in argv is refused, every local user could read it)
            token_file = effects.with_name(f"token-{self.port}")
            token_file.write_text(token + "\n")
            token_file.chmod(0o600)
            cmd += ["--token-file", str(token_file)]
        if auth is not None:
            cmd += ["--auth", str(auth)]
        # src first: a worktree sharing another's venv (editable install) runs its own code
        path = f"{ROOT / 'src'}{os.pathsep}{ROOT}"
        env = {**os.environ, "AGUI_EFFECTS": str(effects), "PYTHONPATH": path, **(env or {})}
        # its output goes to a file: a pipe nobody reads could fill and stall the server
        self.output = effects.with_name(f"server-{self.port}.log")
        with open(self.output, "w") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start: {self.output.read_text()}") from None
                time.sleep(0.1)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def run(self, agent: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """POST a RunAgentInput; the (id, event) pairs of the SSE answer, each validated."""
        base = {"messages": [], "state": {}, "tools": [], "context": [], "forwardedProps": {}}
        with httpx.Client(timeout=120) as client:
            r = client.post(
                f"{self.url}/agents/{agent}",
                json={**base, **body},
                headers={**self.headers(), "Accept": "text/event-stream"},
            )
            assert r.status_code == 200, r.text
            assert r.headers["content-type"].startswith("text/event-stream")
            return parse_sse(r.text)

    def replay(self, thread: str, last_id: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        headers = {**self.headers(), **({"Last-Event-ID": last_id} if last_id else {})}
        r = httpx.get(f"{self.url}/threads/{thread}/events", headers=headers, timeout=60)
        assert r.status_code == 200, r.text
        return parse_sse(r.text)

    def get(self, path: str) -> Any:
        r = httpx.get(self.url + path, headers=self.headers(), timeout=60)
        assert r.status_code == 200, r.text
        return r.json()

    def js(self, thread: str, steps: list[dict[str, Any]], agent: str = "ops") -> dict[str, Any]:
        """Run the real @ag-ui/client HttpAgent through ``steps``."""
        return js_result(self.js_start(thread, steps, agent))

    def js_start(
        self, thread: str, steps: list[dict[str, Any]], agent: str = "ops"
    ) -> subprocess.Popen[str]:
        """Start the real @ag-ui/client through ``steps``; :func:`js_result` reads it."""
        plan = {
            "url": f"{self.url}/agents/{agent}",
            "threadId": thread,
            "steps": steps,
            "headers": self.headers(),
        }
        node = shutil.which("node") or "node"
        return subprocess.Popen(
            [node, str(JS / "agui_client.mjs"), json.dumps(plan)],
            cwd=JS,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


def js_result(proc: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    """What a client started by ``Server.js_start`` saw (its events validated)."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 0, stderr
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    for step in result["steps"]:
        for event in step["events"]:
            EVENT.validate_python(event)
    return result


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """SSE frames as (id, event); every frame has an id and a valid AG-UI event."""
    out: list[tuple[str, dict[str, Any]]] = []
    for frame in text.split("\n\n"):
        if not frame.strip():
            continue
        fields = dict(line.split(": ", 1) for line in frame.splitlines())
        assert "id" in fields, frame
        event = json.loads(fields["data"])
        EVENT.validate_python(event)
        out.append((fields["id"], event))
    return out


def types(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [e["type"] for _, e in events]


def effects(path: Path, thread: str) -> list[str]:
    """The tool executions of one thread, across every server that wrote ``path``."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.split(" ", 1)[1] for line in lines if line.split(" ", 1)[0] == thread]
