"""6. Decision → applied over AG-UI: two ``serve`` processes on one PostgreSQL store with
1,000 paused threads; a reviewer's client POSTs the approval (a ``resume``) and the clock
stops at ``RUN_FINISHED``, which the server sends only once the tool ran and the save that
applied the decision committed. Printed beside Temporal's published signal latency.

Needs ``INTERMISSION_BENCH_PG_DSN`` (or ``INTERMISSION_PG_DSN``) and the ``agui`` and
``postgres`` extras; the bench adds its own threads (ids ``bench-agui-<run>-…``) and
deletes them at the end. Alone: ``python bench/agui_latency.py [--quick]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _shared import HERE, row, verdict

TEMPORAL = (11.0, 46.0)
"""Temporal's published signal latency, p50 / p99 ms (Temporal Cloud, January 2026)."""
BACKGROUND = 1000
"""Paused threads that wait throughout (the listing and the indexes hold them)."""


def _dsn() -> str | None:
    return os.environ.get("INTERMISSION_BENCH_PG_DSN") or os.environ.get("INTERMISSION_PG_DSN")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Server:
    def __init__(self, dsn: str, log: Path, floor: bool = False) -> None:
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": str(HERE), "INTERMISSION_BENCH_PG_DSN": dsn}
        cmd = [sys.executable, "-m", "intermission", "serve", "--store", dsn,
               "--agents", "_agui_agents:AGENTS", "--port", str(self.port)]  # fmt: skip
        if floor:  # one HTTP request, one commit (the DSN in the environment only)
            cmd = [sys.executable, str(HERE / "_floor_server.py"), str(self.port)]
        with open(log, "w") as out:
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        until = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > until:
                    raise RuntimeError(f"serve did not start: {log.read_text()}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def _body(thread: str, run: str, **more: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "state": {}, "tools": [], "context": [],
            "forwardedProps": {}, "messages": [], **more}  # fmt: skip


def _last_event(client: Any, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST a run and read its SSE answer up to the event that ends it."""
    with client.stream("POST", url, json=body, headers={"Accept": "text/event-stream"}) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                event: dict[str, Any] = json.loads(line[6:])
                if event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                    return event
    raise RuntimeError("the run ended without RUN_FINISHED")


def _pause(client: Any, server: _Server, thread: str) -> str:
    go = [{"id": "u1", "role": "user", "content": "apply c-1"}]
    end = _last_event(client, f"{server.url}/agents/bench", _body(thread, "r1", messages=go))
    if end["type"] != "RUN_FINISHED":
        raise RuntimeError(f"the run did not pause: {end}")
    return str(end["outcome"]["interrupts"][0]["id"])


def _decide(client: Any, server: _Server, thread: str, iid: str) -> float:
    """Seconds from sending the approval to its RUN_FINISHED (applied and committed)."""
    resume = [{"interruptId": iid, "status": "resolved", "payload": {"approved": True}}]
    t = time.perf_counter()
    end = _last_event(client, f"{server.url}/agents/bench", _body(thread, "r2", resume=resume))
    took = time.perf_counter() - t
    if end["type"] != "RUN_FINISHED" or end["outcome"]["type"] != "success":
        raise RuntimeError(f"the approval was not applied: {end}")
    return took


def _floor(client: Any, server: _Server, thread: str) -> float:
    """Seconds for one HTTP request doing one PostgreSQL commit, read as an SSE answer."""
    t = time.perf_counter()
    end = _last_event(client, f"{server.url}/commit", _body(thread, "f"))
    took = time.perf_counter() - t
    if end["type"] != "RUN_FINISHED":
        raise RuntimeError(f"the floor's request failed: {end}")
    return took


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1e3


def bench_agui_latency(tmp: Path, measured: int, background: int = BACKGROUND) -> None:
    print(f"\n6. decision → applied over AG-UI (2 servers, PostgreSQL, {background:,} paused)")
    dsn = _dsn()
    try:
        import httpx

        import intermission.agui  # noqa: F401
        from intermission.stores.postgres import PostgresStore
    except ImportError as exc:
        print(f"  not measured: {exc} (needs the agui and postgres extras)")
        return
    if not dsn:
        print("  not measured: set INTERMISSION_BENCH_PG_DSN to a PostgreSQL database")
        return
    prefix = f"bench-agui-{uuid.uuid4().hex[:6]}-"
    servers = [_Server(dsn, tmp / "serve-a.log"), _Server(dsn, tmp / "serve-b.log")]
    floor = _Server(dsn, tmp / "floor.log", floor=True)
    clients = [httpx.Client(timeout=120) for _ in servers]
    floor_client = httpx.Client(timeout=120)
    store = PostgresStore(dsn)
    made: list[str] = []
    try:

        def pause(n: int) -> tuple[str, str]:
            thread = f"{prefix}{n}"
            made.append(thread)  # deleted at the end, whatever happens
            with httpx.Client(timeout=120) as c:
                return thread, _pause(c, servers[n % 2], thread)

        total = background + 2 * measured + 20
        with ThreadPoolExecutor(8) as pool:
            paused = list(pool.map(pause, range(total)))
        warm, one = paused[:20], paused[20 : 20 + measured]
        many = paused[20 + measured : -background]
        for n, (thread, iid) in enumerate(warm):
            _decide(clients[n % 2], servers[n % 2], thread, iid)
            _floor(floor_client, floor, thread)
        # a decision, then the floor's request, in turn: both see the same machine
        alone: list[float] = []
        floor_alone: list[float] = []
        for n, (t, i) in enumerate(one):
            alone.append(_decide(clients[n % 2], servers[n % 2], t, i))
            floor_alone.append(_floor(floor_client, floor, t))

        own = threading.local()  # each reviewer keeps its connections (keep-alive)
        opened: list[Any] = []

        def decide(item: tuple[int, tuple[str, str]]) -> float:
            n, (thread, iid) = item
            if not hasattr(own, "clients"):
                own.clients = [httpx.Client(timeout=120) for _ in servers]
                opened.extend(own.clients)
            return _decide(own.clients[n % 2], servers[n % 2], thread, iid)

        def floor_request(item: tuple[int, tuple[str, str]]) -> float:
            if not hasattr(own, "floor"):
                own.floor = httpx.Client(timeout=120)
                opened.append(own.floor)
            return _floor(own.floor, floor, item[1][0])

        with ThreadPoolExecutor(8) as pool:
            busy = list(pool.map(decide, enumerate(many)))
            floor_busy = list(pool.map(floor_request, enumerate(many)))
        for c in opened:
            c.close()
        listed = len(store.pending(limit=1000))
    finally:
        for c in [*clients, floor_client]:
            c.close()
        for s in [*servers, floor]:
            s.stop()
        for thread in made:
            with contextlib.suppress(Exception):
                store.delete(thread)
        store.close()
    p50, p99 = TEMPORAL
    for what, values, floors in (("one reviewer", alone, floor_alone),
                                 ("8 reviewers at once", busy, floor_busy)):  # fmt: skip
        row(f"decision → applied over AG-UI, {what}: p50 / p99",
            f"{_pct(values, 0.5):.1f} / {_pct(values, 0.99):.1f} ms",
            f"Temporal signal {p50:g} / {p99:g} ms (Cloud, Jan 2026)")  # fmt: skip
        row(f"  floor: one HTTP request, one commit, {what}: p50 / p99",
            f"{_pct(floors, 0.5):.1f} / {_pct(floors, 0.99):.1f} ms")
        r50 = _pct(values, 0.5) / _pct(floors, 0.5)
        r99 = _pct(values, 0.99) / _pct(floors, 0.99)
        if what == "one reviewer":  # targets (issue 42): p50 ≤ 3×, p99 ≤ 4× the floor
            row(f"  ratio to the floor, {what}: p50 / p99", f"{r50:.1f}× / {r99:.1f}×",
                "target ≤ 3× / ≤ 4×", verdict(r50 <= 3 and r99 <= 4))
        else:  # eight at once: p99 ≤ 4× the floor's own eight-at-once p99
            row(f"  ratio to the floor, {what}: p99", f"{r99:.1f}×", "target ≤ 4×",
                verdict(r99 <= 4))
    print(f"  ({len(alone)} + {len(busy)} decisions; {listed:,} paused threads listed at the end;"
          f" median of one alone {statistics.median(alone) * 1e3:.1f} ms)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer decisions")
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        bench_agui_latency(Path(d), 100 if args.quick else 500)


if __name__ == "__main__":
    main()
