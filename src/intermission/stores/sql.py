"""The SQL store shared by SQLite and PostgreSQL: fixed table names, parameters for every
value, one transaction per save, compare-and-set versions, leased claims and a ledger that
only moves forward (R29–R31, R39, R40)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .. import _check
from .._clock import SYSTEM_CLOCK, Clock
from .._secrets import mask_url
from ..audit import AuditEntry, forget_noted
from ..core.ledger import effect_audit
from ..core.session import InMemoryAgentSession
from ..core.snapshot import SCHEMA_VERSION as SNAPSHOT_SCHEMA
from ..core.snapshot import check_size, parse_snapshot
from ..errors import (
    ConflictError,
    SessionBusyError,
    SessionNotFoundError,
    SnapshotSchemaError,
    StoreError,
    StoreMigrationError,
    StoreSchemaError,
)
from ._pool import Pool
from .audit_chain import resolve_key, with_effects
from .audit_sql import AuditSQL
from .base import (
    DEFAULT_LEASE_MS,
    StoreMethods,
    check_id,
    check_options,
    check_saved,
    row_of,
)
from .clock import ServerClock
from .lease import Leases
from .outbox_rules import derive
from .outbox_sql import SQLOutbox
from .outbox_sql import write as write_outbox
from .rows import ledger_of, session_from
from .sql_claims import SQLClaims
from .sql_ledger import SQLLedger
from .sql_listings import PENDING_SELECT, SQLListings
from .sql_schema import BACKFILLS, MIGRATIONS, ONE_NUMBERING, SCHEMA_VERSION, missing_column
from .sql_schema import SESSION_COLUMNS as _ROW
from .told import telling

__all__ = ["SCHEMA_VERSION", "SQLStore"]

_INLINE_MAX = 2048
"""The longest event log text kept in the session row itself."""
_EVENTS_KEY = len(',"events":')
_AUDIT_HEAD = ("audit_seq", "audit_head")
_ID_HEAD = (
    "COALESCE((SELECT MAX(seq) FROM im_audit WHERE session_id = ?), 0), "
    "(SELECT hash FROM im_audit WHERE session_id = ? ORDER BY seq DESC LIMIT 1)"
)
"""A new row's head: the last record its id already has (a deleted generation's, a refusal
of the id before it was stored), so that a row's head is 0 only when its id has no record."""
"""The session row's columns that keep its audit head (see audit_sql)."""
"""What the log adds to a snapshot besides its array (see snapshot_json)."""


class _Duplicate(Exception):
    """An insert met an existing id (turned into ConflictError outside the transaction)."""


class SQLStore(AuditSQL, SQLClaims, SQLLedger, SQLListings, StoreMethods, Pool):
    """Base of :class:`SQLiteStore` and :class:`PostgresStore` (subclasses give the driver).

    ``lease_ms``: how long a claim outlives a holder that stopped renewing it (a live
    holder renews it a third of the way through). ``heartbeat=False`` turns renewal off
    (tests of dead holders). ``outage_s``: how long a write that must not be lost (a
    ledger entry of an effect that ran, the save ending a resume) waits for a database
    that went away before it gives up with StoreUnavailableError. ``outbox``: saves write
    the notifications they cause (``store.outbox``, see :mod:`intermission.notify`); True
    also records it in the database, None (the default) follows what the database records.
    ``audit_key``: the key that makes the audit chain HMAC-SHA256 (None: the environment's
    ``INTERMISSION_AUDIT_KEY``, else plain SHA-256; see :mod:`intermission.audit`).
    """

    returning = True
    """The driver's SQL has ``UPDATE … RETURNING`` (SQLite 3.35+, PostgreSQL)."""
    int_type = "INTEGER"
    real_type = "REAL"
    cover = ""
    """Extra key columns that make the pending indexes covering (see MIGRATIONS)."""
    for_update = ""
    """Row locking for read-then-write steps (PostgreSQL; SQLite's write lock covers it)."""
    server_now: str | None = None
    """SQL for the database server's own clock in epoch ms (PostgreSQL): statements stamp
    and judge claims, leases and saves by it. None: the store's Python clock is the one."""
    length_sql = "length(snapshot)"
    """The stored snapshot's length, in the unit :meth:`text_length` counts."""
    length_unit = "characters"
    side_rows_sql: str | None = None
    """Columns reading a session's event chunks and its family's ledger rows inside the
    statement that reads its row (n, events, key, entry arrays; PostgreSQL), or None: they
    are two more statements."""
    unflushed_where = ""
    """What a write committed on its own (``_tx(single=True)``) adds to its WHERE to skip
    its flush (PostgreSQL; SQLite's transaction does it)."""

    integrity_errors: tuple[type[BaseException], ...] = ()

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        lease_ms: float = DEFAULT_LEASE_MS,
        heartbeat: bool = True,
        outage_s: float = 10.0,
        outbox: bool | None = None,
        create: bool = True,
        audit_key: str | bytes | None = None,
    ) -> None:
        self._audit_key = resolve_key(audit_key)
        check_options(
            lease_ms, heartbeat=heartbeat, outage_s=outage_s, outbox=outbox, create=create
        )
        self.create = create
        super().__init__()
        self._server: ServerClock | None = None
        if clock is None and self.server_now is not None:
            self._server = ServerClock()
            self.clock: Clock = self._server
            self._now_sql = self.server_now
        else:  # SQLite (one machine), or a clock a test gives: stamped from Python
            self.clock = clock or SYSTEM_CLOCK
            self._now_sql = "?"
        self._pending_sql = PENDING_SELECT.format(length=self.length_sql)
        self.lease_ms = lease_ms
        self.outage_s = outage_s
        self.leases = Leases(lease_ms, self._renew, enabled=heartbeat)
        try:
            self._migrate()
        except BaseException:
            self.close()  # (a refused store leaves no connection open behind it)
            raise
        self.outbox = SQLOutbox(self, outbox)

    def _migrate(self) -> None:
        with self._tx() as run:
            self._check_exists(run)
            run("CREATE TABLE IF NOT EXISTS im_schema (version INTEGER NOT NULL)")
            row = run("SELECT MAX(version) FROM im_schema").fetchone()
            self._apply_migrations(run, row[0] if row and row[0] is not None else 0)
            self._read_server_clock(run)

    schema_table_sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'im_schema'"
    """A row when the database holds a store (its schema table)."""

    def _check_exists(self, run: Callable[..., Any]) -> None:
        """With ``create=False``: refuse a database that holds no store (makes nothing)."""
        if not self.create and run(self.schema_table_sql).fetchone() is None:
            raise StoreError(f"{self._where()} holds no intermission store; nothing was created")

    def _where(self) -> str:
        """The database, as an error names it."""
        return "the database"

    def _read_server_clock(self, run: Callable[..., Any]) -> None:
        """Take the server clock's offset when the store opens (later claims and renewals
        refresh it from what they return)."""
        if self._server is not None:
            sent = time.monotonic()
            server_ms = run(f"SELECT {self._now_sql}").fetchone()[0]
            self._server.observe(float(server_ms), sent, time.monotonic())

    def _now(self) -> tuple[float, ...]:
        """The parameter each ``{now}`` of a statement takes: none when the server reads
        its own clock, else the store clock's time."""
        return () if self._server is not None else (self.clock.now_ms(),)

    @staticmethod
    def text_length(text: str) -> int:
        """The length of a snapshot as the database counts it (see ``length_sql``)."""
        return len(text)

    columns_sql = "SELECT name FROM pragma_table_info(?)"
    """The names of a table's columns (see :func:`~.sql_schema.missing_column`)."""

    def _apply_migrations(self, run: Callable[..., Any], current: int) -> None:
        """Bring the tables to SCHEMA_VERSION (inside the caller's transaction). A store
        recorded below ONE_NUMBERING replays every migration from the first, each
        statement idempotent: its version does not tell which historic layout it has
        (see sql_schema); a later one applies the migrations after its version.
        A newer store is refused (StoreSchemaError); a statement the database refuses
        is a StoreMigrationError naming it (the transaction rolls back, nothing changed)."""
        if current > SCHEMA_VERSION:
            raise StoreSchemaError(current, SCHEMA_VERSION)
        if current == SCHEMA_VERSION:
            return
        first = 1 if current < ONE_NUMBERING else current + 1
        for version in range(first, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                sql = statement.format(int=self.int_type, real=self.real_type, cover=self.cover)
                try:
                    adds = missing_column(sql)
                    if adds is not None:
                        have = {r[0] for r in run(self.columns_sql, (adds[0],)).fetchall()}
                        if adds[1] in have:
                            continue
                    run(sql)
                except self.driver_errors as exc:
                    if self._migration_outage(exc):
                        raise  # the database went away (or may not be written): the store maps it
                    raise StoreMigrationError(version, sql, self._said_of(exc)) from exc
            backfill = BACKFILLS.get(version)
            if backfill is not None:  # (data a migration derives in Python, same transaction)
                backfill(run)
            if version > current:
                run("INSERT INTO im_schema (version) VALUES (?)", (version,))

    def _migration_outage(self, exc: BaseException) -> bool:
        """Whether a migration's error is the database going away (retry later), not the
        statement failing."""
        return self._lost(exc, None)

    def _said_of(self, exc: BaseException) -> str:
        """A driver's error on one line, as a migration error quotes it."""
        return mask_url(f"{type(exc).__name__}: {' '.join(str(exc).split())}")

    def close(self) -> None:
        """Stop renewing claims and close every connection this store opened."""
        self.leases.close()
        super().close()

    def __enter__(self) -> SQLStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- saves -------------------------------------------------------------------------
    def save(self, session: InMemoryAgentSession) -> int:
        """Insert or compare-and-set update; returns the new version."""
        with telling(check_saved(session)):  # (tracing: a pause is on record from now)
            return self._save(session, release=False)

    def save_ahead(self, session: InMemoryAgentSession) -> int:
        """:meth:`save`, committed without waiting for its flush to disk: for a save that
        must be durable before an effect of the session starts, and need not be before
        (see :func:`~intermission.stores.base.save_ahead`)."""
        with telling(check_saved(session)):
            # (an effect started with this save, not by the ledger hook: flushed)
            mode = "write" if session.ledger_dirty else "unflushed"
            return self._save(session, release=False, mode=mode)

    def _save(self, session: InMemoryAgentSession, *, release: bool, mode: str = "write") -> int:
        try:
            version = self._save_tx(session, release, mode)
        except _Duplicate:
            # reported after the rollback: an aborted transaction cannot be queried
            sid = session.session_id
            raise ConflictError(sid, 0, self._version(sid)) from None
        session.ledger_dirty.clear()
        if session.ledger_hook is None:  # from now on its ledger changes are written live
            session.ledger_hook = self._write_ledger
        return version

    def _save_tx(self, session: InMemoryAgentSession, release: bool, mode: str) -> int:
        row = row_of(session)
        now = self._now()
        expected = session.store_version
        values = (
            row.status, row.agent, row.reason, row.tasks_json, row.deadline_ms,
            row.request_json, row.state_json, self.text_length(row.state_json), row.due_ms,
            row.progress, row.agent_version,
        )  # fmt: skip
        log = session.events
        replace, chunk, count, part = log.unsaved_chunk()
        sid = row.session_id
        chars = log.chars_after(replace, chunk)
        check_size(row.state_json, sid, _EVENTS_KEY + chars if chars else 0)
        # a whole log goes into the row while it is small; a big one into im_events, so
        # that updating the row does not rewrite it (chunk numbers: the row's is 0)
        inline = replace and len(chunk) <= _INLINE_MAX
        inline_chunk = (chunk, count) if inline else ("[]", 0)
        noted: list[AuditEntry] = getattr(session, "audit_noted", None) or []
        n_noted = len(noted)  # written with this save; forgotten once it committed
        # (the outbox's times: the store's clock; PostgreSQL's own in ``now`` is SQL)
        told_ms = self.clock.now_ms() if self.outbox.enabled else 0.0
        notes = derive(session, told_ms, row) if self.outbox.enabled else None
        if notes:  # a notification is sent as soon as it is visible: flushed first
            mode = "write"
        appended = count > 0 and not inline
        # a save of a stored session that writes only its row and appended events (a
        # resume's, most often): one statement, committed on its own where the row's UPDATE
        # can carry the INSERT (PostgreSQL)
        single = (
            expected != 0 and not replace and not notes and not noted[:n_noted]
            and not session.ledger_dirty and (self.writes_in_cte or not appended)
        )  # fmt: skip
        with self._tx(mode, single=single) as run:
            if expected == 0:
                pending = row.status == "pending"
                try:
                    run(
                        "INSERT INTO im_sessions (status, agent, reason, tasks, deadline_ms, "
                        "request, snapshot, snapshot_len, due_ms, progress, agent_version, "
                        "events, events_n, id, family, version, snapshot_schema, updated_ms, "
                        "pending_since, audit_seq, audit_head) "  # (its chain: see audit_check)
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, "
                        f"{SNAPSHOT_SCHEMA}, "
                        f"{self._now_sql}, {self._now_sql if pending else 'NULL'}, {_ID_HEAD})",
                        (*values, *inline_chunk, sid, session.family, *now,
                         *(now if pending else ()), sid, sid),
                    )  # fmt: skip
                except self.integrity_errors:
                    raise _Duplicate from None
            else:
                then = (1 if replace else part, count, chunk) if appended and single else None
                where = self.unflushed_where if single and mode == "unflushed" else ""
                self._update_row(
                    run, session, values, replace, inline_chunk, release, now, then, where
                )
            if replace:  # the whole log is written anew: older chunks go
                run("DELETE FROM im_events WHERE session_id = ?", (sid,))
            if appended and not single:
                run(
                    "INSERT INTO im_events (session_id, part, n, events) VALUES (?, ?, ?, ?)",
                    (sid, 1 if replace else part, count, chunk),
                )
            effects: list[AuditEntry | None] = []
            for key in session.ledger_dirty:
                entry = session.ledger.get(key)
                if entry is not None:
                    stored = self._merge_ledger(run, session.ledger_id, key, entry, force=False)
                    # written (see _merge_ledger): audited with the save, when this session
                    # ran it (not a dry-run fork's copy of its parent's ledger)
                    if stored is entry and entry.by in (None, sid):
                        effects.append(effect_audit(key, entry))
            if notes:  # in the save's transaction: both commit, or neither
                write_outbox(run, notes, told_ms, self.outbox.public_url)
            records = with_effects(noted[:n_noted], effects) if effects else noted[:n_noted]
            if records:  # the audit last: its chain lock is the last lock a save takes
                self._audit_write(run, sid, records, self.clock.now_ms())
        if n_noted:
            forget_noted(session, n_noted)
        if notes:
            self.outbox.wake.set()
        # chunk 0 is the row's; a big whole log is chunk 1, appended ones follow
        parts = (1 if inline else 2) if replace else part + (1 if count else 0)
        log.mark_stored(len(log), parts, chars)
        session.store_version = expected + 1
        return session.store_version

    def _update_row(
        self,
        run: Callable[..., Any],
        session: InMemoryAgentSession,
        values: tuple[Any, ...],
        replace: bool,
        inline_chunk: tuple[str, int],
        release: bool,
        now: tuple[float, ...],
        then_events: tuple[int, int, str] | None = None,
        where: str = "",
    ) -> None:
        """The compare-and-set UPDATE of a save (ConflictError, SessionBusyError when it
        finds no row). ``then_events``: a chunk (part, n, events) the same statement
        inserts once the row is updated (``writes_in_cte``); ``where``: added to its WHERE."""
        sid, expected, at = session.session_id, session.store_version, self._now_sql
        if release:  # the save ending a resume: only while this holder's claim stands
            claim_sql = "claimed_by = NULL, claim_until = NULL"
            fence = "claimed_by = ?"
            fence_values: tuple[Any, ...] = (session.claim_token,)
        else:
            claim_sql = "claimed_by = claimed_by, claim_until = claim_until"
            fence = f"(claimed_by IS NULL OR claim_until < {at} OR claimed_by = ?)"
            fence_values = (*now, session.claim_token or "")
        inline_sql = "events = ?, events_n = ?, " if replace else ""
        inline_values = inline_chunk if replace else ()
        if values[0] == "pending":  # (SET reads the old row: kept while it stays pending)
            since = (
                "CASE WHEN status = 'pending' AND pending_since IS NOT NULL "
                f"THEN pending_since ELSE {at} END"
            )
            since_values = now
        else:
            since, since_values = "NULL", ()
        sql = (
            "UPDATE im_sessions SET status = ?, agent = ?, reason = ?, tasks = ?, "
            "deadline_ms = ?, request = ?, snapshot = ?, snapshot_len = ?, due_ms = ?, "
            "progress = ?, agent_version = ?, family = ?, "
            f"{inline_sql}version = version + 1, {claim_sql}, snapshot_schema = "
            f"{SNAPSHOT_SCHEMA}, updated_ms = {at}, pending_since = {since} "
            # the generation too: a copy of a deleted session must not overwrite the new
            # one saved under its id, at the same version number (a NULL family: a row
            # from before the column, whose generation is unknown, takes the save as ever)
            f"WHERE id = ? AND version = ? AND (family IS NULL OR family = ?) AND {fence}{where}"
        )
        params = (*values, session.family, *inline_values, *now, *since_values, sid, expected,
                  session.ledger_id, *fence_values)  # fmt: skip
        if then_events is not None:  # (inserted only when the row was: both or neither)
            sql = (
                f"WITH saved AS ({sql} RETURNING id) INSERT INTO im_events "
                "(session_id, part, n, events) SELECT id, ?, ?, ? FROM saved"
            )
            params = (*params, *then_events)
        cur = run(sql, params)
        if cur.rowcount == 1:
            return
        found = run("SELECT version, family FROM im_sessions WHERE id = ?", (sid,)).fetchone()
        if found is None:
            raise ConflictError(sid, expected, None)
        if found[1] is not None and found[1] != session.ledger_id:
            raise ConflictError(sid, expected, found[0], replaced=True)
        if found[0] == expected:
            raise SessionBusyError(sid)
        raise ConflictError(sid, expected, found[0])

    def _version(self, session_id: str) -> int | None:
        with self._tx("read") as run:
            row = run("SELECT version FROM im_sessions WHERE id = ?", (session_id,)).fetchone()
        return None if row is None else int(row[0])

    # -- loads -------------------------------------------------------------------------
    def _rows(self, run: Callable[..., Any], session_id: str) -> tuple[Any, ...] | None:
        if self.side_rows_sql is not None:
            sql = f"SELECT {_ROW}, {self.side_rows_sql} FROM im_sessions WHERE id = ?"
            return self._with_side_rows(run(sql, (session_id,)).fetchone())
        row = run(f"SELECT {_ROW} FROM im_sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            return None
        return (*row, *SQLStore._side_rows(run, session_id, row[-1]))

    @staticmethod
    def _with_side_rows(row: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        """A row read with ``side_rows_sql`` in the shape ``_session`` takes."""
        if row is None:
            return None
        *head, ns, chunks, keys, entries = row
        return (*head, list(zip(ns, chunks, strict=True)), list(zip(keys, entries, strict=True)))

    @staticmethod
    def _side_rows(
        run: Callable[..., Any], session_id: str, family: str | None
    ) -> tuple[list[Any], list[Any]]:
        """A session's event chunks (oldest first) and its family's ledger rows."""
        chunks = run(
            "SELECT n, events FROM im_events WHERE session_id = ? ORDER BY part", (session_id,)
        ).fetchall()
        ledger = run(
            "SELECT key, entry FROM im_ledger WHERE session_id = ?", (family or session_id,)
        ).fetchall()
        return chunks, ledger

    def _session(self, session_id: str, rows: tuple[Any, ...]) -> InMemoryAgentSession:
        state, version, first, first_n, _family, chunks, ledger_rows = rows
        if first is not None:  # None: a version-1 row, its log still in the snapshot
            chunks = [(first_n, first), *chunks]
        try:
            ledger = {k: ledger_of(e) for k, e in ledger_rows}
        except ValueError as exc:  # (pydantic's ValidationError is one)
            first = str(exc).splitlines()[0][:200]
            raise SnapshotSchemaError(
                f"a stored ledger entry of session {session_id!r} cannot be read ({first})",
                path="ledger",
            ) from None
        try:
            session = session_from(state, chunks, int(version), ledger, self.clock)
        except SnapshotSchemaError as exc:  # name the session, and say what to do
            newer = exc.path == "schema_version"  # (its message says: upgrade intermission)
            raise SnapshotSchemaError(
                f"session {session_id!r} cannot be read ({exc})"
                + ("" if newer else ": its row was cut short or changed outside intermission; "
                   "restore it from a backup, or delete the session")
            ) from None  # fmt: skip
        session.ledger_hook = self._write_ledger
        return session

    def load(self, session_id: str) -> InMemoryAgentSession:
        """Load a session (its live ledger rows included)."""
        check_id(session_id)
        # (one statement where it reads the side rows too: no transaction needed)
        with self._tx("read" if self.side_rows_sql is None else "query") as run:
            rows = self._rows(run, session_id)
        if rows is None:
            raise SessionNotFoundError(session_id)
        return self._session(session_id, rows)

    def delete(self, session_id: str) -> None:
        """Remove a session (and its ledger, unless forks still share it). Its audit records
        stay: a ``session.deleted`` record ends their chain."""
        check_id(session_id)
        with self._tx() as run:
            found = run("SELECT family FROM im_sessions WHERE id = ?", (session_id,)).fetchone()
            family = (found[0] if found else None) or session_id
            run("DELETE FROM im_events WHERE session_id = ?", (session_id,))
            run("DELETE FROM im_sessions WHERE id = ?", (session_id,))
            # (a row under the family's id counts only when it has no family of its own:
            # a new session saved under a deleted id is another generation, R48)
            shared = run(
                "SELECT 1 FROM im_sessions WHERE (id = ? AND family IS NULL) OR family = ? LIMIT 1",
                (family, family),
            ).fetchone()
            if shared is None:  # nobody of the family is left
                run("DELETE FROM im_ledger WHERE session_id = ?", (family,))
            if found is not None:  # its audit stays, its chain ended (see audit_chain)
                self._audit_close(run, session_id, self.clock.now_ms())

    # -- snapshots and inspection --------------------------------------------------------
    def put_snapshot(self, snapshot: Any, version: int = 0) -> int:
        """Validate a snapshot (JSON text, dict or model) and store it: ``version`` 0 inserts,
        otherwise compare-and-set. Invalid data raises a typed error and changes nothing.
        Its ledger entries are written only where they move the stored ledger forward.

        Compare-and-set includes the generation (the snapshot's ledger family): a snapshot
        of another generation of the id (one deleted since, or from elsewhere) never
        replaces the stored session, as its ledger is not the stored one's
        (``ConflictError``, ``replaced``). To put it back, ``delete`` the id first and put
        it with ``version=0``."""
        _check.count("version", version, 0, 2**62)
        session = InMemoryAgentSession.restore(parse_snapshot(snapshot))
        session.store_version = version
        return self.save(session)

    def raw_row(self, session_id: str) -> tuple[Any, ...] | None:
        """The stored columns of a session (for tests and debugging), but for its audit
        head (``audit_seq``, ``audit_head``): that is the trail's, which a refused
        decision moves while it leaves the session byte-identical."""
        with self._tx("read") as run:
            cur = run("SELECT * FROM im_sessions WHERE id = ?", (session_id,))
            names = [d[0] for d in cur.description]
            row = cur.fetchone()
        if row is None:
            return None
        return tuple(v for n, v in zip(names, row, strict=True) if n not in _AUDIT_HEAD)

    def count(self) -> int:
        """How many sessions are stored."""
        with self._tx("read") as run:
            return int(run("SELECT COUNT(*) FROM im_sessions").fetchone()[0])
