"""The audit trail in the SQL stores: table ``im_audit``, one row per record, appended in
the transaction of whatever it records (see :mod:`.audit_chain` for the chain itself).

The session row keeps the chain's head (``audit_seq``, ``audit_head``: the last record
written while the row exists), updated by the statement after the records' inserts, in
their transaction: deleting the newest records leaves a chain that no longer ends at it.

Two writers appending to one session's chain at once must not both take the same head:
SQLite's write transactions hold the database's write lock from their start (BEGIN
IMMEDIATE); PostgreSQL takes a transaction-scoped advisory lock on the session id before
reading the head. Locks are taken in one order: the session row, ledger rows, then that
advisory lock (a transaction that writes records without saving the session locks its row
first), so they cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..audit import AuditEntry, AuditRecord, AuditVerification
from . import audit_chain, audit_check
from .audit_chain import Head, StoredRecord
from .base import check_id

__all__ = ["AUDIT_HEAD_MIGRATION", "AUDIT_MIGRATION", "AuditSQL"]

AUDIT_MIGRATION = [
    """CREATE TABLE IF NOT EXISTS im_audit (
        session_id TEXT NOT NULL,
        seq {int} NOT NULL,
        record TEXT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
]
"""The migration that adds the audit table (records outlive their session: no foreign
key, and ``delete`` leaves them)."""

AUDIT_HEAD_MIGRATION = [
    # the head of each session's chain, in its row (audit_check): NULL only in a row an
    # older intermission writes after this migration
    "ALTER TABLE im_sessions ADD COLUMN audit_seq {int}",
    "ALTER TABLE im_sessions ADD COLUMN audit_head TEXT",
    # the heads of the sessions stored before it, taken from their records (0: none)
    "UPDATE im_sessions SET audit_seq = COALESCE((SELECT MAX(a.seq) FROM im_audit a "
    "WHERE a.session_id = im_sessions.id), 0), audit_head = (SELECT a.hash FROM im_audit a "
    "WHERE a.session_id = im_sessions.id ORDER BY a.seq DESC LIMIT 1) WHERE audit_seq IS NULL",
]
"""The migration (8) that keeps the audit head in the session row."""

_HEAD = "SELECT seq, record, hash FROM im_audit WHERE session_id = ? ORDER BY seq DESC LIMIT 1"


class AuditSQL:
    """The audit methods of :class:`~intermission.stores.sql.SQLStore`."""

    chain_lock = ""
    """SQL that serialises appends to one session's chain (PostgreSQL; SQLite's write
    transactions already do)."""

    writes_in_cte = False
    """Whether a statement may write in a WITH clause (PostgreSQL): the records' inserts and
    the head's update go as one statement."""

    clock: Any
    for_update: str
    _audit_key: bytes | None = None
    _tx: Callable[..., Any]
    _rows: Callable[..., Any]
    _session: Callable[..., Any]

    # -- writing (inside the caller's transaction) ---------------------------------------
    def _audit_write(
        self, run: Callable[..., Any], session_id: str, entries: Sequence[AuditEntry], now: float
    ) -> list[StoredRecord]:
        """Append ``entries`` to the session's chain (stamped ``now``)."""
        return self._audit_append(run, session_id, entries, now, close=False)

    def _audit_close(self, run: Callable[..., Any], session_id: str, now: float) -> None:
        """End a deleted session's chain with its tombstone (when it has one)."""
        self._audit_append(run, session_id, [audit_chain.deleted_entry()], now, close=True)

    def _audit_append(
        self,
        run: Callable[..., Any],
        session_id: str,
        entries: Sequence[AuditEntry],
        now: float,
        close: bool,
    ) -> list[StoredRecord]:
        if self.chain_lock:
            run(self.chain_lock, (session_id,))

        def head(sid: str) -> Head | None:
            return Head.of(run(_HEAD, (sid,)).fetchone())

        last = head(session_id)
        if close and (last is None or last.closed):
            return []  # no chain, or already ended
        rows = audit_chain.extend(session_id, last, entries, now, head, self._audit_key)
        if rows and not close and self.writes_in_cte:  # the records and the head: one statement
            values = ", ".join("(?, ?, ?, ?)" for _ in rows)
            run(
                f"WITH written AS (INSERT INTO im_audit (session_id, seq, record, hash) "
                f"VALUES {values}) UPDATE im_sessions SET audit_seq = ?, audit_head = ? "
                "WHERE id = ?",
                (*(v for seq, text, digest in rows for v in (session_id, seq, text, digest)),
                 rows[-1][0], rows[-1][2], session_id),
            )  # fmt: skip
            return rows
        for seq, text, digest in rows:
            run(
                "INSERT INTO im_audit (session_id, seq, record, hash) VALUES (?, ?, ?, ?)",
                (session_id, seq, text, digest),
            )
        if rows and not close:  # the row's head, in the records' transaction (none: no row)
            run(
                "UPDATE im_sessions SET audit_seq = ?, audit_head = ? WHERE id = ?",
                (rows[-1][0], rows[-1][2], session_id),
            )
        return rows

    def _lock_row(self, run: Callable[..., Any], session_id: str) -> None:
        """Lock the session row before the chain (PostgreSQL: see the module docstring)."""
        if self.for_update:
            run(f"SELECT 1 FROM im_sessions WHERE id = ?{self.for_update}", (session_id,))

    # -- the public methods ------------------------------------------------------------
    def append_audit(self, session_id: str, entries: Sequence[AuditEntry]) -> list[AuditRecord]:
        """Append ``entries`` to the session's audit chain in a transaction of their own
        (what changes no session: a refused decision); returns the records written. The id
        need not name a stored session (an attempt on a missing one is worth keeping)."""
        sid = check_id(session_id)
        entries = audit_chain.check_entries(entries)
        if not entries:
            return []
        with self._tx() as run:
            self._lock_row(run, sid)
            rows = self._audit_write(run, sid, entries, self.clock.now_ms())
        return [audit_chain.parse(sid, row) for row in rows]

    def audit(self, session_id: str) -> list[AuditRecord]:
        """The session id's audit records, oldest first (those of a deleted session too)."""
        sid = check_id(session_id)
        with self._tx("read") as run:
            rows = self._audit_rows(run, sid)
        return [audit_chain.parse(sid, row) for row in rows]

    def verify_audit(self, session_id: str) -> AuditVerification:
        """Check the session id's audit trail: the chain, its end at the head the session
        row keeps, and a record for every vote, decision and completed effect the stored
        session shows; the result names the first broken record and what is missing."""
        sid = check_id(session_id)
        with self._tx("read") as run:
            rows = self._audit_rows(run, sid)

            def parent_record(parent: str, seq: int) -> StoredRecord | None:
                row = run(
                    "SELECT seq, record, hash FROM im_audit WHERE session_id = ? AND seq = ?",
                    (parent, seq),
                ).fetchone()
                return None if row is None else (int(row[0]), row[1], row[2])

            result = audit_chain.verify(sid, rows, parent_record, self._audit_key)
            found = run(
                "SELECT audit_seq, audit_head FROM im_sessions WHERE id = ?", (sid,)
            ).fetchone()
            stored = self._rows(run, sid) if found is not None else None
            parents: dict[str, list[StoredRecord]] = {}

            def rows_of(parent: str) -> list[StoredRecord]:
                if parent not in parents:
                    parents[parent] = self._audit_rows(run, parent)
                return parents[parent]

            session = self._readable(sid, stored)
            head = None if found is None else (found[0], found[1])
            return audit_check.finish(result, rows, head, session, rows_of)

    def _readable(self, session_id: str, stored: Any) -> Any:
        """The stored session, or None when there is none or it cannot be read (the chain
        is still checked; ``load`` reports the row)."""
        if stored is None:
            return None
        try:
            return self._session(session_id, stored)
        except Exception:  # (SnapshotSchemaError and the like: not the trail's to report)
            return None

    @staticmethod
    def _audit_rows(run: Callable[..., Any], session_id: str) -> list[StoredRecord]:
        rows = run(
            "SELECT seq, record, hash FROM im_audit WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        return [(int(seq), text, digest) for seq, text, digest in rows]
