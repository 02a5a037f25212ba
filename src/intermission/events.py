"""Events: pydantic models in one discriminated union on ``kind`` (R24).

Fixed orders (R25):

- HITL first request: ``RunStart → ReasonStart → ReasonDelta* → ReasonEnd → HITLPending →
  RunEnd(is_abnormal=True)``; no ActionStart or ToolCall events.
- Resume with decisions: ``RunStart → HITLDecided×n → ActionStart → (ToolCallStart →
  ToolCallEnd)×n → ActionEnd → ReasonStart → … → RunEnd``.
- Cancelling a stream emits no RunEnd (R26); an unhandled error ends the stream with the
  exception and no RunEnd.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter

from ._model import Model
from .decisions import DecisionRecord, HITLTask, Vote
from .messages import ToolCall
from .principals import Via

__all__ = [
    "ActionEndEvent",
    "ActionStartEvent",
    "ApprovalDecidedEvent",
    "ApprovalEscalatedEvent",
    "ApprovalExpiredEvent",
    "ApprovalVotedEvent",
    "ApprovalWarnedEvent",
    "Event",
    "EventBase",
    "HITLDecidedEvent",
    "HITLExpiredEvent",
    "HITLPendingEvent",
    "NodeEndEvent",
    "NodeStartEvent",
    "ReasonDeltaEvent",
    "ReasonEndEvent",
    "ReasonStartEvent",
    "RunEndEvent",
    "RunStartEvent",
    "TeamEndEvent",
    "TeamStartEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "event_adapter",
]


class EventBase(Model):
    """Fields every event has."""

    model_config = ConfigDict(extra="forbid", defer_build=True, frozen=True)

    run_id: str
    agent: str
    session_id: str
    seq: int
    ts: float
    """Epoch milliseconds from the run's clock."""


class RunStartEvent(EventBase):
    """A request started (``prompt`` is None for a resume)."""

    kind: Literal["run_start"] = "run_start"
    prompt: str | None = None


class RunEndEvent(EventBase):
    """A request finished (not emitted on cancellation or unhandled errors)."""

    kind: Literal["run_end"] = "run_end"
    content: str = ""
    is_abnormal: bool = False
    pending: bool = False
    error: str | None = None
    """Why the request ended abnormally when its model failed for good, else None.

    Say ``ModelCallError: HTTP 503 …``: the request is resumable by an empty prompt."""


class ReasonStartEvent(EventBase):
    """A model call starts."""

    kind: Literal["reason_start"] = "reason_start"
    reason_id: str
    turn: int


class ReasonDeltaEvent(EventBase):
    """A streamed chunk of model text; ``final`` marks the closing delta of an abnormal end."""

    kind: Literal["reason_delta"] = "reason_delta"
    reason_id: str | None = None
    text: str = ""
    final: bool = False


class ReasonEndEvent(EventBase):
    """A model call returned."""

    kind: Literal["reason_end"] = "reason_end"
    reason_id: str
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    duration_ms: float = 0.0
    usage: dict[str, int] | None = None
    """Token counts when the model reported them (``input_tokens``, ``output_tokens``)."""


class ActionStartEvent(EventBase):
    """A batch of tool calls starts."""

    kind: Literal["action_start"] = "action_start"
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ToolCallStartEvent(EventBase):
    """One tool call starts."""

    kind: Literal["tool_call_start"] = "tool_call_start"
    call_uuid: str
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ToolCallEndEvent(EventBase):
    """One tool call ended (``error`` set when it failed; the observation says why)."""

    kind: Literal["tool_call_end"] = "tool_call_end"
    call_uuid: str
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)
    observation: str | None = None
    error: str | None = None
    duration_ms: float = 0.0


class ActionEndEvent(EventBase):
    """A batch of tool calls ended (not emitted when the batch was abandoned by a pending)."""

    kind: Literal["action_end"] = "action_end"


class HITLPendingEvent(EventBase):
    """A batch was suspended for human approval."""

    kind: Literal["hitl_pending"] = "hitl_pending"
    tasks: list[HITLTask] = Field(default_factory=list)
    reason: str | None = None


class HITLDecidedEvent(EventBase):
    """A decision was applied on resume (or recorded, when ``applied`` is False)."""

    kind: Literal["hitl_decided"] = "hitl_decided"
    call_uuid: str
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)
    decision: DecisionRecord


class HITLExpiredEvent(EventBase):
    """A pending task passed its deadline (R23b)."""

    kind: Literal["hitl_expired"] = "hitl_expired"
    call_uuid: str
    tool_name: str
    resolution: Literal["reject", "wait"]


def _none(value: Any) -> bool:
    return value is None


def _empty(value: Any) -> bool:
    return not value


class ApprovalDecidedEvent(EventBase):
    """A graph approval was decided (``decide_graph``, an ApprovalWidget): who, what, why.

    Recorded when the decision is written, before the resume applies it."""

    kind: Literal["approval_decided"] = "approval_decided"
    verdict: Literal["APPROVE", "REJECT"]
    reviewer: str | None = None
    reason: str | None = None
    comment: str | None = None
    roles: list[str] = Field(default_factory=list, exclude_if=_empty)
    via: Via | None = Field(default=None, exclude_if=_none)
    authenticated: bool = Field(default=False, exclude_if=_empty)
    display: str | None = Field(default=None, exclude_if=_none)
    timed_out: bool = Field(default=False, exclude_if=_empty)
    """The deadline decided it (``reviewer`` None), nobody did."""
    votes: list[Vote] = Field(default_factory=list, exclude_if=_empty)
    """Every vote that made the outcome, when the policy asked for more than one."""


class ApprovalVotedEvent(EventBase):
    """A vote was recorded on a quorum approval whose outcome is not decided yet.

    The approval needs more than one vote (a quorum); the event says who voted what, and
    what is still needed."""

    kind: Literal["approval_voted"] = "approval_voted"
    target: str
    """The tool call's UUID, or the graph approval's decision key."""
    tool_name: str | None = None
    vote: Vote
    progress: str
    """What the approval has and still needs, in words (``progress_text``)."""


class ApprovalWarnedEvent(EventBase):
    """An undecided approval's deadline is near (``warn_before_ms`` of its policy).

    The hook for reminders. Emitted once per deadline, when it happens (a resume, a decision
    or the deadline sweeper)."""

    kind: Literal["approval_warned"] = "approval_warned"
    target: str
    tool_name: str | None = None
    deadline_ms: float
    roles: list[str] = Field(default_factory=list)
    """Who may decide it now (empty: anyone)."""


class ApprovalEscalatedEvent(EventBase):
    """An undecided approval passed its deadline and its policy escalated it.

    ``roles`` may decide it as well now, until ``deadline_ms``."""

    kind: Literal["approval_escalated"] = "approval_escalated"
    target: str
    tool_name: str | None = None
    roles: list[str]
    deadline_ms: float


class ApprovalExpiredEvent(EventBase):
    """An undecided approval with a policy passed its last deadline and was resolved.

    ``resolution`` is what its policy decided in nobody's name (recorded as timed out)."""

    kind: Literal["approval_expired"] = "approval_expired"
    target: str
    tool_name: str | None = None
    resolution: Literal["reject", "approve"]
    deadline_ms: float


class NodeStartEvent(EventBase):
    """A graph node was entered."""

    kind: Literal["node_start"] = "node_start"
    graph_id: str
    node_id: str
    node_kind: str


class NodeEndEvent(EventBase):
    """A graph node finished its task."""

    kind: Literal["node_end"] = "node_end"
    graph_id: str
    node_id: str
    node_kind: str
    duration_ms: float = 0.0
    content: str | None = None


class TeamStartEvent(EventBase):
    """A team request started."""

    kind: Literal["team_start"] = "team_start"
    prompt: str | None = None


class TeamEndEvent(EventBase):
    """A team request finished."""

    kind: Literal["team_end"] = "team_end"
    content: str = ""
    is_abnormal: bool = False
    pending: bool = False
    error: str | None = None
    """As for RunEndEvent: a member's model failed for good; the team is resumable."""


Event = Annotated[
    RunStartEvent
    | RunEndEvent
    | ReasonStartEvent
    | ReasonDeltaEvent
    | ReasonEndEvent
    | ActionStartEvent
    | ToolCallStartEvent
    | ToolCallEndEvent
    | ActionEndEvent
    | HITLPendingEvent
    | HITLDecidedEvent
    | HITLExpiredEvent
    | ApprovalDecidedEvent
    | ApprovalVotedEvent
    | ApprovalWarnedEvent
    | ApprovalEscalatedEvent
    | ApprovalExpiredEvent
    | NodeStartEvent
    | NodeEndEvent
    | TeamStartEvent
    | TeamEndEvent,
    Field(discriminator="kind"),
]
"""Any event; validate JSON with :data:`event_adapter`."""

event_adapter: TypeAdapter[Event] = TypeAdapter(Event, config=ConfigDict(defer_build=True))
"""Validates and dumps any event by its ``kind``."""
