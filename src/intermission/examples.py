"""Runnable offline examples (ScriptedModel): the ops agent and the seed's change graph.

Both scripts are functions of the conversation, not tapes, so a session saved in one
process resumes correctly in another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .agents import ReActAgent, ScriptedModel, TeamAgent, tool
from .core import END, FlowContext, GraphSpec, Node
from .core.session import AgentSession
from .errors import UsageError
from .hitl import HITLInterceptor, expire_approval, open_approval
from .messages import ChatMessage, ToolCall
from .policies import ApprovalPolicy
from .traces import TeamTrace

__all__ = [
    "AGENTS",
    "APPLIED",
    "build_change_graph",
    "build_ops_agent",
    "build_served_change_graph",
    "change_approval_task",
]

APPLIED: list[str] = []
"""Changes applied by the default effect of the change graph (for demos and tests)."""


def _after_tool(
    answer: Callable[[str], str], call: ToolCall | Callable[[str], ToolCall]
) -> ScriptedModel:
    """A model that makes ``call`` (or the call made of the prompt), then answers with
    what the tool returned."""

    def script(messages: list[ChatMessage], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        observations = [m.content for m in messages[last_user:] if m.role == "tool"]
        if observations:
            return answer(observations[-1])
        return [call if isinstance(call, ToolCall) else call(messages[last_user].content)]

    return ScriptedModel(script)


_APPLY = "Apply the approved change: "
"""How the executor of a served change graph is told which change it applies (its thread's)."""


def _apply_this_sessions_change(ctx: FlowContext) -> str:
    assert ctx.session is not None
    return _APPLY + ctx.session.session_id


def _apply_named_change(prompt: str) -> ToolCall:
    return ToolCall("apply_change", {"change_id": prompt.removeprefix(_APPLY)})


def build_ops_agent(user_id: int = 1001) -> ReActAgent:
    """A ReAct agent that asks a human before ``delete_user`` runs."""

    @tool
    def delete_user(user_id: int) -> str:
        """Delete a user account (irreversible)."""
        return f"user {user_id} deleted"

    model = _after_tool(lambda obs: f"Done: {obs}.", ToolCall("delete_user", {"user_id": user_id}))
    return (
        ReActAgent.of(model)
        .name("ops")
        .system_prompt("You manage user accounts.")
        .tools(delete_user)
        .interceptor(HITLInterceptor().on_tool("delete_user"))
        .build()
    )


def change_approval_task(ctx: FlowContext, node: Node) -> None:
    """The seed's approval node: check the decision; if none, record the request and pend.
    A deadline (``approval.deadline``, epoch ms) that passed with no decision recorded
    before it (a late ``approval.decision`` included) is a rejection by ``system:deadline``."""
    assert ctx.session is not None
    open_approval(ctx.session)  # a decision of an earlier request is not this one's
    if not expire_approval(ctx.session) and ctx.get("approval.decision") is None:
        ctx.put("approval.request", ctx.get("change.proposal"))
        ctx.session.pending(True, "Change plan awaits human review")


def _approval_with_policy(policy: ApprovalPolicy) -> Callable[[FlowContext, Node], None]:
    def task(ctx: FlowContext, node: Node) -> None:
        assert ctx.session is not None
        open_approval(ctx, policy=policy)  # who may decide, how many, by when
        change_approval_task(ctx, node)

    return task


def _approval_with_deadline(deadline_ms: float) -> Callable[[FlowContext, Node], None]:
    def task(ctx: FlowContext, node: Node) -> None:
        assert ctx.session is not None
        open_approval(ctx.session)  # (an earlier request's deadline is not this one's)
        if ctx.get("approval.deadline") is None:  # counted from when review was first asked
            ctx.put("approval.deadline", ctx.session.clock.now_ms() + deadline_ms)
        change_approval_task(ctx, node)

    return task


def _reject_finish(ctx: FlowContext, node: Node) -> None:
    result = f"Change rejected: {ctx.get('approval.reason') or 'no reason given'}"
    ctx.put("change.result", result)
    trace = TeamTrace.current(ctx)
    if trace is not None:
        trace.set_final_answer(result)


def _default_effect(change_id: str) -> str:
    APPLIED.append(change_id)
    return f"applied {change_id}"


def build_change_graph(
    effect: Callable[[str], str] = _default_effect,
    change_id: str | None = "change-001",
    *,
    checkpoints: str = "request",
    deadline_ms: float | None = None,
    policy: ApprovalPolicy | None = None,
) -> TeamAgent:
    """``proposal_agent → approval → approval_route → executor_agent | reject_finish``;
    ``change_id``: the change it applies; None: each session applies its own, named by
    the session's id (a served thread's id: see :func:`build_served_change_graph`);
    ``checkpoints="node"`` records a checkpoint at every node as well (R43);
    ``deadline_ms``: the review must be decided within that many ms of being asked;
    ``policy``: who may decide the review, how many must approve, what its deadline does."""
    proposal_agent = (
        ReActAgent.of(
            ScriptedModel(
                ["Upgrade order-service to v2.3 and run database migration 0042 (add index)."]
                * 1000
            )
        )
        .name("proposal_agent")
        .output_key("change.proposal")
        .build()
    )

    @tool
    def apply_change(change_id: str, session: AgentSession) -> str:
        """Apply an approved change exactly once (idempotency key ``<id>/execute``)."""
        result: str = session.once(f"{change_id}/execute", lambda: effect(change_id))
        session.context.put("change.result", result)
        return result

    executor_agent = (
        ReActAgent.of(
            _after_tool(
                lambda obs: f"Change executed: {obs}",
                _apply_named_change
                if change_id is None
                else ToolCall("apply_change", {"change_id": change_id}),
            )
        )
        .name("executor_agent")
        .tools(apply_change)
        .build()
    )
    spec = GraphSpec("change")
    spec.add_start().link_add("proposal_agent")
    spec.add_agent(proposal_agent).link_add("approval")
    approval = change_approval_task if deadline_ms is None else _approval_with_deadline(deadline_ms)
    if policy is not None:
        if deadline_ms is not None:
            raise UsageError("give the deadline in the policy (expires_after_ms), not both")
        approval = _approval_with_policy(policy)
    spec.add_activity("approval").title("Human review").task(approval).link_add(
        "approval_route"
    )
    spec.add_exclusive("approval_route").link_add(
        "executor_agent",
        when=lambda ctx: ctx.get("approval.decision") == "APPROVE",
        title="APPROVE",
    ).link_add("reject_finish", title="otherwise")
    executor = spec.add_agent(executor_agent)
    if change_id is None:  # (a prompt function is no part of the agent's fingerprint)
        executor.prompt(_apply_this_sessions_change)
    executor.link_add(END)
    spec.add_activity("reject_finish").task(_reject_finish).link_add(END)
    spec.add_end()
    return TeamAgent.of().name("change").graph(spec).checkpoints(checkpoints).build()


def build_served_change_graph() -> TeamAgent:
    """The change graph as ``serve`` and the CLI run it: each session (an AG-UI thread)
    applies its own change, named by its id — thread ``change-042`` applies
    ``change-042`` (idempotency key ``change-042/execute``)."""
    return build_change_graph(change_id=None)


AGENTS: dict[str, Callable[[], Any]] = {
    "change": build_served_change_graph,
    "ops": build_ops_agent,
}
"""The examples by agent name: what ``python -m intermission`` runs without ``--agents`` —
for the ``demo`` command's sessions only (a session another agent made, even under one of
these names, is refused: see :mod:`intermission._cli_agents`)."""
