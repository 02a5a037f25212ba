"""MemoryStore: the reference store, in one process (tests, notebooks, demos)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
)
from .base import (
    DEFAULT_LEASE_MS,
    PendingSession,
    StoredRow,
    claim_token,
    pending_of,
    row_of,
    session_from,
)

__all__ = ["MemoryStore"]


@dataclass
class _Entry:
    row: StoredRow
    version: int
    updated_ms: float
    claimed_by: str | None = None
    claim_until: float = 0.0
    ledger: dict[str, LedgerEntry] = field(default_factory=dict)
    events: list[tuple[int, str]] = field(default_factory=list)
    """The event log as one (count, JSON array) chunk; empty for an empty log."""


class MemoryStore:
    """A dict of snapshots with the full store contract (versions, claims, ledger)."""

    def __init__(self, *, clock: Clock | None = None, lease_ms: float = DEFAULT_LEASE_MS) -> None:
        self.clock = clock or SYSTEM_CLOCK
        self.lease_ms = lease_ms
        self._rows: dict[str, _Entry] = {}
        self._lock = threading.RLock()

    def _free(self, entry: _Entry, token: str | None, now: float) -> bool:
        return entry.claimed_by is None or entry.claim_until < now or entry.claimed_by == token

    def save(self, session: InMemoryAgentSession, *, _release: bool = False) -> int:
        """Insert or compare-and-set update; returns the new version."""
        row = row_of(session)
        log = session.events
        events = [(len(log), log.stored_json())] if len(log) else []
        now = self.clock.now_ms()
        expected = session.store_version
        with self._lock:
            entry = self._rows.get(row.session_id)
            if expected == 0:
                if entry is not None:
                    raise ConflictError(row.session_id, 0, entry.version)
                entry = self._rows[row.session_id] = _Entry(row, 1, now, events=events)
            else:
                if entry is None:
                    raise ConflictError(row.session_id, expected, None)
                if entry.version != expected:
                    raise ConflictError(row.session_id, expected, entry.version)
                if not self._free(entry, session.claim_token, now):
                    raise SessionBusyError(row.session_id)
                entry.row, entry.version, entry.updated_ms = row, expected + 1, now
                entry.events = events
                if _release:
                    entry.claimed_by, entry.claim_until = None, 0.0
            entry.ledger.update(session.ledger)
        session.store_version = expected + 1
        return session.store_version

    def _ledger_hook(self, session_id: str) -> Callable[[str, LedgerEntry], None]:
        def hook(key: str, new: LedgerEntry) -> None:
            with self._lock:
                entry = self._rows.get(session_id)
                if entry is None:
                    return
                old = entry.ledger.get(key)
                if new.status == "started" and old is not None and old.status != "failed":
                    raise EffectOutcomeUnknownError(key, session_id=session_id)
                entry.ledger[key] = new

        return hook

    def load(self, session_id: str) -> InMemoryAgentSession:
        """Load a session."""
        with self._lock:
            entry = self._rows.get(session_id)
            if entry is None:
                raise SessionNotFoundError(session_id)
            row, version, ledger = entry.row, entry.version, dict(entry.ledger)
            chunks = entry.events
        session = session_from(row.state_json, chunks, version, ledger)
        session.ledger_hook = self._ledger_hook(session_id)
        return session

    def delete(self, session_id: str) -> None:
        """Remove a session."""
        with self._lock:
            self._rows.pop(session_id, None)

    def pending(
        self, limit: int = 50, agent: str | None = None, before: PendingSession | None = None
    ) -> list[PendingSession]:
        """Pending sessions, newest first."""
        with self._lock:
            rows = [
                (e.updated_ms, sid, e.row)
                for sid, e in self._rows.items()
                if e.row.status == "pending" and (agent is None or e.row.agent == agent)
            ]
        rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
        if before is not None:
            rows = [r for r in rows if (r[0], r[1]) < (before.updated_ms, before.session_id)]
        return [
            pending_of(
                r.session_id, r.agent, r.reason, r.tasks_json, r.deadline_ms, t, r.request_json
            )
            for t, _, r in rows[:limit]
        ]

    @contextmanager
    def resume(self, session_id: str) -> Iterator[InMemoryAgentSession]:
        """Claim, load, yield; save and release on success, release only on error."""
        token = claim_token()
        now = self.clock.now_ms()
        with self._lock:
            entry = self._rows.get(session_id)
            if entry is None:
                raise SessionNotFoundError(session_id)
            if not self._free(entry, None, now):
                raise SessionBusyError(session_id)
            entry.claimed_by, entry.claim_until = token, now + self.lease_ms
        try:
            session = self.load(session_id)
            session.claim_token = token
            yield session
        except BaseException:
            with self._lock:
                if entry.claimed_by == token:
                    entry.claimed_by, entry.claim_until = None, 0.0
            raise
        self.save(session, _release=True)
        session.claim_token = None

    def put_snapshot(self, snapshot: Any, version: int = 0) -> int:
        """Validate and store a snapshot (see :meth:`SQLStore.put_snapshot`)."""
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
        """Nothing to release."""

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._rows)} sessions)"
