"""A captured webhook replayed against a real receiver (issue 39, attacked): the receiver is
a plain ``http.server`` that checks with :func:`intermission.notify.verify` and with the
README's recipe, given the request's headers as the server parsed them, and de-duplicates
on ``headers.get("Idempotency-Key")`` as receivers do. Sent again with a fresh key, with
none, with the header's name in another case, and with the key twice (a fresh one before
the signed one), the replay never counts as a new notification."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from tests._helpers import need_module
from tests.notify._receivers import SECRET, readme_verify

from intermission.notify import Notifier, Webhook, verify
from intermission.stores import MemoryStore
from intermission.testing.conformance import paused_ops


class DedupReceiver:
    """Counts each notification it accepted, by the key its framework reads first."""

    def __init__(self) -> None:
        self.recipe = readme_verify()
        self.accepted: list[str] = []
        self.refused = {"verify": 0, "recipe": 0}
        self.captured: list[tuple[bytes, list[tuple[str, str]]]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.captured.append((body, list(self.headers.items())))
                by_lib = verify(SECRET, body, self.headers)
                by_recipe = receiver.recipe(SECRET.encode(), body, self.headers)
                receiver.refused["verify"] += not by_lib
                receiver.refused["recipe"] += not by_recipe
                key = self.headers.get("Idempotency-Key")
                if by_lib and by_recipe and key not in receiver.accepted:
                    receiver.accepted.append(key)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def replay(self, body: bytes, headers: list[tuple[str, str]]) -> None:
        """Send a raw HTTP request with exactly these header lines."""
        lines = ["POST /hook HTTP/1.1", f"Host: 127.0.0.1:{self.port}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in headers if k.lower() not in ("host", "connection")]
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            s.settimeout(30)
            while s.recv(4096):
                pass


@pytest.fixture
def receiver() -> Iterator[DedupReceiver]:
    need_module("httpx", "the HTTP targets need httpx (extra notify)")
    r = DedupReceiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


def test_a_replayed_webhook_never_counts_as_a_new_notification(receiver: DedupReceiver) -> None:
    store = MemoryStore(outbox=True)
    store.save(paused_ops("replay-dup"))
    url = f"http://127.0.0.1:{receiver.port}/hook"
    assert Notifier(store, [Webhook(url, secret=SECRET)]).deliver_pending() == 1
    ((body, headers),) = receiver.captured
    assert len(receiver.accepted) == 1 and receiver.refused == {"verify": 0, "recipe": 0}
    original = dict(headers)["Idempotency-Key"]
    fresh = "ntf_" + "0" * 32
    others = [(k, v) for k, v in headers if k.lower() != "idempotency-key"]
    replays = [
        [*others, ("Idempotency-Key", fresh)],  # a fresh key
        others,  # none
        [*others, ("IDEMPOTENCY-KEY", original)],  # the same key, the name in capitals
        [*others, ("Idempotency-Key", fresh), ("Idempotency-Key", original)],  # both
        [*others, ("idempotency-key", fresh), ("Idempotency-Key", original)],
    ]
    for replayed in replays:
        receiver.replay(body, replayed)
    assert receiver.accepted == [original]
    # all but the replay under the very same key were refused by both checks
    assert receiver.refused == {"verify": 4, "recipe": 4}
