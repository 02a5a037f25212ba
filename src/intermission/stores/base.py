"""The store contract every backend implements, and the pieces they share (R29–R31).

A store keeps one row per session: the canonical snapshot JSON (its event log apart, in
chunks a save appends to and a load leaves unparsed until read), a version for
compare-and-set, the status (indexed, so listing pending sessions is one indexed query),
a claim (who is resuming it, until when) and the idempotency ledger, whose entries are
written the moment they change so a crash between ``started`` and ``completed`` stays
visible.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, runtime_checkable

from ..core.ledger import LedgerEntry
from ..core.session import InMemoryAgentSession
from ..core.snapshot import restore_stored, state_json
from ..decisions import HITLTask

__all__ = [
    "DEFAULT_LEASE_MS",
    "PendingSession",
    "SessionStore",
    "StoredRow",
    "claim_token",
    "row_of",
]

DEFAULT_LEASE_MS = 5 * 60 * 1000.0
"""How long a claim holds when its owner dies without releasing it (SIGKILL, power loss)."""


_Row = tuple[str, str | None, str | None, str, float | None, float, str]


class PendingSession(_Row):
    """One entry of ``store.pending()``. Tasks and request are parsed when first read, so
    listing a page costs what the indexed query costs. A tuple of the stored columns
    underneath: a page of rows becomes a page of entries without a call per field."""

    def __new__(
        cls,
        session_id: str,
        agent: str | None,
        reason: str | None,
        tasks_json: str = "[]",
        deadline_ms: float | None = None,
        updated_ms: float = 0.0,
        request_json: str = "null",
    ) -> PendingSession:
        """An entry from its columns (stores build them with :meth:`from_rows`)."""
        row = (session_id, agent, reason, tasks_json, deadline_ms, updated_ms, request_json)
        return tuple.__new__(cls, row)

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[Any]]) -> list[PendingSession]:
        """Entries from stored rows ``(id, agent, reason, tasks, deadline, updated, request)``."""
        return list(map(partial(tuple.__new__, cls), rows))

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self[0]

    @property
    def agent(self) -> str | None:
        """The agent (or graph) the session belongs to."""
        return self[1]

    @property
    def reason(self) -> str | None:
        """Why it waits (the reason given to ``pending``)."""
        return self[2]

    @property
    def deadline_ms(self) -> float | None:
        """The earliest task deadline, if any."""
        return self[4]

    @property
    def updated_ms(self) -> float:
        """When it was last saved."""
        return self[5]

    @property
    def tasks(self) -> list[HITLTask]:
        """The undecided tool calls (empty for graph approvals)."""
        cache = self.__dict__
        tasks: list[HITLTask] | None = cache.get("tasks")
        if tasks is None:
            tasks = cache["tasks"] = [
                HITLTask.model_validate(t) for t in json.loads(self[3] or "[]")
            ]
        return tasks

    @property
    def request(self) -> Any:
        """What the human is asked to review (``approval.request`` of graph approvals)."""
        cache = self.__dict__
        if "request" not in cache:
            cache["request"] = json.loads(self[6]) if self[6] else None
        return cache["request"]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PendingSession) and (self[0], self[5]) == (other[0], other[5])

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self[0], self[5]))

    def __repr__(self) -> str:
        return f"PendingSession({self[0]!r}, agent={self[1]!r}, reason={self[2]!r})"


_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class StoredRow:
    """The indexed columns derived from a snapshot."""

    session_id: str
    status: str
    agent: str | None
    reason: str | None
    tasks_json: str
    deadline_ms: float | None
    request_json: str
    state_json: str
    """The canonical snapshot without its event log (stores keep the log apart)."""


def row_of(session: InMemoryAgentSession) -> StoredRow:
    """The row of a session: its canonical snapshot text and the indexed columns."""
    hitl = session.hitl
    tasks = [t for t in hitl.tasks if t.call_uuid not in hitl.decisions]
    deadlines = [t.deadline_ms for t in tasks if t.deadline_ms is not None]
    request = session.context.get("approval.request")
    return StoredRow(
        session_id=session.session_id,
        status=session.status,
        agent=session.agent,
        reason=session.pending_reason,
        tasks_json=json.dumps([t.model_dump(mode="json") for t in tasks]) if tasks else "[]",
        deadline_ms=min(deadlines) if deadlines else None,
        request_json=json.dumps(request) if request is not None else "null",
        state_json=state_json(session),
    )


_CLAIMANT: tuple[int, str] | None = None


def claim_token() -> str:
    """Who claims: host, process and a random part (distinct per claim)."""
    global _CLAIMANT
    pid = os.getpid()
    if _CLAIMANT is None or _CLAIMANT[0] != pid:  # computed once per process (and fork)
        _CLAIMANT = (pid, f"{socket.gethostname()}:{pid}:")
    return _CLAIMANT[1] + os.urandom(4).hex()


def pending_of(
    session_id: str,
    agent: str | None,
    reason: str | None,
    tasks_json: str,
    deadline: float | None,
    updated: float,
    request_json: str,
) -> PendingSession:
    """Build a PendingSession from stored columns (nothing parsed yet)."""
    return PendingSession(session_id, agent, reason, tasks_json, deadline, updated, request_json)


def session_from(
    state: str,
    chunks: Sequence[tuple[int, str]],
    version: int,
    ledger: dict[str, LedgerEntry],
) -> InMemoryAgentSession:
    """Rebuild a session from its row and its event chunks (see restore_stored); ledger
    rows (written live) win over the snapshot's."""
    session = InMemoryAgentSession.__new__(InMemoryAgentSession)
    restore_stored(session, state, chunks)
    session.ledger.update(ledger)
    session.store_version = version
    return session


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions wait while nobody works on them.

    - ``save(session)``: insert, or update when the stored version is the one the session was
      loaded at (compare-and-set); otherwise :class:`~intermission.ConflictError`. Refused
      with :class:`~intermission.SessionBusyError` while someone else holds a claim.
    - ``load(session_id)``: the session, or :class:`~intermission.SessionNotFoundError`.
    - ``delete(session_id)``: remove the session and its ledger.
    - ``pending(limit, agent, before)``: pending sessions, newest first, one indexed query;
      page with ``before=<last item>``.
    - ``resume(session_id)``: claim, load, yield, save and release atomically on a clean
      exit; release without saving on an exception. A second resumer is refused with
      ``SessionBusyError`` before anything runs.
    """

    def save(self, session: InMemoryAgentSession) -> int:
        """Save; returns the new version."""
        ...

    def load(self, session_id: str) -> InMemoryAgentSession:
        """Load a session."""
        ...

    def delete(self, session_id: str) -> None:
        """Delete a session."""
        ...

    def pending(
        self, limit: int = 50, agent: str | None = None, before: PendingSession | None = None
    ) -> list[PendingSession]:
        """Pending sessions, newest first."""
        ...

    def resume(self, session_id: str) -> AbstractContextManager[InMemoryAgentSession]:
        """Claim a session for resuming (see the class docstring)."""
        ...

    def put_snapshot(self, snapshot: Any) -> int:
        """Store a snapshot given as JSON text, dict or model (validated first)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
