"""The effect ledger of a SQL store (R32, R39): entries merged only forward, written the
moment they change with their audit record, an effect's start fenced on its holder's claim
and saved version."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..audit import AuditEntry
from ..core.ledger import LedgerEntry, advances, effect_audit
from ..core.session import InMemoryAgentSession
from ..errors import ConflictError, LeaseLostError, StoreError
from ._pool import until_back
from .rows import ledger_of, ledger_text

if TYPE_CHECKING:
    from ._pool import Tx

__all__ = ["SQLLedger"]


class SQLLedger:
    """The ledger primitives of :class:`~intermission.stores.sql.SQLStore`."""

    if TYPE_CHECKING:  # (given by SQLStore)
        clock: Any
        for_update: str
        lease_ms: float
        outage_s: float
        _now_sql: str

        def _now(self) -> tuple[float, ...]: ...
        def _tx(self, mode: str = "write", *, single: bool = False) -> Tx: ...
        def _lock_row(self, run: Callable[..., Any], session_id: str) -> None: ...
        def _audit_write(
            self, run: Callable[..., Any], session_id: str, entries: Any, now: float
        ) -> Any: ...

    def _merge_ledger(
        self, run: Callable[..., Any], ledger_id: str, key: str, entry: LedgerEntry, force: bool
    ) -> LedgerEntry:
        """Write ``entry`` if it moves the stored one forward (or ``force``); returns the
        entry now stored: ``entry`` itself exactly when it was written."""
        for _ in range(3):
            found = run(
                f"SELECT entry FROM im_ledger WHERE session_id = ? AND key = ?{self.for_update}",
                (ledger_id, key),
            ).fetchone()
            old = None if found is None else ledger_of(found[0])
            if not force and not advances(old, entry):
                return old if old is not None else entry
            text = ledger_text(entry)
            if old is not None:
                run(
                    "UPDATE im_ledger SET status = ?, entry = ? WHERE session_id = ? AND key = ?",
                    (entry.status, text, ledger_id, key),
                )
                return entry
            cur = run(
                "INSERT INTO im_ledger (session_id, key, status, entry) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (session_id, key) DO NOTHING",
                (ledger_id, key, entry.status, text),
            )
            if cur.rowcount == 1:
                return entry
            # another transaction inserted it meanwhile (PostgreSQL): judge against that
        raise StoreError(f"the ledger entry {key!r} kept changing under this write; retry")

    def _write_ledger(
        self,
        session: InMemoryAgentSession,
        key: str,
        entry: LedgerEntry,
        force: bool,
        who: AuditEntry | None = None,
    ) -> LedgerEntry:
        """The sessions' ledger hook: write an entry the moment it changes, and its audit
        record in the same transaction (``who``: the record of a change by hand). An
        entry for an effect that ran must not be lost to a database restart, so the write
        waits for the database to be back (``outage_s``).

        An effect's start is flushed before the effect runs (it is what keeps it from
        running twice); its end is not waited for, and is merged again by the next save
        (flushed): a crash of the database that lost it is healed there, and a crash of
        both leaves the effect started, an unknown outcome that a person resolves — what a
        crash of this process a moment earlier leaves. A change by hand is told to a
        person: flushed."""
        sid, token, family = session.session_id, session.claim_token, session.ledger_id
        ended = entry.status in ("completed", "failed") and who is None and not force

        def write() -> LedgerEntry:
            with self._tx("unflushed" if ended else "write") as run:
                if token is not None and entry.status == "started" and not force:
                    # (its UPDATE locks the row first)
                    self._fence(run, sid, token, session.store_version)
                else:  # the row first, its audit head is written last: the lock order
                    self._lock_row(run, sid)
                stored = self._merge_ledger(run, family, key, entry, force)
                record = effect_audit(key, entry, who) if stored is entry else None
                if record is not None:
                    self._audit_write(run, sid, [record], self.clock.now_ms())
                return stored

        stored = until_back(write, self.outage_s)
        if ended and stored is entry:  # not flushed: the save that ends the run merges it
            session.ledger_dirty.add(key)  # again, so a crash that lost it is healed there
        return stored

    def _fence(
        self, run: Callable[..., Any], session_id: str, token: str, version: int
    ) -> None:
        """Refuse to start an effect unless this holder's claim stands (and renew it) and
        the stored row is the version this holder saved last: a save before the effect
        (the recorded decision) need not be flushed, so a database that lost it in a crash
        must not let the effect run on the claim alone."""
        cur = run(
            f"UPDATE im_sessions SET claim_until = {self._now_sql} + ? "
            "WHERE id = ? AND claimed_by = ? AND version = ?",
            (*self._now(), self.lease_ms, session_id, token, version),
        )
        if cur.rowcount != 1:
            found = run(
                "SELECT claimed_by, version FROM im_sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if found is not None and found[0] == token:  # ours, but not what we saved
                raise ConflictError(session_id, version, found[1])
            raise LeaseLostError(session_id, found[0] if found else None, [])
