"""TeamAgent: a graph of activities, gateways and member agents (R16, R17)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..core.engine import FlowEngine, FlowInterceptor, FlowResult, check_positions
from ..core.spec import END, GraphSpec
from ..errors import GraphDefinitionError, NothingToResumeError, UsageError
from ..events import TeamEndEvent, TeamStartEvent
from ..messages import ChatMessage
from ..traces import TeamTrace
from ._base import AgentBase
from ._builder import BuilderBase
from .models import ChatModel, counted_reply
from .request import AgentResponse
from .team_member import FAILED_REPLY, PENDING_REPLY

if TYPE_CHECKING:
    from ..core.context import FlowContext
    from ..core.events_log import RunScope
    from ..core.graph import Node
    from ..core.session import AgentSession

__all__ = ["TeamAgent", "TeamAgentBuilder", "TeamResponse"]

TeamResponse = AgentResponse
"""What a team request returns (the same shape as an agent's response)."""


class TeamAgentBuilder(BuilderBase):
    """Fluent builder returned by :meth:`TeamAgent.of`."""

    def __init__(self, model: ChatModel | None) -> None:
        super().__init__("team_agent")
        self._model = model
        self._spec: GraphSpec | None = None
        self._interceptors: list[FlowInterceptor] = []

    def graph(self, spec: GraphSpec) -> TeamAgentBuilder:
        """The team graph (activities, gateways, ``spec.add_agent(member)``)."""
        if not isinstance(spec, GraphSpec):
            raise GraphDefinitionError(f"graph() takes a GraphSpec, not {type(spec).__name__}")
        self._spec = spec
        return self

    def interceptor(self, *interceptors: FlowInterceptor) -> TeamAgentBuilder:
        """Node interceptors (``on_node_start`` / ``on_node_end``)."""
        for ic in interceptors:
            if not any(callable(getattr(ic, h, None)) for h in ("on_node_start", "on_node_end")):
                raise UsageError(
                    f"a node interceptor has on_node_start/on_node_end, not {type(ic).__name__}"
                )
        self._interceptors.extend(interceptors)
        return self

    def build(self) -> TeamAgent:
        """Validate the graph and build the team."""
        if self._spec is None:
            raise GraphDefinitionError("a team needs .graph(spec) (or use TeamAgent.sequential)")
        self._spec.build()
        return TeamAgent(self)


class TeamAgent(AgentBase):
    """Runs a team graph on a session; a member that pends pauses the whole team."""

    def __init__(self, builder: TeamAgentBuilder) -> None:
        assert builder._spec is not None
        self._name = builder._name
        self.model = builder._model
        self.spec = builder._spec
        self.clock = builder._clock
        self.ids = builder._ids
        self.engine = FlowEngine(
            builder._interceptors,
            clock=builder._clock,
            ids=builder._ids,
            checkpoints="node" if builder._checkpoints == "node" else "request",
        )
        builder._versioned(self)
        if self._version is None:  # (the graph's own version, when it declares one)
            self._version = self.spec.declared_version

    def _fingerprint_key(self) -> Any:
        return self.spec.build()  # (cached until the spec is edited)

    def _fingerprint_data(self) -> Any:
        from .fingerprint import team_data

        return team_data(self.spec.build(), self.engine.interceptors)

    @staticmethod
    def of(model: ChatModel | None = None) -> TeamAgentBuilder:
        """Start building a team (the model is used by supervisor protocols)."""
        if model is not None and not callable(getattr(model, "stream", None)):
            raise UsageError(f"TeamAgent.of takes a chat model or None, not {type(model).__name__}")
        return TeamAgentBuilder(model)

    def step(self, session: AgentSession, steps: int, prompt: str | None = None) -> AgentResponse:
        """Advance the team graph at most ``steps`` nodes, then stop resumably (R10)."""
        from .. import _check
        from .._sync import run_sync

        _check.count("steps", steps, 0, 10**9)
        _check.text("prompt", prompt, optional=True)
        from ..core.events_log import RunScope

        scope = RunScope(self.ids("run"), self._name, session, self.clock)
        run = self.run(session, prompt, scope, top_level=True, steps=steps)
        from ._base import _KEEP

        return run_sync(
            self._exclusive(session, run, adopt=False, requester=None if prompt else _KEEP)
        )

    async def run(
        self,
        session: AgentSession,
        prompt: str | None,
        scope: RunScope,
        *,
        top_level: bool,
        steps: int | None = None,
    ) -> AgentResponse:
        """One team request on ``session`` (``steps``: advance at most N nodes, R10)."""
        trace = session.agent_state(self._name, TeamTrace)
        graph = self.spec.build()
        ctx = session.context
        if not prompt:  # resuming: the recorded positions must name this graph's nodes
            check_positions(graph, ctx)
        if not prompt and (trace is None or trace.original_prompt is None or trace.finished):
            raise NothingToResumeError(
                f"team {self._name!r} has nothing to resume on session {session.session_id!r}: "
                "the run already ended; send a new prompt",
                session_id=session.session_id,
            )
        trace = self._open(
            session, trace, lambda: TeamTrace(agent_name=self._name), top_level=top_level
        )
        if prompt:
            trace.reset(prompt, scope.run_id)
            ctx.trace.clear(graph.id)  # a new prompt resets the position (R16)
            if top_level:
                session.add_message(ChatMessage.user(prompt))
        saved = ctx.attrs.get("team_trace"), ctx.attrs.get("team_scope")
        ctx.attrs["team_trace"], ctx.attrs["team_scope"] = trace, scope
        ctx.attrs.pop(PENDING_REPLY, None)
        ctx.attrs.pop(FAILED_REPLY, None)
        try:
            scope.emit(TeamStartEvent, prompt=prompt)
            await scope.pace()
            if ctx.trace.is_end(graph.id):
                # stopped between its last node and its TeamEnd (a stream's reader left):
                # nothing is left to run, the end is delivered now
                result = FlowResult("done", 0, ())
            else:
                result = await self.engine.eval_async(graph, ctx, steps, scope=scope)
        finally:
            ctx.attrs["team_trace"], ctx.attrs["team_scope"] = saved
            member_reply = ctx.attrs.pop(PENDING_REPLY, None)
            failed = ctx.attrs.pop(FAILED_REPLY, None)
        pending = session.is_pending
        trace.finished = result.is_done
        content = trace.final_answer or trace.last_agent_content or ""
        abnormal = trace.abnormal
        if pending:
            content = trace.final_answer or ""
            if not content and member_reply is not None:
                # a member parked the team on a tool approval: its summary (abnormal, R19)
                # is the team's reply, not an empty string
                content, abnormal = member_reply.content, member_reply.is_abnormal
        error = None
        if failed is not None and not pending:
            content, abnormal, error = failed.content, True, failed.error
        if result.is_done and top_level and content:
            session.add_message(ChatMessage.assistant(content))
        if top_level:
            session.status = "pending" if pending else "done" if result.is_done else "paused"
            scope.emit(
                TeamEndEvent, content=content, is_abnormal=abnormal, pending=pending,
                error=None if error is None else f"{type(error).__name__}: {error}",
            )  # fmt: skip
        return AgentResponse(content, abnormal, trace, session, error)

    # -- ready-made protocols (R16) ---------------------------------------------------
    @staticmethod
    def sequential(name: str, members: Sequence[Any]) -> TeamAgent:
        """Members run one after another; each sees the prompt and the previous output."""
        spec = GraphSpec(name)
        ids = [m.name for m in members]
        spec.add_start().link_add(ids[0])
        for i, member in enumerate(members):
            node = spec.add_agent(member).link_add(ids[i + 1] if i + 1 < len(ids) else END)
            if i:
                node.prompt(_with_previous)
        spec.add_end()
        return TeamAgent.of().name(name).graph(spec).build()

    @staticmethod
    def supervisor(
        name: str, model: ChatModel, members: Sequence[Any], max_turns: int = 8
    ) -> TeamAgent:
        """A supervisor asks ``model`` which member acts next (reply: a member name, or
        ``FINISH``); members report back to it."""
        spec = GraphSpec(name)
        names = [m.name for m in members]
        spec.add_start().link_add("supervisor")
        spec.add_exclusive("supervisor").task(_supervise(model, names, max_turns))
        sup = spec.get_node("supervisor")
        for member in members:
            sup.link_add(member.name, when=_routed_to(member.name))
            spec.add_agent(member).prompt(_with_previous).link_add("supervisor")
        sup.link_add(END)
        spec.add_end()
        return TeamAgent.of(model).name(name).graph(spec).build()


def _with_previous(ctx: FlowContext) -> str:
    trace = TeamTrace.current(ctx)
    assert trace is not None
    previous = trace.last_agent_content
    base = trace.original_prompt or ""
    return f"{base}\n\nPrevious step ({trace.last_agent}): {previous}" if previous else base


def _routed_to(name: str) -> Callable[[FlowContext], bool]:
    def when(ctx: FlowContext) -> bool:
        trace = TeamTrace.current(ctx)
        return trace is not None and (trace.route or "").lower() == name.lower()

    return when


def _supervise(model: ChatModel, names: list[str], max_turns: int) -> Any:
    async def task(ctx: FlowContext, node: Node) -> None:
        trace = TeamTrace.current(ctx)
        assert trace is not None
        trace.turn += 1
        if trace.turn > max_turns:
            trace.route = "end"
            trace.set_final_answer("[Terminated] Max turns reached")
            return
        history = "\n".join(f"{r.agent}: {r.content}" for r in trace.records)
        ask = (
            f"Task: {trace.original_prompt}\nMembers: {', '.join(names)}\n"
            f"So far:\n{history or '(nothing)'}\nReply with the next member's name or FINISH."
        )
        text = ""
        async for chunk in counted_reply(model, trace, [ChatMessage.user(ask)], []):
            text += chunk.text
        choice = text.strip()
        trace.route = choice if choice.lower() in {n.lower() for n in names} else "end"

    return task
