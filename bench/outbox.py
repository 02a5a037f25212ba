"""2c. What the outbox costs: pause → parked of the 3-node approval graph with the store's
outbox on (the save writes its notification in the same transaction) and off, in one
store, interleaved; and commit → delivered for a webhook on this
machine (a dispatcher in the saving process, woken by the commit, as ``serve --notify``
runs it; the receiver a local HTTP server).

    python bench/outbox.py [--quick]      # this measurement alone (rows printed)
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _shared import Pool, approval_spec, median_rounds, row, verdict, warm_wal


def bench_outbox(rounds: int, tmp: Path, deliveries: int = 300) -> None:
    print("\n2c. the outbox: pause with it on vs off; commit → delivered (webhook)")
    from intermission import FlowEngine, InMemoryAgentSession
    from intermission.stores import SQLiteStore

    graph = approval_spec()
    engine = FlowEngine()
    store = SQLiteStore(tmp / "outbox.db", outbox=True)
    counter = iter(range(10**9))
    per = 40
    names = ("on", "off")
    pools = {name: Pool(f"o{name}", counter, per) for name in names}

    def pause_in(on: bool) -> Callable[[str], None]:
        # one store (one connection, as a process has), its outbox on or off per batch
        def pause(sid: str) -> None:
            store.outbox.enabled = on
            s = InMemoryAgentSession.of(sid)
            engine.eval(graph, s.context)
            store.save(s)

        return pause

    pauses = {name: pools[name].pause(pause_in(name == "on")) for name in names}
    warm_wal(pauses["on"], tmp / "outbox.db-wal")
    med = median_rounds(pauses, rounds)
    ratio = med["on"] / med["off"]
    row("pause → parked: outbox on vs off", f"{med['on'] * 1e3:.3f} ms",
        f"{ratio:.2f}× off ({med['off'] * 1e3:.3f} ms)",
        verdict(ratio <= 1.15) + " (≤ 1.15×)")  # fmt: skip
    # the same in CPU time of the pausing thread: what the outbox adds to the work, without
    # the fsync waits that a busy disk stretches at random (both do one commit)
    cpu = median_rounds({name: _cpu(pools[name], pause_in(name == "on"))
                         for name in names}, rounds)  # fmt: skip
    ratio = cpu["on"] / cpu["off"]
    row("pause → parked: outbox on vs off, CPU time", f"{cpu['on'] * 1e3:.3f} ms",
        f"{ratio:.2f}× off ({cpu['off'] * 1e3:.3f} ms)",
        verdict(ratio <= 1.15) + " (≤ 1.15×)")  # fmt: skip
    written = len(store.outbox.rows(limit=100_000))
    assert written >= 2 * per * rounds, written  # (the pauses did write their notifications)
    p50, p99 = _commit_to_delivered(store, pause_in(True), deliveries)
    row("commit → delivered: webhook, dispatcher in the process", f"p50 {p50 * 1e3:.2f} ms",
        f"p99 {p99 * 1e3:.2f} ms over {deliveries} pauses (signed POST to 127.0.0.1)")  # fmt: skip
    store.close()


def _cpu(pool: Pool, op: Callable[[str], Any]) -> Callable[[], float]:
    """A batch of ``op`` timed in CPU seconds of this thread, per call."""

    def batch() -> float:
        ids = [f"{pool.prefix}c{next(pool.counter)}" for _ in range(pool.per)]
        start = time.thread_time()
        for sid in ids:
            op(sid)
        return (time.thread_time() - start) / len(ids)

    return batch


def _commit_to_delivered(store: Any, pause: Callable[[str], None], n: int) -> tuple[float, float]:
    """Latency from the pause's commit to the receiver reading the request, one at a time."""
    from intermission.notify import Notifier, Webhook

    arrived = threading.Event()
    received: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver would

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            received.append(time.perf_counter())
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            arrived.set()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/hook"
    # the notifications of the pauses timed above are already in the outbox: sent first
    notifier = Notifier(store, [Webhook(url, secret="bench-secret-0123456789")])
    notifier.deliver_pending()
    notifier.start(poll_s=60)  # woken by each commit, never by its poll here
    took: list[float] = []
    try:
        for i in range(n):
            arrived.clear()
            received.clear()
            sid = f"lat{i}"
            s_commit = _timed_commit(store, pause, sid)
            if not arrived.wait(30):
                raise RuntimeError("a notification did not arrive")
            took.append(received[0] - s_commit)
    finally:
        notifier.stop()
        server.shutdown()
    took.sort()
    return statistics.median(took), took[min(len(took) - 1, int(len(took) * 0.99))]


def _timed_commit(store: Any, pause: Callable[[str], None], sid: str) -> float:
    """Run ``pause`` and return when its save committed (the outbox's wake is set right
    after the commit, before any dispatch)."""
    stamp: list[float] = []
    wake = store.outbox.wake
    original = wake.set

    def set_after_commit() -> None:
        stamp.append(time.perf_counter())
        original()

    wake.set = set_after_commit
    try:
        pause(sid)
    finally:
        del wake.set
    return stamp[0]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        bench_outbox(5 if args.quick else 23, Path(d), 100 if args.quick else 300)
