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
from ..decisions import HITLTask
from ..errors import UsageError
from ..hitl.graph import ApprovalKeys, approval_deadline

__all__ = [
    "StoredRow",
    "column_text",
    "graph_request",
    "ledger_of",
    "ledger_text",
    "row_of",
    "session_from",
]


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
    due_ms: float | None = None
    """When the next deadline step of an approval with a policy falls due (the sweeper's
    index; None: nothing scheduled)."""
    progress: str | None = None
    """Where its approvals with a policy stand (see PendingSession.progress)."""
    agent_version: str | None = None
    """The agent version it runs on (see PendingSession.agent_version)."""


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



def graph_request(session: Any) -> Any:
    """What a graph approval asks the human to review (``approval.request``): what a
    notification shows, and what an interactive button's tag is bound to."""
    return session.context.get("approval.request")


def row_of(session: InMemoryAgentSession) -> StoredRow:
    """The row of a session: its canonical snapshot text and the indexed columns."""
    hitl = session.hitl
    tasks = [t for t in hitl.tasks if t.call_uuid not in hitl.decisions]
    deadlines = [d for t in tasks if (d := _deadline_of(t)) is not None]
    if not hitl.tasks and session.is_pending:  # a graph approval's own deadline (R23b)
        graph_deadline = (
            approval_deadline(session) if hitl.approval_keys is None else _graph_deadline(session)
        )
        deadlines += [graph_deadline] if graph_deadline is not None else []
    request = graph_request(session)
    due, progress = _policy_columns(session)
    return StoredRow(
        session_id=session.session_id,
        status=session.status,
        agent=column_text(session.agent),
        reason=column_text(session.pending_reason),
        tasks_json=_tasks_json(tasks),
        deadline_ms=min(deadlines) if deadlines else None,
        request_json=canonical_dumps(request) if request is not None else "null",
        state_json=state_json(session),
        due_ms=due,
        progress=progress,
        agent_version=column_text(session.agent_version),
    )


def _deadline_of(task: HITLTask) -> float | None:
    """A task's deadline as listings show it: for a policy's, its last (an escalation
    keeps it open past the first)."""
    if task.policy is not None and task.policy.expires_after_ms is not None:
        return task.decide_by_ms
    return task.deadline_ms


def _graph_deadline(session: InMemoryAgentSession) -> float | None:
    from ..hitl.graph import binding_deadline, keys_of

    try:
        return binding_deadline(session, keys_of(session.hitl.approval_keys) or ApprovalKeys())
    except UsageError:  # (a hand-edited policy key): listed without a deadline
        return None


def _policy_columns(session: InMemoryAgentSession) -> tuple[float | None, str | None]:
    """``due_ms`` and ``progress`` of a session's approvals with a policy (None, None for
    one without: a scan of its tasks)."""
    hitl = session.hitl
    if hitl.approval_keys is None and all(t.policy is None for t in hitl.tasks):
        return None, None
    from ..hitl.timeouts import due_ms, progress_of

    parts = []
    if session.is_pending:
        for task in hitl.tasks:
            if task.policy is not None and task.call_uuid not in hitl.decisions:
                found = progress_of(session, task.call_uuid)
                if found is not None:
                    parts.append(f"{task.tool_name}: {found.text}")
        if not hitl.tasks:
            found = progress_of(session)
            if found is not None and session.context.get(found.target) is None:
                parts.append(found.text)
    return due_ms(session), column_text("; ".join(parts)) if parts else None


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
