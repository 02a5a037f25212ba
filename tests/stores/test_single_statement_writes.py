"""PostgreSQL: a claim (with the session's read) and a resume's save are each one statement
committed on its own — no BEGIN and COMMIT round trips — and still all-or-nothing, fenced,
and honest about a connection lost under them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from tests._helpers import fresh_pg

from intermission import END, FlowEngine, GraphSpec, InMemoryAgentSession
from intermission.errors import ConflictError, StoreUnavailableError
from intermission.stores.postgres import PostgresStore


def _graph() -> Any:
    spec = GraphSpec("gate")
    spec.add_start().link_add("gate")
    spec.add_activity("gate").task(
        lambda ctx, node: ctx.session.pending(ctx.get("decision") is None, "needs a person")
    ).link_add("after")
    spec.add_activity("after").task(lambda ctx, node: ctx.put("after", True)).link_add(END)
    spec.add_end()
    return spec.build()


def _traced(store: Any) -> list[tuple[str, str]]:
    """Record each statement the store's connections run, with the connection's
    transaction status just before it (IDLE: the statement is its own transaction)."""
    import psycopg

    seen: list[tuple[str, str]] = []

    class Cursor(psycopg.Cursor):  # type: ignore[type-arg]
        def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
            status = self.connection.info.transaction_status.name
            seen.append((str(query), status))
            return super().execute(query, params, **kw)

    connect = store._connect

    def traced_connect() -> Any:
        conn = connect()
        conn.cursor_factory = Cursor
        return conn

    store._connect = traced_connect
    with store._conns_lock:  # (connections opened before: closed, new ones traced)
        for conn in store._idle:
            conn.close()
        store._conns = [c for c in store._conns if c not in store._idle]
        store._idle = []
    return seen


def _paused(store: Any, sid: str) -> None:
    s = InMemoryAgentSession.of(sid)
    FlowEngine().eval(_graph(), s.context)
    assert s.is_pending
    store.save(s)


def test_a_claimed_resume_is_two_statements_each_its_own_transaction() -> None:
    store = fresh_pg()
    try:
        _paused(store, "one-1")
        seen = _traced(store)
        with store.resume("one-1") as s:
            s.context.put("decision", "APPROVE")
            FlowEngine().eval(_graph(), s.context)
        writes = [(q, st) for q, st in seen if not q.lstrip().upper().startswith("SELECT")]
        assert len(writes) == 2 and len(seen) == 3, seen  # (the claim's read: one SELECT)
        claim, save = writes
        assert all(status == "IDLE" for _, status in writes)  # no BEGIN before either
        assert "set_config('synchronous_commit', 'off', true)" in claim[0]  # a lease: no fsync
        assert "synchronous_commit" not in save[0]  # the save that ends the run: flushed
        assert "im_events" in save[0]  # its events go in with the row, in the same statement
        loaded = store.load("one-1")
        assert loaded.context.get("after") is True and not loaded.is_pending
        assert store.raw_row("one-1") is not None
        seen.clear()
        store.load("one-1")
        assert len(seen) == 1  # a load: the row, its events and its ledger in one read
    finally:
        store.close()


def _held_commit(store: Any) -> tuple[threading.Event, threading.Event]:
    """Make ``store``'s multi-statement durable transactions wait before their COMMIT:
    (entered, release)."""
    entered, release = threading.Event(), threading.Event()
    transaction = store._transaction

    @contextmanager
    def held(conn: Any, mode: str, single: bool = False) -> Iterator[None]:
        with transaction(conn, mode, single):
            yield
            if mode == "write" and not single:  # the row is locked, nothing committed yet
                entered.set()
                release.wait(30)

    store._transaction = held
    return entered, release


@pytest.mark.parametrize("writer", ["save", "put_snapshot"])
def test_a_claim_that_waited_for_a_writer_reads_that_writer_s_events_too(writer: str) -> None:
    # a claim that waits on the row lock of a save in flight gets the row that save
    # commits: its events and ledger must be read as new as that row, never older
    def once(ctx: Any, node: Any) -> None:
        ctx.put("fx", ctx.session.once("fx", lambda: 42))

    spec = GraphSpec("gate-fx")
    spec.add_start().link_add("gate")
    spec.add_activity("gate").task(
        lambda ctx, node: ctx.session.pending(ctx.get("decision") is None, "needs a person")
    ).link_add("fx")
    spec.add_activity("fx").task(once).link_add(END)
    spec.add_end()
    graph = spec.build()
    store = fresh_pg()
    writer_store = PostgresStore(store.dsn)
    claimer = PostgresStore(store.dsn)
    try:
        s = InMemoryAgentSession.of("one-4")
        FlowEngine().eval(graph, s.context)
        store.save(s)
        copy = writer_store.load("one-4")
        copy.context.put("decision", "APPROVE")
        FlowEngine().eval(graph, copy.context)  # its ledger entry dirty: a multi-statement save
        entered, release = _held_commit(writer_store)
        if writer == "save":
            write = threading.Thread(target=writer_store.save, args=(copy,))
        else:  # the whole log rewritten (an operator puts a snapshot back)
            snap = copy.snapshot()
            write = threading.Thread(target=writer_store.put_snapshot, args=(snap, 1))
        write.start()
        assert entered.wait(30)
        claimed: list[Any] = []

        def take() -> None:
            held = claimer.claim("one-4")
            claimed.append((held, held.__enter__()))

        claim = threading.Thread(target=take)
        claim.start()
        time.sleep(0.3)  # (the claim now waits on the writer's row lock)
        release.set()
        write.join(30)
        claim.join(30)
        assert len(claimed) == 1
        held, got = claimed[0]
        stored = store.load("one-4")
        assert got.store_version == stored.store_version == 2
        assert [e.model_dump() for e in got.events] == [e.model_dump() for e in stored.events]
        assert set(got.ledger) == set(stored.ledger) == {"fx"}
        held.__exit__(None, None, None)  # its save: the log it read is the one stored
        assert store.load("one-4").store_version == 3
    finally:
        writer_store.close()
        claimer.close()
        store.close()


def test_a_stale_copy_saved_in_one_statement_writes_neither_row_nor_events() -> None:
    store = fresh_pg()
    try:
        _paused(store, "one-2")
        first, stale = store.load("one-2"), store.load("one-2")
        for copy, who in ((first, "first"), (stale, "stale")):
            copy.context.put("decision", who)
            FlowEngine().eval(_graph(), copy.context)
        store.save(first)
        with store._tx("read") as run:
            before = run("SELECT part, n, events FROM im_events WHERE session_id = ?",
                         ("one-2",)).fetchall()  # fmt: skip
        with pytest.raises(ConflictError):
            store.save(stale)
        with store._tx("read") as run:
            after = run("SELECT part, n, events FROM im_events WHERE session_id = ?",
                        ("one-2",)).fetchall()  # fmt: skip
        assert after == before  # the INSERT rode on the UPDATE: no row, no events
        loaded = store.load("one-2")
        assert loaded.context.get("decision") == "first"
        assert [e.model_dump() for e in loaded.events] == [e.model_dump() for e in first.events]
    finally:
        store.close()


def test_a_connection_lost_under_a_single_statement_save_says_the_outcome_is_unknown() -> None:
    import psycopg

    store = fresh_pg(outage_s=0.0)
    try:
        _paused(store, "one-3")
        s = store.load("one-3")
        s.context.put("decision", "APPROVE")
        FlowEngine().eval(_graph(), s.context)
        blocker = psycopg.connect(store.dsn)  # holds the row: the save waits on its lock
        blocker.execute("SELECT 1 FROM im_sessions WHERE id = 'one-3' FOR UPDATE")
        errors: list[BaseException] = []

        def save() -> None:
            try:
                store.save(s)
            except BaseException as exc:
                errors.append(exc)

        saver = threading.Thread(target=save)
        saver.start()
        killer = psycopg.connect(store.dsn, autocommit=True)
        deadline = time.monotonic() + 30
        while True:  # the save's backend, waiting on the lock
            row = killer.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%UPDATE im_sessions%'"
            ).fetchone()
            if row is not None or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert row is not None
        killer.execute("SELECT pg_terminate_backend(%s)", (row[0],))
        saver.join(30)
        blocker.rollback()
        blocker.close()
        killer.close()
        assert len(errors) == 1 and isinstance(errors[0], StoreUnavailableError)
        # the statement was its own commit: nobody can say it did not happen
        assert errors[0].outcome_unknown
        assert store.load("one-3").is_pending  # (here it did not)
    finally:
        store.close()
