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


def test_an_effect_does_not_start_after_the_database_lost_the_decision(tmp_path: Path) -> None:
    """The decision's save is not flushed; a database that crashed and lost it (while the
    claim, flushed by another commit, survived) must not let the approved effect run on
    the claim alone: the fence checks the version this holder saved last."""
    import sqlite3

    import pytest

    from intermission import ConflictError

    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    s = InMemoryAgentSession.of("t-5")
    s.context.put("decision", None)
    s.pending(True, "needs a person")
    store.save(s)
    raw = sqlite3.connect(path, isolation_level=None)
    columns = [r[0] for r in raw.execute("SELECT name FROM pragma_table_info('im_sessions')")]
    kept = [c for c in columns if c not in ("claimed_by", "claim_until")]
    ran: list[str] = []
    with pytest.raises(ConflictError), store.resume("t-5") as claimed:
        before = raw.execute(f"SELECT {', '.join(kept)} FROM im_sessions WHERE id = 't-5'")
        row = before.fetchone()
        claimed.context.put("decision", "APPROVE")
        save_ahead(store, claimed)
        # the crash: the row as before the decision's save, the claim still held
        raw.execute(f"UPDATE im_sessions SET {', '.join(c + ' = ?' for c in kept)} "
                    "WHERE id = 't-5'", row)  # fmt: skip
        claimed.once("charge", lambda: ran.append("charged") or "ok")
    assert ran == []  # the effect never ran
    stored = store.load("t-5")
    assert stored.context.get("decision") is None and "charge" not in stored.ledger
    raw.close()
    store.close()


def test_an_effects_end_lost_by_the_database_is_written_again_by_the_final_save(
    tmp_path: Path,
) -> None:
    """The ``completed`` mark is not flushed; a database that lost it (and its audit
    record) in a crash gets both again from the save that ends the run, so the session
    does not end done with its effect shown as started."""
    import sqlite3

    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    s = InMemoryAgentSession.of("t-6")
    s.pending(True, "needs a person")
    store.save(s)
    raw = sqlite3.connect(path, isolation_level=None)
    kept: dict[str, Any] = {}

    def charge() -> str:  # runs after the flushed `started` mark: what a crash keeps
        kept["ledger"] = raw.execute("SELECT status, entry FROM im_ledger").fetchone()
        kept["head"] = raw.execute(
            "SELECT audit_seq, audit_head FROM im_sessions WHERE id = 't-6'"
        ).fetchone()
        return "charged"

    with store.resume("t-6") as claimed:
        claimed.pending(False)
        assert claimed.once("charge", charge) == "charged"
        # the crash loses the unflushed end: the ledger row and its audit record go back
        raw.execute("UPDATE im_ledger SET status = ?, entry = ?", kept["ledger"])
        raw.execute("DELETE FROM im_audit WHERE session_id = 't-6' AND seq > ?",
                    (kept["head"][0],))  # fmt: skip
        raw.execute("UPDATE im_sessions SET audit_seq = ?, audit_head = ? WHERE id = 't-6'",
                    kept["head"])  # fmt: skip
        assert kept["ledger"][0] == "started"
    stored = store.load("t-6")
    assert stored.ledger["charge"].status == "completed"
    assert stored.ledger["charge"].result == "charged"
    check = store.verify_audit("t-6")
    assert check.ok, check
    assert "effect.finished" in [r.action for r in store.audit("t-6")]
    raw.close()
    store.close()
