"""3. Paused sessions at scale: creating them, database bytes, pending() pages at
10,000 and 1,000,000 sessions; MemoryStore's pending index."""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _shared import (
    approval_spec,
    median_rounds,
    row,
    timed,
    verdict,
)


def bench_scale(tmp: Path, count: int, million: int) -> None:
    print(f"\n3. paused sessions at scale ({count:,} created; first page at {million:,})")
    from intermission import FlowEngine, InMemoryAgentSession
    from intermission.stores import SQLiteStore

    graph = approval_spec()
    engine = FlowEngine()
    s = InMemoryAgentSession.of("size-probe")
    engine.eval(graph, s.context)
    snapshot_bytes = len(s.to_json().encode())
    row("bytes per paused session (snapshot JSON, event log included)", f"{snapshot_bytes:,} B",
        "", verdict(snapshot_bytes <= 1500) + " (≤ 1,500 B)")  # fmt: skip

    store = SQLiteStore(tmp / "scale.db")
    floor = sqlite3.connect(tmp / "scale-floor.db", isolation_level=None)
    floor.execute("PRAGMA journal_mode=WAL")
    floor.execute("PRAGMA synchronous=FULL")
    floor.execute(
        "CREATE TABLE s (id TEXT PRIMARY KEY, status TEXT, next TEXT, state TEXT, updated REAL)"
    )
    floor.execute("CREATE INDEX s_status ON s (status, updated)")

    def create_im(k: int, offset: int) -> float:
        t = time.perf_counter()
        for i in range(k):
            sess = InMemoryAgentSession.of(f"im-{offset + i}")
            engine.eval(graph, sess.context)
            store.save(sess)
        return time.perf_counter() - t

    def create_floor(k: int, offset: int) -> float:
        t = time.perf_counter()
        for i in range(k):
            state = json.dumps({"a": "done", "b": None, "c": None, "x": "payload", "y": "more"})
            floor.execute("BEGIN")
            floor.execute(
                "INSERT INTO s VALUES (?, 'pending', 'gate', ?, ?)",
                (f"f-{offset + i}", state, time.time()),
            )
            floor.execute("COMMIT")
        return time.perf_counter() - t

    blocks = 10
    per_block = count // blocks
    totals = {"im": 0.0, "floor": 0.0}
    for b in range(blocks):  # interleave blocks so disk noise hits both alike
        order = [("im", create_im), ("floor", create_floor)]
        random.shuffle(order)
        for key, fn in order:
            totals[key] += fn(per_block, b * per_block)
    row(f"create {count:,} paused sessions: floor", f"{totals['floor']:.2f} s")
    ratio = totals["im"] / totals["floor"]
    row(f"create {count:,} paused sessions: intermission", f"{totals['im']:.2f} s",
        f"{ratio:.2f}× the floor", verdict(ratio <= 1.5) + " (≤ 1.5×)")  # fmt: skip
    for name in ("scale.db", "scale-floor.db"):
        c = sqlite3.connect(tmp / name)
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        c.close()
    per_session = (tmp / "scale.db").stat().st_size / count
    floor_per = (tmp / "scale-floor.db").stat().st_size / count
    row("database bytes per paused session: intermission", f"{per_session:,.0f} B",
        f"{per_session / floor_per:.1f}× the floor ({floor_per:,.0f} B)")  # fmt: skip

    def page(fn: Callable[[], Any]) -> float:
        return timed(fn, 20)

    floor_sql = "SELECT id, next FROM s WHERE status = 'pending' ORDER BY updated DESC LIMIT 50"
    med = median_rounds(
        {
            "im": lambda: page(lambda: store.pending(limit=50)),
            "floor": lambda: page(lambda: floor.execute(floor_sql).fetchall()),
            "im-all": lambda: timed(lambda: store.pending(limit=count), 1),
            "floor-all": lambda: timed(
                lambda: floor.execute("SELECT id, next FROM s WHERE status = 'pending'").fetchall(),
                1,
            ),
        },
        rounds=7,
    )
    r = med["im"] / med["floor"]
    row(f"pending() first page at {count:,}: intermission", f"{med['im'] * 1e3:.3f} ms",
        f"{r:.1f}× an indexed query ({med['floor'] * 1e3:.3f} ms)",
        verdict(r <= 2) + " (≤ 2×)")  # fmt: skip
    row(f"list all {count:,} pending: intermission", f"{med['im-all'] * 1e3:.1f} ms",
        f"floor {med['floor-all'] * 1e3:.1f} ms (LangGraph: no API; 405 ms full scan)")  # fmt: skip
    store.close()
    floor.close()

    # 1,000,000 sessions: bulk-loaded rows (small snapshots: the index is what is measured)
    big = SQLiteStore(tmp / "million.db", synchronous="NORMAL")
    bigf = sqlite3.connect(tmp / "million-floor.db", isolation_level=None)
    bigf.execute(
        "CREATE TABLE s (id TEXT PRIMARY KEY, status TEXT, next TEXT, state TEXT, updated REAL)"
    )
    bigf.execute("CREATE INDEX s_status ON s (status, updated)")
    snap = InMemoryAgentSession.of("x").to_json()
    batch = 50_000
    with big._tx() as run:
        cur = run("SELECT 1")
        for start in range(0, million, batch):
            cur.executemany(
                "INSERT INTO im_sessions (id, version, status, agent, reason, tasks, deadline_ms, "
                "request, snapshot, updated_ms, pending_since) VALUES (?, 1, ?, 'approve3', "
                "'needs approval', '[]', NULL, 'null', ?, ?, ?)",
                [(f"s{i:07d}", "pending" if i % 4 == 0 else "done", snap, float(i), float(i))
                 for i in range(start, min(start + batch, million))],
            )  # fmt: skip
    bigf.execute("BEGIN")
    for start in range(0, million, batch):
        bigf.executemany(
            "INSERT INTO s VALUES (?, ?, 'gate', '{}', ?)",
            [(f"s{i:07d}", "pending" if i % 4 == 0 else "done", float(i))
             for i in range(start, min(start + batch, million))],
        )  # fmt: skip
    bigf.execute("COMMIT")
    med = median_rounds(
        {
            "im": lambda: page(lambda: big.pending(limit=50)),
            "floor": lambda: page(lambda: bigf.execute(floor_sql).fetchall()),
        },
        rounds=7,
    )
    r = med["im"] / med["floor"]
    row(f"pending() first page at {million:,}: intermission", f"{med['im'] * 1e3:.3f} ms",
        f"{r:.1f}× an indexed query ({med['floor'] * 1e3:.3f} ms)",
        verdict(r <= 2) + " (≤ 2×)")  # fmt: skip
    big.close()
    bigf.close()


def bench_memory_pending(tmp: Path, count: int) -> None:
    """MemoryStore keeps a pending index (sorted keys), so its first page costs what
    SQLite's indexed query does instead of a scan of every session."""
    from intermission import FlowEngine, InMemoryAgentSession
    from intermission.stores import MemoryStore, SQLiteStore

    graph, engine = approval_spec(), FlowEngine()
    mem = MemoryStore()
    for i in range(count):
        s = InMemoryAgentSession.of(f"m{i:06d}")
        if i % 3 == 0:
            engine.eval(graph, s.context)  # a third wait for a human
        mem.save(s)
    sql = SQLiteStore(tmp / "memory-peer.db", synchronous="NORMAL")
    snap = InMemoryAgentSession.of("x").to_json()
    with sql._tx() as run:
        run("SELECT 1").executemany(
            "INSERT INTO im_sessions (id, version, status, agent, reason, tasks, deadline_ms, "
            "request, snapshot, updated_ms) VALUES (?, 1, ?, 'approve3', 'needs approval', "
            "'[]', NULL, 'null', ?, ?)",
            [(f"m{i:06d}", "pending" if i % 3 == 0 else "new", snap, float(i))
             for i in range(count)],
        )  # fmt: skip
    med = median_rounds(
        {
            "memory": lambda: timed(lambda: mem.pending(limit=50), 20),
            "sqlite": lambda: timed(lambda: sql.pending(limit=50), 20),
        },
        rounds=7,
    )
    r = med["memory"] / med["sqlite"]
    row(f"MemoryStore.pending() first page at {count:,}", f"{med['memory'] * 1e3:.3f} ms",
        f"{r:.2f}× SQLiteStore's ({med['sqlite'] * 1e3:.3f} ms)",
        verdict(r <= 2) + " (≤ 2×)")  # fmt: skip
    sql.close()
