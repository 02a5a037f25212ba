"""A session as a store row: the indexed columns derived from its snapshot on save, and
the session rebuilt from its row, event chunks and ledger rows on load."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._clock import SYSTEM_CLOCK, Clock
from .._json import canonical_dumps
from ..core.ledger import LedgerEntry
from ..core.session import InMemoryAgentSession
from ..core.snapshot import restore_stored, state_json
from ..hitl.graph import approval_deadline

__all__ = ["StoredRow", "column_text", "ledger_of", "ledger_text", "row_of", "session_from"]


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


def column_text(text: str | None) -> str | None:
    """A display copy of free text for a listing column: NUL and lone surrogates, which
    no database keeps in a text column, written as escapes (the snapshot keeps the exact
    text; the same on every store)."""
    if text is None or (text.isascii() and "\x00" not in text):
        return text
    return "".join(
        f"\\u{ord(c):04x}" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in text
    )


def _tasks_json(tasks: list[Any]) -> str:
    """The listed tasks, without their argument schemas (the snapshot keeps those)."""
    if not tasks:
        return "[]"
    return canonical_dumps([t.model_dump(mode="json", exclude={"args_schema"}) for t in tasks])


def row_of(session: InMemoryAgentSession) -> StoredRow:
    """The row of a session: its canonical snapshot text and the indexed columns."""
    hitl = session.hitl
    tasks = [t for t in hitl.tasks if t.call_uuid not in hitl.decisions]
    deadlines = [t.deadline_ms for t in tasks if t.deadline_ms is not None]
    if not hitl.tasks and session.is_pending:  # a graph approval's own deadline (R23b)
        graph_deadline = approval_deadline(session)
        deadlines += [graph_deadline] if graph_deadline is not None else []
    request = session.context.get("approval.request")
    return StoredRow(
        session_id=session.session_id,
        status=session.status,
        agent=column_text(session.agent),
        reason=column_text(session.pending_reason),
        tasks_json=_tasks_json(tasks),
        deadline_ms=min(deadlines) if deadlines else None,
        request_json=canonical_dumps(request) if request is not None else "null",
        state_json=state_json(session),
    )


def session_from(
    state: str,
    chunks: Sequence[tuple[int, str]],
    version: int,
    ledger: dict[str, LedgerEntry],
    clock: Clock = SYSTEM_CLOCK,
) -> InMemoryAgentSession:
    """Rebuild a session from its row and its event chunks (see restore_stored); ledger
    rows (written live) win over the snapshot's. The session tells time by ``clock``, the
    store's: every process judges its deadlines alike."""
    session = InMemoryAgentSession.__new__(InMemoryAgentSession)
    restore_stored(session, state, chunks)
    session.ledger.update(ledger)
    session.ledger_dirty = set()  # what the store holds is not for it to write again
    session.store_version = version
    session.clock = clock
    return session


def ledger_text(entry: LedgerEntry) -> str:
    """How a store keeps a ledger entry (canonical JSON: lone surrogates escaped)."""
    return canonical_dumps(entry.model_dump(mode="json"))


def ledger_of(text: str) -> LedgerEntry:
    """A stored ledger entry (json.loads reads escaped lone surrogates; pydantic's JSON
    parser refuses them)."""
    return LedgerEntry.model_validate(json.loads(text))
