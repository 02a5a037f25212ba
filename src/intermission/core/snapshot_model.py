"""The snapshot's schema: the pydantic models a stored session is validated against (R28).
Writing and reading snapshots is :mod:`intermission.core.snapshot`'s job."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from .._model import Model
from ..decisions import HITLState
from ..events import Event
from ..messages import ChatMessage
from ..principals import Actor
from .ledger import LedgerEntry
from .session_status import SessionStatus

__all__ = [
    "SCHEMA_VERSION",
    "FlowTraceModel",
    "GraphRunModel",
    "HistoryModel",
    "MarkModel",
    "ParentModel",
    "SessionSnapshot",
]

SCHEMA_VERSION = 1

_STRICT = ConfigDict(extra="forbid", defer_build=True)


class GraphRunModel(Model):
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


class MarkModel(Model):
    """A stored checkpoint (see :mod:`intermission.core.history`)."""

    model_config = _STRICT

    at: float
    n: int
    seq: int
    back: dict[str, Any] = Field(default_factory=dict)


class HistoryModel(Model):
    """A session's stored checkpoints."""

    model_config = _STRICT

    marks: list[MarkModel]
    first: int = 0
    max: int = 50


class ParentModel(Model):
    """Where a fork came from."""

    model_config = _STRICT

    id: str
    at: int


class FlowTraceModel(Model):
    """Persisted positions of every graph in the context."""

    model_config = _STRICT

    root: str | None = None
    graphs: dict[str, GraphRunModel] = Field(default_factory=dict)


class SessionSnapshot(Model):
    """Everything a session needs to continue in another process (R28)."""

    model_config = _STRICT

    schema_version: Literal[1] = 1
    session_id: str
    status: SessionStatus = "new"
    agent: str | None = None
    agent_fingerprint: str | None = None
    """The fingerprint of the agent that made the session (None in snapshots written
    before it was recorded: the next agent to run it records its own)."""
    agent_version: str | None = None
    """The agent version the session runs on (``.version()``, else the fingerprint; None
    in snapshots written before versions were recorded)."""
    release: str | None = None
    """The intermission release that last ran the session."""
    pending: bool = False
    pending_reason: str | None = None
    requester: Actor | None = None
    """Who sent the session's current request (when it named one)."""
    context: dict[str, Any] = Field(default_factory=dict)
    flow: FlowTraceModel = Field(default_factory=FlowTraceModel)
    traces: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Each agent's state: JSON with a ``kind``, opaque to the core (see agent_state)."""
    hitl: HITLState = Field(default_factory=HITLState)
    ledger: dict[str, LedgerEntry] = Field(default_factory=dict)
    messages: list[ChatMessage] = Field(default_factory=list)
    max_messages: int = 50
    events: list[Event] = Field(default_factory=list)
    max_events: int = 1000
    next_seq: int = 1
    history: HistoryModel | None = None
    parent: ParentModel | None = None
    family: str | None = None
    generation: str | None = None
    effects: Literal["real", "dry-run"] = "real"
    meta: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """What extensions keep with the session (see ``InMemoryAgentSession.meta``): a JSON
    object per extension name, each versioned by its extension; left out when empty, so
    snapshots of sessions that use none are as they were, and older ones load."""

    def to_json(self) -> str:
        """Canonical JSON (compact, defaults left out, keys in a fixed order: see
        ``layout``): equal snapshots give equal text."""
        from .snapshot import canonical, layout  # (the writer's rules; it imports this schema)

        return layout(canonical(self.model_dump(mode="json")))
