"""The tables of the SQL stores and how they came to be: each migration, applied in order
(``im_schema`` records how far it went).

Every statement may run again on a database that has it already (``IF NOT EXISTS``,
``IF EXISTS``; an ``ADD COLUMN`` is skipped when the column is there, see
:func:`missing_column`; an ``UPDATE`` fills only what is still empty). The recorded
version alone does not tell the layout: migration 1 and 2 were rewritten in place after
stores were written with them, and branches merged later once numbered the same
migration differently (schema 4 was the outbox on one, ``pending_since`` on another), so
a store recorded before :data:`ONE_NUMBERING` is upgraded by replaying every migration
from the first (see ``SQLStore._apply_migrations``). Migrations are appended, never
rewritten, and a new one must be as replayable (those stores replay it too)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .audit_sql import AUDIT_HEAD_MIGRATION, AUDIT_MIGRATION
from .rows import column_text

__all__ = [
    "BACKFILLS",
    "MIGRATIONS",
    "ONE_NUMBERING",
    "SCHEMA_VERSION",
    "SESSION_COLUMNS",
    "missing_column",
]

SCHEMA_VERSION = 10

ONE_NUMBERING = 8
"""From this version on every release numbered the migrations alike (each landed commit
that wrote 8 has today's migrations 1-8): a store recorded at it or later applies only
the migrations after its version. One recorded below it replays them all."""

# Each migration is a list of statements; {real} and {int} are the dialect's column types,
# {cover} the columns the dialect adds to the pending indexes.
MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE IF NOT EXISTS im_sessions (
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
        "CREATE INDEX IF NOT EXISTS "
        "im_sessions_pending ON im_sessions (updated_ms, id) "
        "WHERE status = 'pending'",
        "CREATE INDEX IF NOT EXISTS "
        "im_sessions_pending_agent ON im_sessions (agent, updated_ms, id) "
        "WHERE status = 'pending'",
        """CREATE TABLE IF NOT EXISTS im_ledger (
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
        """CREATE TABLE IF NOT EXISTS im_events (
            session_id TEXT NOT NULL,
            part {int} NOT NULL,
            n {int} NOT NULL,
            events TEXT NOT NULL,
            PRIMARY KEY (session_id, part)
        )""",
        # the first release's (8aa3b5c and before) indexes, which migration 1 no longer
        # makes: every save of such a store paid for them
        "DROP INDEX IF EXISTS im_sessions_status",
        "DROP INDEX IF EXISTS im_sessions_status_agent",
        # covering indexes where the dialect allows (SQLite): a page of pending() then
        # reads only index pages, not one table page per (snapshot-sized) row
        "DROP INDEX IF EXISTS im_sessions_pending",
        "DROP INDEX IF EXISTS im_sessions_pending_agent",
        "CREATE INDEX IF NOT EXISTS "
        "im_sessions_pending ON im_sessions (updated_ms, id{cover}) "
        "WHERE status = 'pending'",
        "CREATE INDEX IF NOT EXISTS "
        "im_sessions_pending_agent ON im_sessions (agent, updated_ms, id{cover}) "
        "WHERE status = 'pending'",
    ],
    [
        # a fork shares its family's ledger (R44): ledger rows are keyed by the family's id
        # (NULL: the session's own)
        "ALTER TABLE im_sessions ADD COLUMN family TEXT",
    ],
    [
        # Pages of pending() are keyed on when a session became pending, which saves
        # while it stays pending keep (updated_ms moves with every save, so a session
        # decided in part, still open, jumped past a reader's cursor and was skipped).
        "ALTER TABLE im_sessions ADD COLUMN pending_since {real}",
        "UPDATE im_sessions SET pending_since = updated_ms "
        "WHERE status = 'pending' AND pending_since IS NULL",
        # What a save wrote, to tell a row that cannot be read (cut short, written by a
        # newer intermission) without parsing it: listings report it instead of failing.
        # NULL: a row from before, taken as readable (a load still reports it).
        "ALTER TABLE im_sessions ADD COLUMN snapshot_len {int}",
        "ALTER TABLE im_sessions ADD COLUMN snapshot_schema {int}",
        "DROP INDEX IF EXISTS im_sessions_pending",
        "DROP INDEX IF EXISTS im_sessions_pending_agent",
        # (a listing now reads each listed row for its length check, so covering columns
        # would only make every pause write a bigger index entry)
        "CREATE INDEX IF NOT EXISTS "
        "im_sessions_pending ON im_sessions (pending_since, id) "
        "WHERE status = 'pending'",
        "CREATE INDEX IF NOT EXISTS "
        "im_sessions_pending_agent ON im_sessions (agent, pending_since, id) "
        "WHERE status = 'pending'",
        # effects of unknown outcome (started, never ended) are few: listed from here
        "CREATE INDEX IF NOT EXISTS "
        "im_ledger_started ON im_ledger (session_id, key) "
        "WHERE status = 'started'",
    ],
    AUDIT_MIGRATION,  # the audit trail (see audit_sql)
    [
        # approvals with a policy: when the session's next deadline step (a warning, an
        # escalation, an expiry) falls due — the sweeper's index, partial so that sessions
        # without one cost nothing — and where its approvals stand, for listings
        "ALTER TABLE im_sessions ADD COLUMN due_ms {real}",
        "ALTER TABLE im_sessions ADD COLUMN progress TEXT",
        "CREATE INDEX IF NOT EXISTS "
        "im_sessions_due ON im_sessions (due_ms) "
        "WHERE due_ms IS NOT NULL",
    ],
    [
        # the outbox: notifications written by the save that causes them, delivered by a
        # dispatcher (intermission.notify) that takes rows under a lease and deletes them
        # once delivered; a save adds one row and one key (no other index: the table holds
        # only what waits or failed, and a dispatcher reads it whole)
        """CREATE TABLE IF NOT EXISTS im_outbox (
            key TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_ms {real} NOT NULL,
            status TEXT NOT NULL,
            due_ms {real} NOT NULL,
            attempts {int} NOT NULL,
            done TEXT NOT NULL,
            taken_by TEXT,
            taken_until {real},
            last_error TEXT
        )""",
        # what was told once for good (an effect of unknown outcome), so that later saves
        # seeing it again write nothing
        "CREATE TABLE IF NOT EXISTS im_outbox_told (mark TEXT PRIMARY KEY, at_ms {real} NOT NULL)",
        # whether saves write notifications: every process opening the database follows
        "CREATE TABLE IF NOT EXISTS im_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ],
    AUDIT_HEAD_MIGRATION,  # the audit head in the session row (see audit_sql)
    [
        # the agent version a session runs on (R62), for pending(version=) and versions();
        # filled from the snapshots by the backfill below. One partial index serves both:
        # a page of one agent's version is an ordered range of it, and versions() groups
        # the pending rows by its leading columns without reading the table
        "ALTER TABLE im_sessions ADD COLUMN agent_version TEXT",
        "CREATE INDEX IF NOT EXISTS im_sessions_pending_version ON im_sessions "
        "(agent, agent_version, pending_since, id) WHERE status = 'pending'",
        # sessions stopped otherwise (a step budget, an error) are pinned to their version
        # too: versions() counts them from this one (few rows: a small index)
        "CREATE INDEX IF NOT EXISTS im_sessions_stopped_version ON im_sessions "
        "(agent, agent_version, updated_ms) WHERE status IN ('paused', 'failed')",
    ],
    [
        # the sessions saved last (the console's recently decided list polls them): read
        # from the head of this index, not by sorting every row
        "CREATE INDEX IF NOT EXISTS im_sessions_updated ON im_sessions (updated_ms, id)",
    ],
]

_BATCH = 200
_MARK = '%"agent_version":"%'
"""Rows whose snapshot may name a version (a LIKE prefilter: the others stay NULL)."""


def _backfill_agent_version(run: Callable[..., Any]) -> None:
    """Migration 9's data: each row's ``agent_version`` from its snapshot (absent in rows
    written before versions were recorded: NULL). Parsed in Python, a batch at a time, not
    with the dialects' JSON functions: those differ, and PostgreSQL's refuse the escaped
    lone surrogates a snapshot may hold. A row that cannot be parsed (cut short) keeps NULL:
    its load reports it, as before."""
    after = ""
    while True:
        rows = run(
            "SELECT id, snapshot FROM im_sessions WHERE id > ? AND snapshot LIKE ? "
            "ORDER BY id LIMIT ?",
            (after, _MARK, _BATCH),
        ).fetchall()
        for session_id, snapshot in rows:
            version = _version_in(snapshot)
            if version is not None:
                run(
                    "UPDATE im_sessions SET agent_version = ? WHERE id = ?",
                    (column_text(version), session_id),
                )
        if len(rows) < _BATCH:
            return
        after = rows[-1][0]


def _version_in(snapshot: str) -> str | None:
    """The top-level ``agent_version`` of a stored snapshot, if it is a string."""
    try:
        data = json.loads(snapshot)
    except ValueError:
        return None
    version = data.get("agent_version") if isinstance(data, dict) else None
    return version if isinstance(version, str) else None


BACKFILLS: dict[int, Callable[[Callable[..., Any]], None]] = {9: _backfill_agent_version}
"""Data a migration derives in Python, run right after its statements (same transaction)."""

SESSION_COLUMNS = "snapshot, version, events, events_n, family"
"""The columns a session is rebuilt from (see SQLStore._session)."""


_ADD_COLUMN = re.compile(r"^\s*ALTER TABLE (\w+) ADD COLUMN (\w+)\b", re.IGNORECASE)


def missing_column(statement: str) -> tuple[str, str] | None:
    """``(table, column)`` when ``statement`` adds a column (run it only when the table
    lacks it: SQLite has no ``ADD COLUMN IF NOT EXISTS``), else None."""
    found = _ADD_COLUMN.match(statement)
    return (found.group(1), found.group(2)) if found else None
