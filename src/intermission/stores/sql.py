"""The SQL store shared by SQLite and PostgreSQL: fixed table names, parameters for every
value, one transaction per save, compare-and-set versions and leased claims (R29–R31)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .._clock import SYSTEM_CLOCK, Clock
from ..core.ledger import LedgerEntry
from ..core.session import InMemoryAgentSession
from ..core.snapshot import parse_snapshot
from ..errors import (
    ConflictError,
    EffectOutcomeUnknownError,
    SessionBusyError,
    SessionNotFoundError,
    StoreError,
)
from .base import DEFAULT_LEASE_MS, PendingSession, claim_token, row_of, session_from

__all__ = ["SCHEMA_VERSION", "SQLStore"]

SCHEMA_VERSION = 2

# Each migration is a list of statements; {real} and {int} are the dialect's column types,
# {cover} the columns the dialect adds to the pending indexes.
MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE im_sessions (
            id TEXT PRIMARY KEY,
            version {int} NOT NULL,
            status TEXT NOT NULL,
            agent TEXT,
            reason TEXT,
            tasks TEXT NOT NULL,
            deadline_ms {real},
            request TEXT,
            snapshot TEXT NOT NULL,
            updated_ms {real} NOT NULL,
            claimed_by TEXT,
            claim_until {real}
        )""",
        # partial indexes: only pending rows are listed, so only they pay for an index entry
        "CREATE INDEX im_sessions_pending ON im_sessions (updated_ms, id) WHERE status = 'pending'",
        "CREATE INDEX im_sessions_pending_agent ON im_sessions (agent, updated_ms, id) "
        "WHERE status = 'pending'",
        """CREATE TABLE im_ledger (
            session_id TEXT NOT NULL,
            key TEXT NOT NULL,
            status TEXT NOT NULL,
            entry TEXT NOT NULL,
            PRIMARY KEY (session_id, key)
        )""",
    ],
    [
        # The event log leaves the snapshot: its first chunk lives in the row (a pause
        # writes one row), later chunks in im_events (a resume appends the events it
        # added instead of rewriting, and growing, the row). A load leaves them unparsed
        # until someone reads them. Rows of version 1 keep their log inside the snapshot
        # until their next save.
        "ALTER TABLE im_sessions ADD COLUMN events TEXT",
        "ALTER TABLE im_sessions ADD COLUMN events_n {int}",
        """CREATE TABLE im_events (
            session_id TEXT NOT NULL,
            part {int} NOT NULL,
            n {int} NOT NULL,
            events TEXT NOT NULL,
            PRIMARY KEY (session_id, part)
        )""",
        # covering indexes where the dialect allows (SQLite): a page of pending() then
        # reads only index pages, not one table page per (snapshot-sized) row
        "DROP INDEX im_sessions_pending",
        "DROP INDEX im_sessions_pending_agent",
        "CREATE INDEX im_sessions_pending ON im_sessions (updated_ms, id{cover}) "
        "WHERE status = 'pending'",
        "CREATE INDEX im_sessions_pending_agent ON im_sessions (agent, updated_ms, id{cover}) "
        "WHERE status = 'pending'",
    ],
]

_ROW = "snapshot, version, events, events_n"
_INLINE_MAX = 2048
"""The longest event log text kept in the session row itself."""
"""The columns a session is rebuilt from (see SQLStore._session)."""

_PENDING = (
    "SELECT id, agent, reason, tasks, deadline_ms, updated_ms, request FROM im_sessions "
    "WHERE status = 'pending'"
)


class _Duplicate(Exception):
    """An insert met an existing id (turned into ConflictError outside the transaction)."""


class _Tx:
    """One transaction on a pooled connection. A class rather than nested generator
    context managers: every save and resume passes through here, and the generator
    machinery cost more than the SQL of a small commit."""

    __slots__ = ("conn", "cur", "inner", "mode", "store")

    def __init__(self, store: SQLStore, mode: str) -> None:
        self.store = store
        self.mode = mode

    def __enter__(self) -> Callable[..., Any]:
        store = self.store
        conn = self.conn = store._borrow()
        try:
            self.inner = store._transaction(conn, self.mode)
            self.inner.__enter__()
        except BaseException:
            store._give_back(conn)
            raise
        self.cur = conn.cursor()
        return self.run if store.placeholder == "?" else self.run_translated

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        cur = self.cur
        cur.execute(sql, params)
        return cur

    def run_translated(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        cur = self.cur
        cur.execute(self.store._sql(sql), params)
        return cur

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        try:
            self.inner.__exit__(kind, exc, tb)
        finally:
            self.store._give_back(self.conn)


class SQLStore:
    """Base of :class:`SQLiteStore` and :class:`PostgresStore` (subclasses give the driver)."""

    placeholder = "?"
    returning = True
    """The driver's SQL has ``UPDATE … RETURNING`` (SQLite 3.35+, PostgreSQL)."""
    int_type = "INTEGER"
    real_type = "REAL"
    cover = ""
    """Extra key columns that make the pending indexes covering (see MIGRATIONS)."""

    def __init__(self, *, clock: Clock | None = None, lease_ms: float = DEFAULT_LEASE_MS) -> None:
        self.clock = clock or SYSTEM_CLOCK
        self.lease_ms = lease_ms
        self._idle: list[Any] = []
        self._conns: list[Any] = []
        self._conns_lock = threading.Lock()
        self._migrate()

    # -- driver hooks ------------------------------------------------------------------
    def _connect(self) -> Any:
        raise NotImplementedError

    def _transaction(self, conn: Any, mode: str) -> Any:
        """A context manager around one transaction. ``mode``: ``write`` (takes the write
        lock, durable), ``lease`` (a write whose loss in a power cut is harmless: a claim),
        ``read``."""
        raise NotImplementedError

    integrity_errors: tuple[type[BaseException], ...] = ()

    # -- plumbing ----------------------------------------------------------------------
    def _borrow(self) -> Any:
        # A small pool rather than one connection per thread: short-lived threads (a click
        # handler, a worker) must not leave connections behind. Claims use the same
        # connections as saves: SQLite drops a connection's page cache whenever another
        # connection wrote, so a claim and its save on one connection read less.
        idle = self._idle
        with self._conns_lock:
            if idle:
                return idle.pop()
        conn = self._connect()
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    def _give_back(self, conn: Any) -> None:
        with self._conns_lock:
            if conn in self._conns:
                self._idle.append(conn)

    def _sql(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def _tx(self, mode: str = "write") -> _Tx:
        """``with store._tx(mode) as run: run(sql, params)`` — one transaction on a pooled
        connection (modes as in :meth:`_transaction`)."""
        return _Tx(self, mode)

    def _migrate(self) -> None:
        with self._tx() as run:
            run("CREATE TABLE IF NOT EXISTS im_schema (version INTEGER NOT NULL)")
            row = run("SELECT MAX(version) FROM im_schema").fetchone()
            self._apply_migrations(run, row[0] if row and row[0] is not None else 0)

    def _apply_migrations(self, run: Callable[..., Any], current: int) -> None:
        """Apply every migration after ``current`` (inside the caller's transaction)."""
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"the store's schema is version {current}, newer than this intermission "
                f"knows ({SCHEMA_VERSION}); upgrade intermission"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                run(statement.format(int=self.int_type, real=self.real_type, cover=self.cover))
            run("INSERT INTO im_schema (version) VALUES (?)", (version,))

    def close(self) -> None:
        """Close every connection this store opened."""
        with self._conns_lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
            self._idle.clear()

    def __enter__(self) -> SQLStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the contract ------------------------------------------------------------------
    def save(self, session: InMemoryAgentSession) -> int:
        """Insert or compare-and-set update; returns the new version."""
        return self._save(session, release=False)

    def _save(self, session: InMemoryAgentSession, *, release: bool) -> int:
        try:
            return self._save_tx(session, release)
        except _Duplicate:
            # reported after the rollback: an aborted transaction cannot be queried
            sid = session.session_id
            raise ConflictError(sid, 0, self._version(sid)) from None

    def _save_tx(self, session: InMemoryAgentSession, release: bool) -> int:
        row = row_of(session)
        now = self.clock.now_ms()
        expected = session.store_version
        values = (
            row.status, row.agent, row.reason, row.tasks_json, row.deadline_ms,
            row.request_json, row.state_json, now,
        )  # fmt: skip
        log = session.events
        replace, chunk, count, part = log.unsaved_chunk()
        sid = row.session_id
        # a whole log goes into the row while it is small; a big one into im_events, so
        # that updating the row does not rewrite it (chunk numbers: the row's is 0)
        inline = replace and len(chunk) <= _INLINE_MAX
        inline_chunk = (chunk, count) if inline else ("[]", 0)
        with self._tx() as run:
            if expected == 0:
                try:
                    run(
                        "INSERT INTO im_sessions (status, agent, reason, tasks, deadline_ms, "
                        "request, snapshot, updated_ms, events, events_n, id, version) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
                        (*values, *inline_chunk, sid),
                    )
                except self.integrity_errors:
                    raise _Duplicate from None
            else:
                claim_sql = (
                    "claimed_by = NULL, claim_until = NULL"
                    if release
                    else "claimed_by = claimed_by, claim_until = claim_until"
                )
                inline_sql = "events = ?, events_n = ?, " if replace else ""
                inline_values = inline_chunk if replace else ()
                cur = run(
                    "UPDATE im_sessions SET status = ?, agent = ?, reason = ?, tasks = ?, "
                    "deadline_ms = ?, request = ?, snapshot = ?, updated_ms = ?, "
                    f"{inline_sql}version = version + 1, {claim_sql} "
                    "WHERE id = ? AND version = ? AND "
                    "(claimed_by IS NULL OR claim_until < ? OR claimed_by = ?)",
                    (*values, *inline_values, sid, expected, now, session.claim_token or ""),
                )
                if cur.rowcount != 1:
                    found = run(
                        "SELECT version, claimed_by, claim_until FROM im_sessions WHERE id = ?",
                        (sid,),
                    ).fetchone()
                    if found is None:
                        raise ConflictError(sid, expected, None)
                    if found[0] == expected:
                        raise SessionBusyError(sid)
                    raise ConflictError(sid, expected, found[0])
            if replace:  # the whole log is written anew: older chunks go
                run("DELETE FROM im_events WHERE session_id = ?", (sid,))
            if count and not inline:
                run(
                    "INSERT INTO im_events (session_id, part, n, events) VALUES (?, ?, ?, ?)",
                    (sid, 1 if replace else part, count, chunk),
                )
            for key, entry in session.ledger.items():
                self._put_ledger(run, sid, key, entry)
        # chunk 0 is the row's; a big whole log is chunk 1, appended ones follow
        parts = (1 if inline else 2) if replace else part + (1 if count else 0)
        log.mark_stored(len(log), parts)
        session.store_version = expected + 1
        return session.store_version

    def _version(self, session_id: str) -> int | None:
        with self._tx("read") as run:
            row = run("SELECT version FROM im_sessions WHERE id = ?", (session_id,)).fetchone()
        return None if row is None else int(row[0])

    @staticmethod
    def _put_ledger(run: Callable[..., Any], session_id: str, key: str, entry: LedgerEntry) -> None:
        run(
            "INSERT INTO im_ledger (session_id, key, status, entry) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (session_id, key) DO UPDATE SET status = excluded.status, "
            "entry = excluded.entry",
            (session_id, key, entry.status, entry.model_dump_json()),
        )

    def _ledger_hook(self, session_id: str) -> Callable[[str, LedgerEntry], None]:
        def hook(key: str, entry: LedgerEntry) -> None:
            with self._tx() as run:
                if entry.status != "started":
                    self._put_ledger(run, session_id, key, entry)
                    return
                # 'started' may only replace nothing or a failed attempt: another process
                # that started (or finished) the same effect wins, so it never runs twice.
                cur = run(
                    "INSERT INTO im_ledger (session_id, key, status, entry) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (session_id, key) DO UPDATE SET status = excluded.status, "
                    "entry = excluded.entry WHERE im_ledger.status = 'failed'",
                    (session_id, key, entry.status, entry.model_dump_json()),
                )
                if cur.rowcount != 1:
                    raise EffectOutcomeUnknownError(key, session_id=session_id)

        return hook

    @staticmethod
    def _rows(run: Callable[..., Any], session_id: str) -> tuple[Any, ...] | None:
        row = run(f"SELECT {_ROW} FROM im_sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            return None
        return (*row, *SQLStore._side_rows(run, session_id))

    @staticmethod
    def _side_rows(run: Callable[..., Any], session_id: str) -> tuple[list[Any], list[Any]]:
        """A session's event chunks (oldest first) and ledger rows."""
        chunks = run(
            "SELECT n, events FROM im_events WHERE session_id = ? ORDER BY part", (session_id,)
        ).fetchall()
        ledger = run(
            "SELECT key, entry FROM im_ledger WHERE session_id = ?", (session_id,)
        ).fetchall()
        return chunks, ledger

    def _session(self, session_id: str, rows: tuple[Any, ...]) -> InMemoryAgentSession:
        state, version, first, first_n, chunks, ledger_rows = rows
        if first is not None:  # None: a version-1 row, its log still in the snapshot
            chunks = [(first_n, first), *chunks]
        ledger = {k: LedgerEntry.model_validate_json(e) for k, e in ledger_rows}
        session = session_from(state, chunks, int(version), ledger)
        session.ledger_hook = self._ledger_hook(session_id)
        return session

    def load(self, session_id: str) -> InMemoryAgentSession:
        """Load a session (its live ledger rows included)."""
        with self._tx("read") as run:
            rows = self._rows(run, session_id)
        if rows is None:
            raise SessionNotFoundError(session_id)
        return self._session(session_id, rows)

    def delete(self, session_id: str) -> None:
        """Remove a session and its ledger."""
        with self._tx() as run:
            run("DELETE FROM im_ledger WHERE session_id = ?", (session_id,))
            run("DELETE FROM im_events WHERE session_id = ?", (session_id,))
            run("DELETE FROM im_sessions WHERE id = ?", (session_id,))

    def pending_query(
        self, limit: int, agent: str | None, before: PendingSession | None
    ) -> tuple[str, tuple[Any, ...]]:
        """The SQL of :meth:`pending` (exposed so tests can EXPLAIN it)."""
        sql = _PENDING
        params: tuple[Any, ...] = ()
        if agent is not None:
            sql += " AND agent = ?"
            params += (agent,)
        if before is not None:
            sql += " AND (updated_ms < ? OR (updated_ms = ? AND id < ?))"
            params += (before.updated_ms, before.updated_ms, before.session_id)
        sql += " ORDER BY updated_ms DESC, id DESC LIMIT ?"
        return sql, (*params, limit)

    def pending(
        self, limit: int = 50, agent: str | None = None, before: PendingSession | None = None
    ) -> list[PendingSession]:
        """Pending sessions, newest first; page with ``before=<last item>``."""
        sql, params = self.pending_query(limit, agent, before)
        with self._tx("query") as run:
            rows = run(sql, params).fetchall()
        return PendingSession.from_rows(rows)

    @contextmanager
    def resume(self, session_id: str) -> Iterator[InMemoryAgentSession]:
        """Claim, load, yield; save and release on success, release only on error."""
        token = claim_token()
        now = self.clock.now_ms()
        # A claim is a lease: it must be atomic and visible to every other process at once,
        # but it need not survive a power cut (nothing of the resume survives one either),
        # so it skips the fsync that a durable commit pays.
        claim = (
            "UPDATE im_sessions SET claimed_by = ?, claim_until = ? "
            "WHERE id = ? AND (claimed_by IS NULL OR claim_until < ?)"
        )
        params = (token, now + self.lease_ms, session_id, now)
        with self._tx("lease") as run:
            # claim and read in one transaction (one statement where RETURNING exists)
            if self.returning:
                row = run(f"{claim} RETURNING {_ROW}", params).fetchone()
                rows = None if row is None else (*row, *self._side_rows(run, session_id))
            else:
                claimed = run(claim, params).rowcount == 1
                rows = self._rows(run, session_id) if claimed else None
            if rows is None:
                exists = run("SELECT 1 FROM im_sessions WHERE id = ?", (session_id,)).fetchone()
                raise SessionBusyError(session_id) if exists else SessionNotFoundError(session_id)
        try:
            session = self._session(session_id, rows)
            session.claim_token = token
            yield session
        except BaseException:
            with self._tx("lease") as run:
                run(
                    "UPDATE im_sessions SET claimed_by = NULL, claim_until = NULL "
                    "WHERE id = ? AND claimed_by = ?",
                    (session_id, token),
                )
            raise
        self._save(session, release=True)
        session.claim_token = None

    def put_snapshot(self, snapshot: Any, version: int = 0) -> int:
        """Validate a snapshot (JSON text, dict or model) and store it: ``version`` 0 inserts,
        otherwise compare-and-set. Invalid data raises a typed error and changes nothing."""
        session = InMemoryAgentSession.restore(parse_snapshot(snapshot))
        session.store_version = version
        return self.save(session)

    def raw_row(self, session_id: str) -> tuple[Any, ...] | None:
        """The stored columns of a session (for tests and debugging)."""
        with self._tx("read") as run:
            row = run("SELECT * FROM im_sessions WHERE id = ?", (session_id,)).fetchone()
        return tuple(row) if row is not None else None

    def count(self) -> int:
        """How many sessions are stored."""
        with self._tx("read") as run:
            return int(run("SELECT COUNT(*) FROM im_sessions").fetchone()[0])
