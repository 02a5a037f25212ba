"""Session snapshots: versioned, validated JSON; never pickle (R28)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._clock import SYSTEM_CLOCK
from .._json import canonical_dumps, check_json
from ..decisions import HITLState
from ..errors import SnapshotSchemaError
from ..events import Event
from ..messages import ChatMessage
from ..traces import ReActTrace, TeamTrace
from .context import FlowContext
from .events_log import EventLog
from .ledger import LedgerEntry
from .state import FlowTrace, GraphRun

if TYPE_CHECKING:
    from .session import InMemoryAgentSession

from .session_status import SessionStatus

__all__ = ["SCHEMA_VERSION", "GraphRunModel", "SessionSnapshot", "parse_snapshot"]

SCHEMA_VERSION = 1

_STRICT = ConfigDict(extra="forbid")


class GraphRunModel(BaseModel):
    """Persisted form of a graph's positions (see :class:`~intermission.core.state.GraphRun`)."""

    model_config = _STRICT

    tokens: list[str] = Field(default_factory=list)
    started: bool = False
    ended: bool = False
    last: str | None = None
    joins: dict[str, int] = Field(default_factory=dict)
    inclusive: list[int] = Field(default_factory=list)
    loops: dict[str, int] = Field(default_factory=dict)
    children: dict[str, GraphRunModel] = Field(default_factory=dict)
    visited: dict[str, int] = Field(default_factory=dict)
    taken: dict[str, int] = Field(default_factory=dict)
    failed: str | None = None


class FlowTraceModel(BaseModel):
    """Persisted positions of every graph in the context."""

    model_config = _STRICT

    root: str | None = None
    graphs: dict[str, GraphRunModel] = Field(default_factory=dict)


AnyTrace = Annotated[ReActTrace | TeamTrace, Field(discriminator="kind")]


class SessionSnapshot(BaseModel):
    """Everything a session needs to continue in another process (R28)."""

    model_config = _STRICT

    schema_version: Literal[1] = 1
    session_id: str
    status: SessionStatus = "new"
    agent: str | None = None
    pending: bool = False
    pending_reason: str | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    flow: FlowTraceModel = Field(default_factory=FlowTraceModel)
    traces: dict[str, AnyTrace] = Field(default_factory=dict)
    hitl: HITLState = Field(default_factory=HITLState)
    ledger: dict[str, LedgerEntry] = Field(default_factory=dict)
    messages: list[ChatMessage] = Field(default_factory=list)
    max_messages: int = 50
    events: list[Event] = Field(default_factory=list)
    max_events: int = 1000
    next_seq: int = 1

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, compact): equal snapshots give equal text."""
        return canonical_dumps(self.model_dump(mode="json"))


def take_snapshot(session: InMemoryAgentSession) -> SessionSnapshot:
    """Snapshot ``session``; a non-JSON context value raises NotSerializableError."""
    ctx = session.context
    for key, value in ctx.data.items():
        check_json(key, value)
    for key, entry in session.ledger.items():
        check_json(f"ledger[{key}]", entry.result)
    data = {
        "schema_version": 1,
        "session_id": session.session_id,
        "status": session.status,
        "agent": session.agent,
        "pending": ctx.is_stopped,
        "pending_reason": session.pending_reason,
        "context": ctx.data,
        "flow": {
            "root": ctx.trace.root,
            "graphs": {k: v.to_data() for k, v in ctx.trace.graphs.items()},
        },
        "traces": {k: v.model_dump() for k, v in session.traces.items()},
        "hitl": session.hitl.model_dump(),
        "ledger": {k: v.model_dump() for k, v in session.ledger.items()},
        "messages": [m.model_dump() for m in session.messages],
        "max_messages": session.max_messages,
        "events": [e.model_dump() for e in session.events],
        "max_events": session.events.max_events,
        "next_seq": session.events.next_seq,
    }
    # Validating here (not only on restore) makes a snapshot that could not be read back
    # fail at save time, where the cause is still in view.
    return SessionSnapshot.model_validate(data)


def snapshot_json(session: InMemoryAgentSession) -> str:
    """Canonical JSON text of a session's snapshot."""
    return take_snapshot(session).to_json()


def _path(err: ValidationError) -> str:
    first = err.errors()[0]
    return ".".join(str(p) for p in first["loc"])


def parse_snapshot(data: Any) -> SessionSnapshot:
    """Validate a snapshot given as a model, dict or JSON text (typed errors only)."""
    if isinstance(data, SessionSnapshot):
        return data
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise SnapshotSchemaError(f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SnapshotSchemaError(f"a snapshot is a JSON object, not {type(data).__name__}")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SnapshotSchemaError(
            f"schema_version {version!r} is not supported (this intermission reads "
            f"{SCHEMA_VERSION}); upgrade intermission or migrate the snapshot",
            path="schema_version",
        )
    try:
        return SessionSnapshot.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SnapshotSchemaError(first["msg"], path=_path(exc)) from None


def restore_session(session: InMemoryAgentSession, data: Any) -> None:
    """Fill a bare session object from snapshot data."""
    snap = parse_snapshot(data)
    ctx = FlowContext(snap.session_id, snap.context)
    trace = FlowTrace()
    trace.root = snap.flow.root
    trace.graphs = {
        k: GraphRun.from_data(v.model_dump(exclude_defaults=True))
        for k, v in snap.flow.graphs.items()
    }
    ctx.trace = trace
    ctx.session = session
    ctx._stopped = snap.pending
    session.session_id = snap.session_id
    session.context = ctx
    session.max_messages = snap.max_messages
    session.messages = list(snap.messages)
    log = EventLog(snap.max_events)
    for event in snap.events:
        log.append(event)
    log.next_seq = snap.next_seq
    session.events = log
    session.traces = dict(snap.traces)
    session.hitl = snap.hitl
    session.ledger = dict(snap.ledger)
    session.status = snap.status
    session.agent = snap.agent
    session.clock = SYSTEM_CLOCK
    session._reason = snap.pending_reason
    session.ledger_hook = None
    session.store_version = 0
    session.claim_token = None
