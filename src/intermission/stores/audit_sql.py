"""The audit trail in the SQL stores: table ``im_audit``, one row per record, appended in
the transaction of whatever it records (see :mod:`.audit_chain` for the chain itself).

Two writers appending to one session's chain at once must not both take the same head:
SQLite's write transactions hold the database's write lock from their start (BEGIN
IMMEDIATE); PostgreSQL takes a transaction-scoped advisory lock on the session id before
reading the head. That lock is always the last one a transaction takes (after the session
row and ledger rows), so it cannot deadlock with them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..audit import AuditEntry, AuditRecord, AuditVerification
from . import audit_chain
from .audit_chain import Head, StoredRecord
from .base import check_id

__all__ = ["AUDIT_MIGRATION", "AuditSQL"]

AUDIT_MIGRATION = [
    """CREATE TABLE im_audit (
        session_id TEXT NOT NULL,
        seq {int} NOT NULL,
        record TEXT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
]
"""The migration that adds the audit table (records outlive their session: no foreign
key, and ``delete`` leaves them)."""

_HEAD = "SELECT seq, record, hash FROM im_audit WHERE session_id = ? ORDER BY seq DESC LIMIT 1"


class AuditSQL:
    """The audit methods of :class:`~intermission.stores.sql.SQLStore`."""

    chain_lock = ""
    """SQL that serialises appends to one session's chain (PostgreSQL; SQLite's write
    transactions already do)."""

    clock: Any
    _tx: Callable[..., Any]

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
        rows = audit_chain.extend(session_id, last, entries, now, head)
        for seq, text, digest in rows:
            run(
                "INSERT INTO im_audit (session_id, seq, record, hash) VALUES (?, ?, ?, ?)",
                (session_id, seq, text, digest),
            )
        return rows

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
            rows = self._audit_write(run, sid, entries, self.clock.now_ms())
        return [audit_chain.parse(sid, row) for row in rows]

    def audit(self, session_id: str) -> list[AuditRecord]:
        """The session id's audit records, oldest first (those of a deleted session too)."""
        sid = check_id(session_id)
        with self._tx("read") as run:
            rows = self._audit_rows(run, sid)
        return [audit_chain.parse(sid, row) for row in rows]

    def verify_audit(self, session_id: str) -> AuditVerification:
        """Check the session id's audit chain; the result names the first broken record."""
        sid = check_id(session_id)
        with self._tx("read") as run:
            rows = self._audit_rows(run, sid)

            def parent_record(parent: str, seq: int) -> StoredRecord | None:
                row = run(
                    "SELECT seq, record, hash FROM im_audit WHERE session_id = ? AND seq = ?",
                    (parent, seq),
                ).fetchone()
                return None if row is None else (int(row[0]), row[1], row[2])

            return audit_chain.verify(sid, rows, parent_record)

    @staticmethod
    def _audit_rows(run: Callable[..., Any], session_id: str) -> list[StoredRecord]:
        rows = run(
            "SELECT seq, record, hash FROM im_audit WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        return [(int(seq), text, digest) for seq, text, digest in rows]
