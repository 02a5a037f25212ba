"""What a SQL store lists: pending sessions a page at a time (one indexed query; rows that
cannot be read reported, not listed) and the sessions stuck on an effect of unknown
outcome."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _check
from ..core.ledger import LedgerEntry
from ..core.snapshot import SCHEMA_VERSION as SNAPSHOT_SCHEMA
from .base import check_page
from .listings import PendingPage, PendingSession, StuckSession, UnreadableSession
from .rows import column_text, ledger_of

if TYPE_CHECKING:
    from ._pool import Tx

__all__ = ["PENDING_SELECT", "SQLListings"]

PENDING_SELECT = (
    "SELECT id, agent, reason, tasks, deadline_ms, updated_ms, request, pending_since, "
    "snapshot_schema, snapshot_len - {length} FROM im_sessions WHERE status = 'pending'"
)
"""The pending rows (``{length}``: the dialect's length of the stored snapshot)."""


class SQLListings:
    """The listings of :class:`~intermission.stores.sql.SQLStore`."""

    if TYPE_CHECKING:  # (given by SQLStore and its Pool)
        _pending_sql: str
        _now_sql: str
        length_unit: str

        def _now(self) -> tuple[float, ...]: ...
        def _tx(self, mode: str = "write") -> Tx: ...

    def pending_query(
        self, limit: int, agent: str | None, before: PendingSession | None
    ) -> tuple[str, tuple[Any, ...]]:
        """The SQL of :meth:`pending` (exposed so tests can EXPLAIN it)."""
        sql = self._pending_sql
        params: tuple[Any, ...] = ()
        if agent is not None:
            sql += " AND agent = ?"
            params += (column_text(agent),)  # as the column keeps it (see row_of)
        if before is not None:
            since = before.pending_since
            sql += " AND (pending_since < ? OR (pending_since = ? AND id < ?))"
            params += (since, since, before.session_id)
        sql += " ORDER BY pending_since DESC, id DESC LIMIT ?"
        return sql, (*params, limit)

    def pending(
        self, limit: int = 50, agent: str | None = None, before: PendingSession | None = None
    ) -> PendingPage:
        """Pending sessions, newest first, by when they became pending (a key saves while
        a session stays pending do not move); page with ``before=page.last``. A row that
        cannot be read is left out and reported in ``page.unreadable``."""
        check_page(limit, agent, before)
        sql, params = self.pending_query(limit, agent, before)
        with self._tx("query") as run:
            rows = run(sql, params).fetchall()
        # columns 8 and 9: the schema the row was written with, and how much of the
        # snapshot a save wrote is missing (NULL in rows from before these stamps)
        ok = [not r[9] and (r[8] is None or r[8] == SNAPSHOT_SCHEMA) for r in rows]
        if all(ok):
            return PendingPage(PendingSession.from_rows(rows))
        bad = [
            UnreadableSession(r[0], _why(r[8], r[9], self.length_unit), r[7])
            for r, fine in zip(rows, ok, strict=True)
            if not fine
        ]
        good = [r for r, fine in zip(rows, ok, strict=True) if fine]
        return PendingPage(PendingSession.from_rows(good), bad, [r[0] for r in rows])

    def stuck(self, limit: int = 100) -> list[StuckSession]:
        """Sessions that need a person: an effect they started never recorded its outcome
        and nobody holds their claim now (see :class:`StuckSession`)."""
        _check.count("limit", limit, 1, 10_000)
        with self._tx("read") as run:
            started = run(
                "SELECT session_id, key, entry FROM im_ledger WHERE status = 'started' "
                "ORDER BY session_id, key LIMIT ?",
                (limit,),
            ).fetchall()
            by: dict[str, list[tuple[str, str, LedgerEntry]]] = {}
            for family, key, text in started:
                entry = ledger_of(text)
                by.setdefault(entry.by or family, []).append((family, key, entry))
            if not by:
                return []
            marks = ", ".join("?" for _ in by)
            rows = run(
                f"SELECT id, agent, status, family, claimed_by IS NOT NULL AND claim_until >= "
                f"{self._now_sql} FROM im_sessions WHERE id IN ({marks})",
                (*self._now(), *by),
            ).fetchall()
        out: list[StuckSession] = []
        for sid, agent, status, family, held in rows:
            for ledger_id, key, entry in by.get(sid, []):
                # (an effect of the family's other generation, or one running now, is not)
                if (family or sid) == ledger_id and not held:
                    out.append(StuckSession(sid, agent, status, key, entry.started_ms))
        return sorted(out)


def _why(schema: int | None, missing: int | None, unit: str) -> str:
    """Why a pending row cannot be read, from its stamps (see ``pending``)."""
    if schema is not None and schema != SNAPSHOT_SCHEMA:
        return (
            f"written with snapshot schema {schema}, which this intermission cannot read (it "
            f"reads {SNAPSHOT_SCHEMA}): upgrade intermission"
        )
    gap = missing or 0
    return (
        f"its stored snapshot is {abs(gap)} {unit} {'shorter' if gap > 0 else 'longer'} than "
        "the one saved: the row was cut short or changed outside intermission; restore it "
        "from a backup, or delete the session"
    )
