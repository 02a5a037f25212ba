"""What a SQL store lists: pending sessions a page at a time (one indexed query; rows that
cannot be read reported, not listed) and the sessions stuck on an effect of unknown
outcome."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _check
from ..core.ledger import LedgerEntry
from ..core.snapshot import SCHEMA_VERSION as SNAPSHOT_SCHEMA
from .base import check_page
from .listings import (
    PendingPage,
    PendingSession,
    StuckSession,
    UnreadableSession,
    VersionCount,
    sorted_versions,
)
from .rows import column_text, ledger_of

if TYPE_CHECKING:
    from ._pool import Tx

__all__ = ["PENDING_SELECT", "SQLListings"]

PENDING_SELECT = (
    "SELECT id, agent, reason, tasks, deadline_ms, updated_ms, request, pending_since, "
    "progress, agent_version, snapshot_schema, snapshot_len - {length} FROM im_sessions "
    "WHERE status = 'pending'"
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
        self,
        limit: int,
        agent: str | None,
        before: PendingSession | None,
        version: str | None = None,
    ) -> tuple[str, tuple[Any, ...]]:
        """The SQL of :meth:`pending` (exposed so tests can EXPLAIN it); ``version``: the
        bare version (see :func:`~intermission.stores.listings.version_filter`)."""
        sql = self._pending_sql
        params: tuple[Any, ...] = ()
        if agent is not None:
            sql += " AND agent = ?"
            params += (column_text(agent),)  # as the column keeps it (see row_of)
        if version is not None:
            sql += " AND agent_version = ?"
            params += (column_text(version),)
        if before is not None:
            since = before.pending_since
            sql += " AND (pending_since < ? OR (pending_since = ? AND id < ?))"
            params += (since, since, before.session_id)
        sql += " ORDER BY pending_since DESC, id DESC LIMIT ?"
        return sql, (*params, limit)

    def pending(
        self,
        limit: int = 50,
        agent: str | None = None,
        before: PendingSession | None = None,
        *,
        version: str | None = None,
    ) -> PendingPage:
        """Pending sessions, newest first, by when they became pending (a key saves while
        a session stays pending do not move); page with ``before=page.last``. A row that
        cannot be read is left out and reported in ``page.unreadable``. ``version``:
        ``"ops@2"`` or ``"2"`` (see :class:`~intermission.stores.SessionStore`)."""
        agent, bare = check_page(limit, agent, before, version)
        sql, params = self.pending_query(limit, agent, before, bare)
        with self._tx("query") as run:
            rows = run(sql, params).fetchall()
        # columns 10 and 11: the schema the row was written with, and how much of the
        # snapshot a save wrote is missing (NULL in rows from before these stamps)
        ok = [not r[11] and (r[10] is None or r[10] == SNAPSHOT_SCHEMA) for r in rows]
        if all(ok):
            return PendingPage(PendingSession.from_rows(rows))
        bad = [
            UnreadableSession(r[0], _why(r[10], r[11], self.length_unit), r[7])
            for r, fine in zip(rows, ok, strict=True)
            if not fine
        ]
        good = [r for r, fine in zip(rows, ok, strict=True) if fine]
        return PendingPage(PendingSession.from_rows(good), bad, [r[0] for r in rows])

    def versions(self) -> list[VersionCount]:
        """The sessions waiting to be resumed per agent name and version — pending, and
        also stopped otherwise (``paused``, ``failed``: still pinned to their version) —
        how many, and since when the oldest waits (pending: since it became pending;
        stopped: its last save). Two grouped queries, each on a partial index. Ordered by
        agent, then the version waiting longest first."""
        counts: dict[tuple[Any, Any], VersionCount] = {}
        with self._tx("query") as run:
            rows = run(
                "SELECT agent, agent_version, COUNT(*), MIN(pending_since) FROM im_sessions "
                "WHERE status = 'pending' GROUP BY agent, agent_version"
            ).fetchall()
            rows += run(
                "SELECT agent, agent_version, COUNT(*), MIN(updated_ms) FROM im_sessions "
                "WHERE status IN ('paused', 'failed') GROUP BY agent, agent_version"
            ).fetchall()
        for agent, version, n, oldest in rows:
            had = counts.get((agent, version))
            since = float(oldest or 0.0)
            counts[(agent, version)] = VersionCount(
                agent, version, int(n) + (had.count if had else 0),
                min(since, had.oldest_ms) if had else since,
            )  # fmt: skip
        return sorted_versions(counts.values())

    def recent(self, limit: int = 50) -> list[str]:
        """The ids of the sessions saved last, newest first (what the console's recently
        decided list reads, from the head of migration 10's index)."""
        _check.count("limit", limit, 1, 1000)
        with self._tx("query") as run:
            rows = run(
                "SELECT id FROM im_sessions ORDER BY updated_ms DESC, id DESC LIMIT ?", (limit,)
            ).fetchall()
        return [r[0] for r in rows]

    def stuck(self, limit: int = 100) -> list[StuckSession]:
        """Sessions that need a person: an effect they started never recorded its outcome
        and nobody holds their claim now (see :class:`StuckSession`)."""
        _check.count("limit", limit, 1, 10_000)
        out: list[StuckSession] = []
        after: tuple[Any, ...] = ()
        with self._tx("read") as run:
            # started entries a page at a time until ``limit`` are stuck: effects running
            # now are started too, and however many they are, they hide none that is stuck
            while len(out) < limit:
                sql = "SELECT session_id, key, entry FROM im_ledger WHERE status = 'started'"
                if after:
                    sql += " AND (session_id > ? OR (session_id = ? AND key > ?))"
                started = run(f"{sql} ORDER BY session_id, key LIMIT ?", (*after, limit))
                started = started.fetchall()
                out += self._stuck_of(run, started)
                if len(started) < limit:
                    break
                after = (started[-1][0], started[-1][0], started[-1][1])
        return sorted(out)[:limit]

    def _stuck_of(self, run: Callable[..., Any], started: list[Any]) -> list[StuckSession]:
        """The stuck sessions among ``started`` ledger rows (family, key, entry)."""
        by: dict[str, list[tuple[str, str, LedgerEntry]]] = {}
        # an entry that cannot be read is listed as such, never blanks the listing; who
        # started it is unknown, so it goes to the sessions of its family
        damaged: dict[str, list[tuple[str, str]]] = {}
        for family, key, text in started:
            try:
                entry = ledger_of(text)
            except ValueError as exc:  # (pydantic's ValidationError is one)
                damaged.setdefault(family, []).append((key, str(exc).splitlines()[0][:200]))
                continue
            by.setdefault(entry.by or family, []).append((family, key, entry))
        if not by and not damaged:
            return []
        marks = ", ".join("?" for _ in by) or "NULL"
        where = f"id IN ({marks})"
        if damaged:
            fams = ", ".join("?" for _ in damaged)
            where += f" OR family IN ({fams}) OR (family IS NULL AND id IN ({fams}))"
        rows = run(
            f"SELECT id, agent, status, family, claimed_by IS NOT NULL AND claim_until >= "
            f"{self._now_sql} FROM im_sessions WHERE {where}",
            (*self._now(), *by, *damaged, *damaged),
        ).fetchall()
        # an effect whose session is gone (a fork deleted since) is its family's: every
        # session of the family that reaches it stops there
        gone = {sid for sid in by} - {row[0] for row in rows}
        orphans: dict[str, list[tuple[str, LedgerEntry]]] = {}
        for sid in gone:
            for ledger_id, key, entry in by[sid]:
                orphans.setdefault(ledger_id, []).append((key, entry))
        if orphans:
            fams = ", ".join("?" for _ in orphans)
            rows += run(
                f"SELECT id, agent, status, family, claimed_by IS NOT NULL AND claim_until >= "
                f"{self._now_sql} FROM im_sessions WHERE family IN ({fams}) OR "
                f"(family IS NULL AND id IN ({fams}))",
                (*self._now(), *orphans, *orphans),
            ).fetchall()
        out: list[StuckSession] = []
        for sid, agent, status, family, held in dict((r[0], r) for r in rows).values():
            if held:  # (one running now is not stuck)
                continue
            for ledger_id, key, entry in by.get(sid, []):
                # (an effect of the family's other generation is not)
                if (family or sid) == ledger_id:
                    out.append(StuckSession(sid, agent, status, key, entry.started_ms))
            for key, entry in orphans.get(family or sid, []):
                out.append(StuckSession(sid, agent, status, key, entry.started_ms))
            for key, why in damaged.get(family or sid, []):
                out.append(StuckSession(sid, agent, status, key, 0.0, why))
        return out

    def due(self, now_ms: float | None = None, limit: int = 100) -> list[str]:
        """Sessions whose next deadline step (a warning, an escalation, an expiry of an
        approval with a policy) has fallen due by ``now_ms`` (default: the store's clock),
        the longest due first: one query on a partial index."""
        _check.count("limit", limit, 1, 100_000)
        _check.number("now_ms", now_ms, 0, 1e15, optional=True)
        # judged by the store's clock in the statement (PostgreSQL's own) unless given
        at, now = (self._now_sql, self._now()) if now_ms is None else ("?", (now_ms,))
        with self._tx("query") as run:
            rows = run(
                f"SELECT id FROM im_sessions WHERE due_ms IS NOT NULL AND due_ms <= {at} "
                "ORDER BY due_ms, id LIMIT ?",
                (*now, limit),
            ).fetchall()
        return [str(r[0]) for r in rows]


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
