"""Agent traces: the persisted run state of a ReAct agent or a team (R13, R16)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from ._model import Model
from .core.agent_state import register_state
from .decisions import EffectApproval
from .messages import ChatMessage

if TYPE_CHECKING:
    from .core.context import FlowContext

__all__ = ["BatchCall", "ReActTrace", "Route", "TeamRecord", "TeamTrace"]

Route = Literal["reason", "action", "end"]


class BatchCall(Model):
    """One call of the tool batch a ReAct agent is running, kept in its trace so that a run
    stopped in the middle (a reader that left, a cancel) resumes the same batch: calls
    that ended keep their result and do not run again (R41)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    call_uuid: str
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)
    result: str | None = None
    """Filled ahead by an interceptor (the tool does not run), or the tool's observation."""
    note: str | None = None
    error: str | None = None
    duration_ms: float | None = None
    done: bool = False
    """The call ended and its ToolCallEnd event was recorded."""
    approved: bool = False
    """A person approved this call: it runs once, through the ledger (R32, R48)."""
    approval: EffectApproval | None = Field(default=None, exclude_if=lambda v: v is None)
    """The approval that authorised it, recorded with its effect when it starts (R60)."""

    @property
    def observation(self) -> str:
        """What the model sees (the result with the reviewer's note)."""
        return (self.result or "") + (f" (Note: {self.note})" if self.note else "")


class ReActTrace(Model):
    """Where a ReAct agent stands in a session: prompt, memory, counters, route, answer."""

    model_config = ConfigDict(extra="forbid", defer_build=True, validate_assignment=False)

    kind: Literal["react"] = "react"
    agent_name: str
    run_id: str = ""
    original_prompt: str | None = None
    working_memory: list[ChatMessage] = Field(default_factory=list)
    turn: int = 0
    tool_count: int = 0
    model_replies: int = 0
    """Replies this agent had from its model on this session, over all prompts (a new
    prompt keeps it): a scripted model resumed in a new process continues from it."""
    route: Route = "reason"
    final_answer: str | None = None
    abnormal: bool = False
    last_reason: ChatMessage | None = None
    """The last assistant message with its tool calls (replayed on HITL resume)."""
    batch: list[BatchCall] | None = None
    """The tool batch in progress (None between batches)."""
    proposed: int = 0
    """Tool calls proposed to this agent on this session, over all prompts (a new prompt
    keeps it): numbers every effect id, so ids stay unique per session even when an id
    factory starts again in another process (R48)."""
    effect_ids: dict[str, str] = Field(default_factory=dict)
    """Call UUID → the effect id intermission minted when the model proposed the calls of
    ``last_reason`` (R48). Empty in snapshots written before effect ids: those calls use
    their call UUID."""
    extras: dict[str, Any] = Field(default_factory=dict)
    _session: Any = PrivateAttr(default=None)
    _scope: Any = PrivateAttr(default=None)
    _agent: Any = PrivateAttr(default=None)

    def effect_id(self, call_uuid: str) -> str:
        """The effect id of a call of ``last_reason`` (R48)."""
        return self.effect_ids.get(call_uuid, call_uuid)

    @property
    def session(self) -> Any:
        """The session of the running request (the seed's ``trace.getSession()``)."""
        return self._session

    @property
    def agent(self) -> Any:
        """The agent running this trace (None after a restore, until it runs)."""
        return self._agent

    def emit(self, cls: Any, **fields: Any) -> Any:
        """Emit an event in the running request (used by interceptors such as HITL)."""
        return self._scope.emit(cls, **fields) if self._scope is not None else None

    @model_validator(mode="after")
    def _consistent(self) -> ReActTrace:
        # (checked when a snapshot loads: an action route with nothing to run, R42)
        if self.route == "action" and (self.last_reason is None or not self.last_reason.tool_calls):
            raise ValueError("route 'action' needs last_reason with the tool calls to run")
        return self

    def set_final_answer(self, text: str, abnormal: bool = False) -> None:
        """End the run with ``text``. Unlike the Java original, abnormal is explicit."""
        self.final_answer = text
        self.abnormal = abnormal
        self.route = "end"

    def reset(self, prompt: str, run_id: str) -> None:
        """Start a new task (a non-empty prompt abandons what was pending, R3)."""
        self.run_id = run_id
        self.original_prompt = prompt
        self.working_memory = []
        self.turn = 0
        self.tool_count = 0
        self.route = "reason"
        self.final_answer = None
        self.abnormal = False
        self.last_reason = None
        self.batch = None
        self.effect_ids = {}
        self.extras = {}


class TeamRecord(Model):
    """One member step of a team run."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    agent: str
    content: str
    duration_ms: float = 0.0
    role: Literal["assistant", "user", "system"] = "assistant"


class TeamTrace(Model):
    """Where a team stands: its records, route and final answer (R16)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    kind: Literal["team"] = "team"
    agent_name: str
    run_id: str = ""
    original_prompt: str | None = None
    records: list[TeamRecord] = Field(default_factory=list)
    route: str | None = None
    final_answer: str | None = None
    abnormal: bool = False
    turn: int = 0
    model_replies: int = 0
    """Replies the supervisor's model gave on this session (see ReActTrace.model_replies)."""
    last_agent: str | None = None
    finished: bool = False
    extras: dict[str, Any] = Field(default_factory=dict)
    _session: Any = PrivateAttr(default=None)

    @property
    def session(self) -> Any:
        """The session of the running request."""
        return self._session

    @staticmethod
    def current(ctx: FlowContext) -> TeamTrace | None:
        """The trace of the team running on ``ctx`` (the seed's ``TeamTrace.getCurrent``)."""
        trace = ctx.attrs.get("team_trace")
        return trace if isinstance(trace, TeamTrace) else None

    @property
    def last_agent_content(self) -> str | None:
        """The output of the last member step."""
        return self.records[-1].content if self.records else None

    def set_final_answer(self, text: str) -> None:
        """Set the team's answer (the response content)."""
        self.final_answer = text

    def reset(self, prompt: str, run_id: str) -> None:
        """Start a new team task."""
        self.run_id = run_id
        self.original_prompt = prompt
        self.records = []
        self.route = None
        self.final_answer = None
        self.abnormal = False
        self.turn = 0
        self.last_agent = None
        self.finished = False
        self.extras = {}


register_state("react", ReActTrace)
register_state("team", TeamTrace)
