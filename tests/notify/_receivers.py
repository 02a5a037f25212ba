"""Real receivers on 127.0.0.1: an HTTP server that verifies webhook signatures with the
README's own recipe and counts idempotency keys, and an SMTP server (aiosmtpd)."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SECRET = "test-secret-0123456789abcdef"
README = Path(__file__).parents[2] / "docs" / "how-to" / "notifications.md"


def readme_verify() -> Callable[..., bool]:
    """The signature check exactly as the docs print it (Tell the reviewer) for receivers."""
    text = README.read_text()
    (code,) = re.findall(r"```py\n(def verify_intermission.*?)(?:\n# try it|```)", text, re.S)
    space: dict[str, Any] = {}
    exec(compile(code, "notifications.md", "exec"), space)
    return space["verify_intermission"]  # type: ignore[no-any-return]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], bool], timeout_s: float = 60.0, what: str = "") -> None:
    """Wait for a condition (bounded; no timed asserts)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.02)


class Receiver:
    """A webhook (and Slack) receiver: verifies each signed request with the README's
    recipe, counts keys, answers ``status`` (200 unless told otherwise). ``on_request``
    runs before the answer (a test's hook: kill the dispatcher there)."""

    def __init__(self, port: int = 0, secret: str = SECRET) -> None:
        self.secret = secret
        self.verify = readme_verify()
        self.keys: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.slack: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.raw: list[tuple[bytes, dict[str, str]]] = []
        """Every request to /hook as it came (a capture an attacker could replay)."""
        self.bad = 0
        self.status = 200
        self.on_request: Callable[[dict[str, Any]], None] | None = None
        self.lock = threading.Lock()
        self.port = port or free_port()
        self._server: ThreadingHTTPServer | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                data = json.loads(body)
                headers = dict(self.headers.items())
                if self.path == "/slack":
                    with receiver.lock:
                        receiver.slack.append(data)
                else:
                    ok = receiver.verify(receiver.secret.encode(), body, headers)
                    with receiver.lock:
                        receiver.raw.append((body, headers))
                        if not ok:
                            receiver.bad += 1
                        else:
                            receiver.keys[headers["Idempotency-Key"]] += 1
                            receiver.bodies.append(data)
                            receiver.headers.append(headers)
                if receiver.on_request is not None:
                    receiver.on_request(data)
                self.send_response(receiver.status if self.path != "/slack" else 200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Go down: the port refuses connections until :meth:`start`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def total(self) -> int:
        with self.lock:
            return sum(self.keys.values())


class Mailbox:
    """An SMTP server (aiosmtpd) on 127.0.0.1 keeping every message it accepts;
    ``tls_context`` offers STARTTLS (required then), ``logins`` checks AUTH."""

    def __init__(
        self, tls_context: Any = None, logins: dict[str, str] | None = None, *,
        smtputf8: bool = True,
    ) -> None:  # fmt: skip
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult

        self.messages: list[tuple[list[str], EmailMessage]] = []
        box = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                msg = message_from_bytes(envelope.content, policy=policy.default)
                box.messages.append((list(envelope.rcpt_tos), msg))  # type: ignore[arg-type]
                return "250 OK"

        def authenticator(server: Any, session: Any, envelope: Any, mech: str, data: Any) -> Any:
            ok = logins is not None and logins.get(data.login.decode()) == data.password.decode()
            return AuthResult(success=ok, handled=False)

        kwargs: dict[str, Any] = {"enable_SMTPUTF8": smtputf8}
        if tls_context is not None:
            kwargs.update(tls_context=tls_context, require_starttls=True)
        if logins is not None:
            kwargs.update(authenticator=authenticator, auth_required=True)
        self.port = free_port()
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port, **kwargs)
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()


class Served:
    """``python -m intermission serve --notify FILE`` on 127.0.0.1 (the AG-UI test agents),
    its output in a file; ``stop()`` is SIGTERM and returns the exit code."""

    def __init__(
        self, store: str, config: Path, log: Path, env: dict[str, str], *extra: str
    ) -> None:
        import os
        import subprocess
        import sys

        root = Path(__file__).resolve().parents[2]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        cmd = [sys.executable, "-m", "intermission", "serve", "--store", store,
               "--agents", "tests.agui.agents:AGENTS", "--port", str(self.port),
               "--notify", str(config), *extra]  # fmt: skip
        # (this checkout's sources first: the server runs the code under test)
        full_env = {**os.environ, **env, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{root}"}
        with open(log, "w") as out:
            self.proc = subprocess.Popen(cmd, cwd=root, env=full_env, stdout=out,
                                         stderr=subprocess.STDOUT, text=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"serve did not start: {log.read_text()}") from None
                time.sleep(0.1)

    def pause(self, thread: str, agent: str = "ops") -> dict[str, Any]:
        """A run that ends on an interrupt; returns the RUN_FINISHED event."""
        import httpx

        body = {"threadId": thread, "runId": "r1", "state": {}, "tools": [], "context": [],
                "forwardedProps": {},
                "messages": [{"id": "u", "role": "user", "content": "go"}]}  # fmt: skip
        r = httpx.post(f"{self.url}/agents/{agent}", json=body, timeout=120,
                       headers={"Accept": "text/event-stream"})  # fmt: skip
        assert r.status_code == 200, r.text
        frames = [f for f in r.text.split("\n\n") if f.strip()]
        last = dict(line.split(": ", 1) for line in frames[-1].splitlines())
        event: dict[str, Any] = json.loads(last["data"])
        assert event["outcome"]["type"] == "interrupt", event
        return event

    def stop(self) -> int:
        import subprocess

        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                return self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(timeout=30)


class Trickler:
    """An HTTP receiver that takes a request, then answers one byte every ``every_s``
    seconds (a slow or hostile receiver: each byte comes well within a read timeout).
    ``closed`` is set once a connection it answered is over."""

    def __init__(self, every_s: float = 0.5, *, smtp: bool = False) -> None:
        self.every_s = every_s
        self.smtp = smtp
        """An SMTP server's greeting instead (sent first, as SMTP servers do)."""
        self.answer = (b"220 slow.example ESMTP ready\r\n" if smtp else
                       b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")  # fmt: skip
        self.connections = 0
        self.closed = threading.Event()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self.port = int(self._sock.getsockname()[1])
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/slow"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            try:
                if not self.smtp:
                    conn.recv(65536)  # the request (small: one read)
                for byte in self.answer:
                    conn.sendall(bytes([byte]))
                    if self._stop.wait(self.every_s):
                        break
            except OSError:
                pass  # the client cut it: what a bounded attempt does
        self.closed.set()

    def stop(self) -> None:
        self._stop.set()
        self._sock.close()
