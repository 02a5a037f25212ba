"""7. Claimed resumes per second on PostgreSQL with 1, 2 and 4 worker processes, against
the floor: as many processes each running a raw commit loop (one UPDATE of a row, one
durable commit) on its own connection.

A worker is a process (as ``intermission worker`` and ``serve`` are deployed: the GIL
would make threads measure Python, not the store), each with its own store and its own
share of paused sessions of the 3-node approval graph; a run is timed from the moment
every worker is connected and ready to the last one's end. Floor and intermission runs
alternate, rounds interleaved. Needs ``INTERMISSION_BENCH_PG_DSN`` (or
``INTERMISSION_PG_DSN``); the DSN reaches the workers in the environment, never argv.

    .venv/bin/python bench/resume_throughput.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import statistics
import time
import uuid
from typing import Any

from _shared import approval_spec, claimed_resume, row, verdict

WORKERS = (1, 2, 4)
STATE = json.dumps({"a": "done", "decision": "APPROVE", "c": "done", "x": "payload"})


def _dsn() -> str | None:
    return os.environ.get("INTERMISSION_BENCH_PG_DSN") or os.environ.get("INTERMISSION_PG_DSN")


def _floor_worker(ids: list[str], ready: Any, go: Any, out: Any) -> None:
    import psycopg

    conn = psycopg.connect(os.environ["INTERMISSION_BENCH_PG_DSN"])
    ready.wait()
    go.wait()
    start = time.perf_counter()
    for sid in ids:
        with conn.transaction():
            conn.execute("UPDATE bench_resume_floor SET status = 'done', state = %s "
                         "WHERE id = %s", (STATE, sid))  # fmt: skip
    out.put((start, time.perf_counter()))
    conn.close()


def _intermission_worker(ids: list[str], ready: Any, go: Any, out: Any) -> None:
    from intermission import FlowEngine
    from intermission.stores.postgres import PostgresStore

    store = PostgresStore(os.environ["INTERMISSION_BENCH_PG_DSN"])
    resume = claimed_resume(store, FlowEngine(), approval_spec())
    store.load(ids[0])  # (the connection opened, the code warm: not measured)
    ready.wait()
    go.wait()
    start = time.perf_counter()
    for sid in ids:
        resume(sid)
    out.put((start, time.perf_counter()))
    store.close()


def _run(target: Any, shares: list[list[str]]) -> float:
    """Resumes (or commits) per second of ``len(shares)`` processes, one share each."""
    ctx = mp.get_context("spawn")
    ready, go, out = ctx.Barrier(len(shares) + 1), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=target, args=(ids, ready, go, out)) for ids in shares]
    for p in procs:
        p.start()
    ready.wait()
    go.set()
    spans = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    begin, end = min(s for s, _ in spans), max(e for _, e in spans)
    return sum(len(ids) for ids in shares) / (end - begin)


def bench_resume_throughput(per_worker: int, rounds: int) -> None:
    print("\n7. claimed resumes per second, PostgreSQL, 1 / 2 / 4 worker processes")
    dsn = _dsn()
    try:
        import psycopg

        from intermission import FlowEngine, InMemoryAgentSession
        from intermission.stores.postgres import PostgresStore
    except ImportError as exc:
        print(f"  not measured: {exc} (needs the postgres extra)")
        return
    if not dsn:
        print("  not measured: set INTERMISSION_BENCH_PG_DSN to a PostgreSQL database")
        return
    os.environ["INTERMISSION_BENCH_PG_DSN"] = dsn  # (the workers' environment)
    prefix = f"bench-rps-{uuid.uuid4().hex[:6]}-"
    graph, engine = approval_spec(), FlowEngine()
    store = PostgresStore(dsn)
    floor = psycopg.connect(dsn, autocommit=True)
    floor.execute("CREATE TABLE IF NOT EXISTS bench_resume_floor "
                  "(id text PRIMARY KEY, status text, state text)")  # fmt: skip
    counter = iter(range(10**9))
    made: list[str] = []

    def paused(n: int) -> list[str]:
        ids = [f"{prefix}{next(counter)}" for _ in range(n)]
        for sid in ids:
            made.append(sid)
            s = InMemoryAgentSession.of(sid)
            engine.eval(graph, s.context)
            store.save(s)
        return ids

    def floor_rows(n: int) -> list[str]:
        ids = [f"{prefix}{next(counter)}" for _ in range(n)]
        with floor.cursor() as cur:
            cur.executemany("INSERT INTO bench_resume_floor VALUES (%s, 'pending', %s)",
                            [(sid, STATE) for sid in ids])  # fmt: skip
        return ids

    def shares(ids: list[str], k: int) -> list[list[str]]:
        return [ids[i::k] for i in range(k)]

    results: dict[tuple[str, int], list[float]] = {}
    try:
        for _ in range(rounds):
            for k in WORKERS:
                n = per_worker * k
                mine, floors = paused(n), floor_rows(n)
                results.setdefault(("floor", k), []).append(
                    _run(_floor_worker, shares(floors, k)))
                results.setdefault(("im", k), []).append(
                    _run(_intermission_worker, shares(mine, k)))
    finally:
        for sid in made:
            with contextlib.suppress(Exception):
                store.delete(sid)
        with contextlib.suppress(Exception):
            floor.execute("DELETE FROM bench_resume_floor WHERE id LIKE %s", (prefix + "%",))
        floor.close()
        store.close()
    for k in WORKERS:
        f = statistics.median(results[("floor", k)])
        m = statistics.median(results[("im", k)])
        row(f"claimed resumes per second, PostgreSQL, {k} worker{'s' if k > 1 else ''}",
            f"{m:,.0f} /s", f"{m / f:.2f}× the floor ({f:,.0f} commits/s)",
            f"{verdict(m / f >= 0.5)} (≥ 0.5×)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer resumes")
    args = parser.parse_args()
    bench_resume_throughput(60 if args.quick else 200, 3 if args.quick else 5)


if __name__ == "__main__":
    main()
