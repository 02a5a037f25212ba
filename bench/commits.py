"""2c. Commits per pause and per claimed resume (SQLite's statement trace)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _shared import (
    approval_spec,
    row,
)


def bench_commits(tmp: Path, count: int = 200) -> None:
    """Commits a pause and a claimed resume make (lease renewal must add none to a resume
    shorter than the lease): counted with SQLite's statement trace."""
    from intermission import FlowEngine, InMemoryAgentSession
    from intermission.stores import SQLiteStore

    statements: list[str] = []

    class Counting(SQLiteStore):
        def _open(self) -> Any:
            conn = super()._open()
            conn.set_trace_callback(statements.append)
            return conn

    graph, engine = approval_spec(), FlowEngine()
    store = Counting(tmp / "commits.db")
    ids = [f"c{i}" for i in range(count)]

    def commits() -> int:
        n = sum(s.strip().upper() == "COMMIT" for s in statements)
        statements.clear()
        return n

    commits()
    for sid in ids:
        s = InMemoryAgentSession.of(sid)
        engine.eval(graph, s.context)
        store.save(s)
    pause = commits() / count
    for sid in ids:
        with store.resume(sid) as s:
            s.context.put("decision", "APPROVE")
            engine.eval(graph, s.context)
    resume = commits() / count
    renewals = sum("SET claim_until" in s for s in statements)
    row("commits per pause / per claimed resume (SQLite)", f"{pause:.0f} / {resume:.0f}",
        "the claim (no fsync) and the save; lease renewals in these resumes: "
        f"{renewals}")  # fmt: skip
    store.close()
