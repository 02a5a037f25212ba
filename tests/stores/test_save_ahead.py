"""``save_ahead``: the save of a decision before the run commits without waiting for its
flush, except where something acts on it at once — an effect started with it, or a
notification it writes (a dispatcher sends what it sees) — and is visible at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from intermission import END, FlowEngine, GraphSpec, InMemoryAgentSession
from intermission.stores import MemoryStore, SQLiteStore
from intermission.stores.base import save_ahead


class _Traced(SQLiteStore):
    """A SQLite store that keeps the statements its connections run."""

    statements: list[str]

    def _open(self) -> Any:
        conn = super()._open()
        conn.set_trace_callback(self.statements.append)
        return conn


def _store(path: Path, **kw: Any) -> _Traced:
    _Traced.statements = []
    return _Traced(path, **kw)


def _gate() -> Any:
    spec = GraphSpec("gate")
    spec.add_start().link_add("gate")
    spec.add_activity("gate").task(
        lambda ctx, node: ctx.session.pending(True, "needs a person")
    ).link_add(END)
    spec.add_end()
    return spec.build()


def _unflushed(statements: list[str]) -> bool:
    """Whether a commit in ``statements`` skipped its fsync (WAL, synchronous=NORMAL)."""
    return any(s.strip().upper() == "PRAGMA SYNCHRONOUS=NORMAL" for s in statements)


def test_a_decision_save_is_committed_visible_and_not_waited_for(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    s = InMemoryAgentSession.of("t-1")
    s.context.put("decision", None)
    store.save(s)
    assert not _unflushed(store.statements)  # a plain save is flushed
    store.statements.clear()
    s.context.put("decision", "APPROVE")
    version = save_ahead(store, s)
    assert _unflushed(store.statements)
    other = SQLiteStore(tmp_path / "s.db")  # another connection sees it at once
    seen = other.load("t-1")
    assert seen.store_version == version and seen.context.get("decision") == "APPROVE"
    other.close()
    store.close()


def test_a_save_that_starts_an_effect_is_flushed(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    s = InMemoryAgentSession.of("t-2")
    s.once("charge", lambda: "charged")  # not saved yet: the save writes its ledger row
    assert s.ledger_dirty
    store.statements.clear()
    save_ahead(store, s)
    assert not _unflushed(store.statements)
    assert store.load("t-2").ledger["charge"].status == "completed"
    store.close()


def test_a_save_that_writes_a_notification_is_flushed(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db", outbox=True)
    s = InMemoryAgentSession.of("t-3")
    FlowEngine().eval(_gate(), s.context)  # paused by a graph: a notification to write
    assert s.is_pending
    store.statements.clear()
    save_ahead(store, s)
    assert not _unflushed(store.statements)
    assert [r.kind for r in store.outbox.rows()] == ["pending"]  # its notification
    store.close()


def test_a_store_without_save_ahead_saves_as_usual() -> None:
    store = MemoryStore()
    s = InMemoryAgentSession.of("t-4")
    assert save_ahead(store, s) == 1
    assert store.load("t-4").store_version == 1
