"""Claims on a SQL store: a claim is a lease, taken by one conditional UPDATE that reads the
session in the same transaction, renewed while its holder works, and released by the save
that ends the resume (fenced on the holder) or on its own (R30, R40)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..audit import forget_noted
from ..core.session import InMemoryAgentSession
from ..core.snapshot import state_json
from ..errors import (
    SessionBusyError,
    SessionNotFoundError,
    StoreError,
    StoreUnavailableError,
)
from ._pool import until_back
from .base import RESUMABLE, not_resumable
from .sql_schema import SESSION_COLUMNS as _ROW

if TYPE_CHECKING:
    from ._pool import Tx
    from .clock import ServerClock

__all__ = ["SQLClaims"]

_RESUMABLE_SQL = "(" + ", ".join(f"'{status}'" for status in RESUMABLE) + ")"


class SQLClaims:
    """The claim primitives of :class:`~intermission.stores.sql.SQLStore` (``resume()`` and
    ``claim()`` come from StoreMethods)."""

    if TYPE_CHECKING:  # (given by SQLStore and its Pool)
        lease_ms: float
        outage_s: float
        returning: bool
        _server: ServerClock | None
        _now_sql: str

        def _now(self) -> tuple[float, ...]: ...
        def _tx(self, mode: str = "write", *, single: bool = False) -> Tx: ...
        side_rows_sql: str | None
        unflushed_where: str

        def _rows(self, run: Callable[..., Any], session_id: str) -> tuple[Any, ...] | None: ...
        def _side_rows(
            self, run: Callable[..., Any], session_id: str, family: str | None
        ) -> tuple[list[Any], list[Any]]: ...
        def _session(self, session_id: str, rows: tuple[Any, ...]) -> InMemoryAgentSession: ...
        def _save(self, session: InMemoryAgentSession, *, release: bool) -> int: ...

    def _take(self, session_id: str, token: str, resumable_only: bool) -> InMemoryAgentSession:
        try:
            rows, found = self._claim_rows(session_id, token, resumable_only)
        except StoreUnavailableError as exc:
            if exc.outcome_unknown:  # the claim may have committed: nobody would release it
                with contextlib.suppress(StoreError):
                    self._release(session_id, token)
            raise
        if rows is None:
            if found is None:
                raise SessionNotFoundError(session_id)
            if resumable_only and found[0] not in RESUMABLE:
                raise not_resumable(session_id, found[0])
            raise SessionBusyError(session_id)
        try:
            return self._session(session_id, rows)
        except BaseException:  # a row that cannot be read: nobody may hold it for a lease
            self._release(session_id, token)
            raise

    def _claim_rows(
        self, session_id: str, token: str, resumable_only: bool
    ) -> tuple[tuple[Any, ...] | None, Any]:
        """The claimed session's rows, or None and its status row (None: no such session)."""
        now, at = self._now(), self._now_sql
        # A claim is a lease: it must be atomic and visible to every other process at once,
        # but it need not survive a power cut (nothing of the resume survives one either),
        # so it skips the fsync that a durable commit pays.
        claim = (
            f"UPDATE im_sessions SET claimed_by = ?, claim_until = {at} + ? "
            f"WHERE id = ? AND (claimed_by IS NULL OR claim_until < {at})"
        )
        if resumable_only:
            claim += f" AND status IN {_RESUMABLE_SQL}"
        params = (token, *now, self.lease_ms, session_id, *now)
        found = None
        side = self.side_rows_sql
        # claim and read in one transaction; where one statement reads the row with its
        # side rows, the claim commits on its own and that read follows. Not one statement:
        # a claim that waited for another writer's row lock returns the row that writer
        # committed, but subqueries of its RETURNING would read with the snapshot the
        # statement began with — the new row beside the old events. Read after the claim,
        # everything is at least as new as the row, and no save but its holder's can follow.
        with self._tx("unflushed", single=side is not None) as run:
            if side is not None:  # (and it refreshes the server clock's offset)
                sent = time.monotonic()
                row = run(f"{claim}{self.unflushed_where} RETURNING claim_until", params).fetchone()
                if row is not None and self._server is not None:
                    self._server.observe(row[0] - self.lease_ms, sent, time.monotonic())
                rows = None if row is None else self._rows(run, session_id)
            elif self._server is not None:  # and refresh the server clock's offset
                sent = time.monotonic()
                row = run(f"{claim} RETURNING {_ROW}, claim_until", params).fetchone()
                if row is not None:
                    self._server.observe(row[-1] - self.lease_ms, sent, time.monotonic())
                    row = row[:-1]
                rows = None if row is None else (*row, *self._side_rows(run, session_id, row[-1]))
            elif self.returning:
                row = run(f"{claim} RETURNING {_ROW}", params).fetchone()
                rows = None if row is None else (*row, *self._side_rows(run, session_id, row[-1]))
            else:
                claimed_now = run(claim, params).rowcount == 1
                rows = self._rows(run, session_id) if claimed_now else None
            if rows is None:
                found = run("SELECT status FROM im_sessions WHERE id = ?", (session_id,)).fetchone()
        return rows, found

    def _release(self, session_id: str, token: str, *, wait: bool = False) -> None:
        def release() -> None:
            with self._tx("unflushed") as run:
                run(
                    "UPDATE im_sessions SET claimed_by = NULL, claim_until = NULL "
                    "WHERE id = ? AND claimed_by = ?",
                    (session_id, token),
                )

        if wait:  # after a failed save: wait for the database as the save did
            until_back(release, self.outage_s)
        else:
            release()

    def _renew(self, session_id: str, token: str) -> bool:
        sql = (
            f"UPDATE im_sessions SET claim_until = {self._now_sql} + ? "
            "WHERE id = ? AND claimed_by = ?"
        )
        params = (*self._now(), self.lease_ms, session_id, token)
        with self._tx("unflushed") as run:
            if self._server is None:
                return bool(run(sql, params).rowcount == 1)
            sent = time.monotonic()
            row = run(f"{sql} RETURNING claim_until", params).fetchone()
            if row is not None:
                self._server.observe(row[0] - self.lease_ms, sent, time.monotonic())
            return row is not None

    def _holder(self, session_id: str) -> str | None:
        try:
            with self._tx("read") as run:
                row = run(
                    "SELECT claimed_by FROM im_sessions WHERE id = ?", (session_id,)
                ).fetchone()
        except StoreError:
            return None
        return None if row is None else row[0]

    def _claim_until(self, session_id: str) -> float | None:
        """When the claim on the session lapses (epoch ms; None: not claimed)."""
        try:
            with self._tx("read") as run:
                row = run(
                    "SELECT claim_until FROM im_sessions WHERE id = ? AND claimed_by IS NOT NULL",
                    (session_id,),
                ).fetchone()
        except StoreError:
            return None
        return None if row is None or row[0] is None else float(row[0])

    def _final_save(self, session: InMemoryAgentSession) -> None:
        until_back(
            lambda: self._save(session, release=True),
            self.outage_s,
            check=lambda: self._committed(session),
        )

    def _committed(self, session: InMemoryAgentSession) -> int | None:
        """After a save whose commit went unanswered: its version if it did commit."""
        with self._tx("read") as run:
            row = run(
                "SELECT version, snapshot FROM im_sessions WHERE id = ?", (session.session_id,)
            ).fetchone()
        expected = session.store_version + 1
        if row is None or row[0] != expected or row[1] != state_json(session):
            return None
        session.store_version = expected
        session.events.mark_stored(-1, 0)  # which chunks went in is unknown: rewrite next
        session.ledger_dirty.clear()
        forget_noted(session, len(getattr(session, "audit_noted", None) or ()))  # written too
        return expected
