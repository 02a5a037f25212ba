"""MemoryStore: the reference store, in one process (tests, notebooks, demos)."""

from __future__ import annotations

import threading
from bisect import bisect_left, insort
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import _check
from .._clock import SYSTEM_CLOCK, Clock
from ..audit import AuditEntry, AuditRecord, AuditVerification, forget_noted
from ..core.ledger import LedgerEntry, advances, effect_audit
from ..core.session import InMemoryAgentSession
from ..core.snapshot import check_size, parse_snapshot
from ..errors import (
    ConflictError,
    LeaseLostError,
    SessionBusyError,
    SessionNotFoundError,
)
from . import audit_chain, audit_check
from .audit_chain import Head, StoredRecord, with_effects
from .base import (
    DEFAULT_LEASE_MS,
    RESUMABLE,
    PendingPage,
    PendingSession,
    StoredRow,
    StoreMethods,
    StuckSession,
    check_id,
    check_options,
    check_page,
    check_saved,
    not_resumable,
    row_of,
)
from .lease import Leases
from .listings import VersionCount, pending_of, sorted_versions
from .outbox_memory import MemoryOutbox
from .outbox_rules import derive
from .rows import column_text, session_from
from .told import telling

__all__ = ["MemoryStore"]


@dataclass
class _Entry:
    row: StoredRow
    version: int
    updated_ms: float
    claimed_by: str | None = None
    claim_until: float = 0.0
    events: tuple[tuple[int, str], ...] = ()
    """The event log as one (count, JSON array) chunk; empty for an empty log."""
    family: str | None = None
    """Its ledger family (None: a session from before families were minted, whose ledger
    is keyed by its id)."""
    pending_since: float = 0.0
    """When it became pending (kept by saves while it stays pending)."""
    audit_head: tuple[int, str | None] = (0, None)
    """The last audit record written while it is stored: ``(seq, hash)`` (see audit_check)."""


_Filter = tuple[str | None, ...]
"""Which sessions an ordered list of :class:`_PendingIndex` holds: ``("all",)``,
``("agent", agent)``, ``("version", version)`` or ``("both", agent, version)``."""


class _PendingIndex:
    """Pending sessions ordered by (pending_since, id), overall, per agent, per version
    and per agent version: a page of ``pending()`` reads its rows from the end instead of
    scanning every session (as the SQL stores' partial indexes do), and ``versions()``
    reads each agent version's count and oldest from its list."""

    def __init__(self) -> None:
        self.lists: dict[_Filter, list[tuple[float, str]]] = {}

    @staticmethod
    def _filters(entry: _Entry) -> tuple[_Filter, ...]:
        agent, version = entry.row.agent, entry.row.agent_version
        return ("all",), ("agent", agent), ("version", version), ("both", agent, version)

    def add(self, entry: _Entry) -> None:
        key = (entry.pending_since, entry.row.session_id)
        for found in self._filters(entry):
            insort(self.lists.setdefault(found, []), key)

    def remove(self, entry: _Entry) -> None:
        key = (entry.pending_since, entry.row.session_id)
        for found in self._filters(entry):
            keys = self.lists.get(found, [])
            i = bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                del keys[i]
            if not keys:  # (versions() lists only agent versions that have sessions)
                self.lists.pop(found, None)

    def page(
        self, limit: int, agent: str | None, version: str | None, before: tuple[float, str] | None
    ) -> list[tuple[float, str]]:
        found: _Filter
        if version is None:
            found = ("all",) if agent is None else ("agent", agent)
        else:
            found = ("version", version) if agent is None else ("both", agent, version)
        keys = self.lists.get(found, [])
        end = bisect_left(keys, before) if before is not None else len(keys)
        return keys[max(0, end - limit) : end][::-1]

    def versions(self) -> list[VersionCount]:
        return [
            VersionCount(found[1], found[2], len(keys), keys[0][0])
            for found, keys in self.lists.items()
            if found[0] == "both"
        ]


class MemoryStore(StoreMethods):
    """A dict of snapshots with the full store contract (versions, claims, ledger).

    ``outbox=True``: saves write the notifications they cause to ``store.outbox`` (see
    :mod:`intermission.notify`). ``audit_key``: see :class:`SQLStore`."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        lease_ms: float = DEFAULT_LEASE_MS,
        heartbeat: bool = True,
        outbox: bool | None = False,
        audit_key: str | bytes | None = None,
    ) -> None:
        check_options(lease_ms, heartbeat=heartbeat, outbox=outbox)
        self._audit_key = audit_chain.resolve_key(audit_key)
        self.clock = clock or SYSTEM_CLOCK
        self.lease_ms = lease_ms
        self._rows: dict[str, _Entry] = {}
        self._ledgers: dict[str, dict[str, LedgerEntry]] = {}
        self._pending = _PendingIndex()
        self._due: dict[str, float] = {}
        """Sessions with a deadline step scheduled: when it falls due."""
        self._audit: dict[str, list[StoredRecord]] = {}
        """Each session id's audit records (kept after a delete, see audit_chain)."""
        self._lock = threading.RLock()
        self.leases = Leases(lease_ms, self._renew, enabled=heartbeat)
        self.outbox = MemoryOutbox(self, bool(outbox))

    def _free(self, entry: _Entry, token: str | None, now: float) -> bool:
        return entry.claimed_by is None or entry.claim_until < now or entry.claimed_by == token

    # -- saves -------------------------------------------------------------------------
    def save(self, session: InMemoryAgentSession) -> int:
        """Insert or compare-and-set update; returns the new version."""
        with telling(check_saved(session)):  # (tracing: a pause is on record from now)
            return self._save(session, release=False)

    def _save(self, session: InMemoryAgentSession, *, release: bool) -> int:
        row = row_of(session)
        log = session.events
        events = ((len(log), log.stored_json()),) if len(log) else ()
        # the snapshot's whole text would be the row's plus the log (R50's one limit)
        extra = len(',"events":') + len(events[0][1]) if events else 0
        check_size(row.state_json, row.session_id, extra)
        now = self.clock.now_ms()
        expected = session.store_version
        sid = row.session_id
        noted: list[AuditEntry] = getattr(session, "audit_noted", None) or []
        n_noted = len(noted)  # written with this save; forgotten once it is done
        notes = derive(session, now, row) if self.outbox.enabled else None
        with self._lock:
            entry = self._rows.get(sid)
            if expected == 0:
                if entry is not None:
                    raise ConflictError(sid, 0, entry.version)
                entry = self._rows[sid] = _Entry(
                    row, 1, now, events=events, family=session.family, pending_since=now
                )
                chain = self._audit.get(sid)
                if chain:  # the id's records from before the row: the row starts at them
                    entry.audit_head = (chain[-1][0], chain[-1][2])
            else:
                if entry is None:
                    raise ConflictError(sid, expected, None)
                if entry.family is not None and entry.family != session.ledger_id:
                    # a copy of a deleted session, saved over the new one under its id
                    # (same version number, another generation): never brought back. A
                    # row of no family (from before families) takes the save as ever.
                    raise ConflictError(sid, expected, entry.version, replaced=True)
                if entry.version != expected:
                    raise ConflictError(sid, expected, entry.version)
                fenced = entry.claimed_by == session.claim_token if release else None
                if fenced is False or not self._free(entry, session.claim_token, now):
                    raise SessionBusyError(sid)
                if entry.row.status == "pending":
                    self._pending.remove(entry)
                    if row.status != "pending":
                        entry.pending_since = now
                else:
                    entry.pending_since = now
                entry.row, entry.version, entry.updated_ms = row, expected + 1, now
                entry.events, entry.family = events, session.family
                if release:
                    entry.claimed_by, entry.claim_until = None, 0.0
            if row.status == "pending":
                self._pending.add(entry)
            if row.due_ms is not None:
                self._due[sid] = row.due_ms
            else:
                self._due.pop(sid, None)
            ledger = self._ledgers.setdefault(session.ledger_id, {})
            effects: list[AuditEntry | None] = []
            for key in session.ledger_dirty:
                new = session.ledger.get(key)
                if new is not None and advances(ledger.get(key), new):
                    ledger[key] = new
                    if new.by in (None, sid):  # (see SQLStore._save_tx)
                        effects.append(effect_audit(key, new))
            if notes:
                self.outbox.write(notes, now)
            records = with_effects(noted[:n_noted], effects) if effects else noted[:n_noted]
            if records:
                self._audit_append(sid, records, now)
        if n_noted:
            forget_noted(session, n_noted)
        if notes:
            self.outbox.wake.set()
        log.first_new_seq = log.next_seq  # what the next save adds starts here (see derive)
        session.ledger_dirty.clear()
        if session.ledger_hook is None:
            session.ledger_hook = self._write_ledger
        session.store_version = expected + 1
        return session.store_version

    def _write_ledger(
        self,
        session: InMemoryAgentSession,
        key: str,
        new: LedgerEntry,
        force: bool,
        who: AuditEntry | None = None,
    ) -> LedgerEntry:
        """The sessions' ledger hook (see :meth:`SQLStore._write_ledger`)."""
        sid, token = session.session_id, session.claim_token
        with self._lock:
            if token is not None and new.status == "started" and not force:
                self._fence(sid, token)
            ledger = self._ledgers.setdefault(session.ledger_id, {})
            old = ledger.get(key)
            if not force and not advances(old, new):
                return old if old is not None else new
            ledger[key] = new
            record = effect_audit(key, new, who)
            if record is not None:
                self._audit_append(sid, [record], self.clock.now_ms())
            return new

    def _fence(self, session_id: str, token: str) -> None:
        entry = self._rows.get(session_id)
        if entry is None or entry.claimed_by != token:
            raise LeaseLostError(session_id, entry.claimed_by if entry else None, [])
        entry.claim_until = self.clock.now_ms() + self.lease_ms

    # -- loads -------------------------------------------------------------------------
    def load(self, session_id: str) -> InMemoryAgentSession:
        """Load a session."""
        check_id(session_id)
        with self._lock:
            entry = self._rows.get(session_id)
            if entry is None:
                raise SessionNotFoundError(session_id)
            row, version, chunks = entry.row, entry.version, entry.events
            ledger = dict(self._ledgers.get(entry.family or session_id, {}))
        session = session_from(row.state_json, chunks, version, ledger, self.clock)
        session.ledger_hook = self._write_ledger
        return session

    def delete(self, session_id: str) -> None:
        """Remove a session (and its ledger, unless forks still share it). Its audit records
        stay: a ``session.deleted`` record ends their chain."""
        check_id(session_id)
        with self._lock:
            entry = self._rows.pop(session_id, None)
            self._due.pop(session_id, None)
            if entry is None:
                return
            chain = self._audit.get(session_id)
            head = Head.of(chain[-1]) if chain else None
            if head is not None and not head.closed:
                self._audit_append(session_id, [audit_chain.deleted_entry()], self.clock.now_ms())
            if entry.row.status == "pending":
                self._pending.remove(entry)
            family = entry.family or session_id
            # nobody of the family left: its ledger goes (a session now under a deleted
            # id has a family of its own and keeps no other alive)
            if not any((e.family or sid) == family for sid, e in self._rows.items()):
                self._ledgers.pop(family, None)

    def pending(
        self,
        limit: int = 50,
        agent: str | None = None,
        before: PendingSession | None = None,
        *,
        version: str | None = None,
    ) -> PendingPage:
        """Pending sessions, newest first by when they became pending; page with
        ``before=page.last`` (rows here are always readable: ``unreadable`` stays empty).
        ``version``: ``"ops@2"`` or ``"2"`` (see :class:`SessionStore`)."""
        agent, bare = check_page(limit, agent, before, version)
        start = (before.pending_since, before.session_id) if before is not None else None
        with self._lock:
            # (filters as the rows keep them, see row_of)
            keys = self._pending.page(limit, column_text(agent), column_text(bare), start)
            entries = [self._rows[sid] for _, sid in keys]
        return PendingPage(
            pending_of(
                e.row.session_id, e.row.agent, e.row.reason, e.row.tasks_json,
                e.row.deadline_ms, e.updated_ms, e.row.request_json, e.pending_since,
                e.row.progress, e.row.agent_version,
            )
            for e in entries
        )  # fmt: skip

    def versions(self) -> list[VersionCount]:
        """The sessions waiting to be resumed, per agent name and version: how many, and
        since when the oldest waits (see :meth:`SQLStore.versions`)."""
        with self._lock:
            counts = {(c.agent, c.version): c for c in self._pending.versions()}
            # stopped otherwise (a step budget, an error): still pinned to its version,
            # so counted too — retiring the version would strand it (few such sessions)
            for entry in self._rows.values():
                row = entry.row
                if row.status not in ("paused", "failed"):
                    continue
                key = (row.agent, row.agent_version)
                had = counts.get(key)
                counts[key] = VersionCount(
                    row.agent, row.agent_version, (had.count if had else 0) + 1,
                    min(had.oldest_ms, entry.updated_ms) if had else entry.updated_ms,
                )  # fmt: skip
            return sorted_versions(counts.values())

    def recent(self, limit: int = 50) -> list[str]:
        """The ids of the sessions saved last, newest first (see :meth:`SQLStore.recent`)."""
        _check.count("limit", limit, 1, 1000)
        with self._lock:
            found = sorted(((e.updated_ms, sid) for sid, e in self._rows.items()), reverse=True)
        return [sid for _, sid in found[:limit]]

    def stuck(self, limit: int = 100) -> list[StuckSession]:
        """Sessions with an effect of unknown outcome that nobody runs now (see
        :class:`StuckSession`)."""
        _check.count("limit", limit, 1, 10_000)
        now = self.clock.now_ms()
        out: list[StuckSession] = []
        with self._lock:
            for ledger_id, ledger in sorted(self._ledgers.items()):
                for key, entry in sorted(ledger.items()):
                    if entry.status != "started":
                        continue
                    sid = entry.by or ledger_id
                    # (an effect whose session is gone, a fork deleted since, is its family's)
                    mine = [sid] if sid in self._rows else [
                        i for i, r in self._rows.items() if (r.family or i) == ledger_id
                    ]  # fmt: skip
                    for sid in mine:
                        row = self._rows[sid]
                        held = row.claimed_by is not None and row.claim_until >= now
                        if (row.family or sid) == ledger_id and not held:
                            out.append(StuckSession(sid, row.row.agent, row.row.status, key,
                                                    entry.started_ms))  # fmt: skip
        return sorted(out)[:limit]

    def due(self, now_ms: float | None = None, limit: int = 100) -> list[str]:
        """Sessions whose next deadline step (a warning, an escalation, an expiry of an
        approval with a policy) has fallen due by ``now_ms`` (default: the store's clock),
        the longest due first."""
        _check.count("limit", limit, 1, 100_000)
        _check.number("now_ms", now_ms, 0, 1e15, optional=True)
        now = self.clock.now_ms() if now_ms is None else now_ms
        with self._lock:
            found = sorted((t, sid) for sid, t in self._due.items() if t <= now)
        return [sid for _, sid in found[:limit]]

    # -- claims (R30, R40): resume() and claim() come from StoreMethods ---------------
    def _take(self, session_id: str, token: str, resumable_only: bool) -> InMemoryAgentSession:
        now = self.clock.now_ms()
        with self._lock:
            entry = self._rows.get(session_id)
            if entry is None:
                raise SessionNotFoundError(session_id)
            if resumable_only and entry.row.status not in RESUMABLE:
                raise not_resumable(session_id, entry.row.status)
            if not self._free(entry, None, now):
                raise SessionBusyError(session_id)
            entry.claimed_by, entry.claim_until = token, now + self.lease_ms
            return self.load(session_id)

    def _release(self, session_id: str, token: str, *, wait: bool = False) -> None:
        with self._lock:
            entry = self._rows.get(session_id)
            if entry is not None and entry.claimed_by == token:
                entry.claimed_by, entry.claim_until = None, 0.0

    def _renew(self, session_id: str, token: str) -> bool:
        with self._lock:
            entry = self._rows.get(session_id)
            if entry is None or entry.claimed_by != token:
                return False
            entry.claim_until = self.clock.now_ms() + self.lease_ms
            return True

    def _holder(self, session_id: str) -> str | None:
        with self._lock:
            entry = self._rows.get(session_id)
            return entry.claimed_by if entry is not None else None

    def _claim_until(self, session_id: str) -> float | None:
        """When the claim on the session lapses (epoch ms; None: not claimed)."""
        with self._lock:
            entry = self._rows.get(session_id)
            return entry.claim_until if entry is not None and entry.claimed_by else None

    def _final_save(self, session: InMemoryAgentSession) -> None:
        self._save(session, release=True)

    # -- the audit trail (see audit_chain) -----------------------------------------------
    def _audit_append(
        self, session_id: str, entries: Sequence[AuditEntry], now: float
    ) -> list[StoredRecord]:
        """Append to a session's chain (under the store's lock)."""

        def head(sid: str) -> Head | None:
            chain = self._audit.get(sid)
            return Head.of(chain[-1]) if chain else None

        rows = audit_chain.extend(session_id, head(session_id), entries, now, head, self._audit_key)
        self._audit.setdefault(session_id, []).extend(rows)
        entry = self._rows.get(session_id)
        if rows and entry is not None:  # the row's head (see audit_check)
            entry.audit_head = (rows[-1][0], rows[-1][2])
        return rows

    def append_audit(self, session_id: str, entries: Sequence[AuditEntry]) -> list[AuditRecord]:
        """Append ``entries`` to the session's audit chain (see :meth:`SQLStore.append_audit`)."""
        sid = check_id(session_id)
        found = audit_chain.check_entries(entries)
        if not found:
            return []
        with self._lock:
            rows = self._audit_append(sid, found, self.clock.now_ms())
        return [audit_chain.parse(sid, row) for row in rows]

    def audit(self, session_id: str) -> list[AuditRecord]:
        """The session id's audit records, oldest first (those of a deleted session too)."""
        sid = check_id(session_id)
        with self._lock:
            rows = list(self._audit.get(sid, ()))
        return [audit_chain.parse(sid, row) for row in rows]

    def verify_audit(self, session_id: str) -> AuditVerification:
        """Check the session id's audit trail (see :meth:`SQLStore.verify_audit`)."""
        sid = check_id(session_id)

        def parent_record(parent: str, seq: int) -> StoredRecord | None:
            return next((r for r in self._audit.get(parent, ()) if r[0] == seq), None)

        def rows_of(parent: str) -> list[StoredRecord]:
            return list(self._audit.get(parent, ()))

        with self._lock:
            rows = list(self._audit.get(sid, ()))
            result = audit_chain.verify(sid, rows, parent_record, self._audit_key)
            entry = self._rows.get(sid)
            head = None if entry is None else entry.audit_head
            session = None if entry is None else self.load(sid)
            return audit_check.finish(result, rows, head, session, rows_of)

    # -- snapshots and inspection --------------------------------------------------------
    def put_snapshot(self, snapshot: Any, version: int = 0) -> int:
        """Validate and store a snapshot (see :meth:`SQLStore.put_snapshot`: never over
        another generation of the session)."""
        _check.count("version", version, 0, 2**62)
        session = InMemoryAgentSession.restore(parse_snapshot(snapshot))
        session.store_version = version
        return self.save(session)

    def raw_row(self, session_id: str) -> tuple[Any, ...] | None:
        """The stored form of a session (for tests)."""
        with self._lock:
            e = self._rows.get(session_id)
            return None if e is None else (e.row, e.version, e.claimed_by)

    def count(self) -> int:
        """How many sessions are stored."""
        return len(self._rows)

    def close(self) -> None:
        """Stop renewing claims (nothing else to release)."""
        self.leases.close()

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._rows)} sessions)"
