"""How any agent runs as a node of a team graph (R16, R17)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.agent_state import state_data
from ..errors import SessionStateError
from ..traces import TeamRecord, TeamTrace

if TYPE_CHECKING:
    from ..core.context import FlowContext
    from ..core.graph import Node

__all__ = ["FAILED_REPLY", "PENDING_REPLY", "run_member"]


PENDING_REPLY = "team_pending_reply"
"""Context attribute: the reply of the member that parked the running team."""
FAILED_REPLY = "team_failed_reply"
"""Context attribute: the reply of a member whose model failed for good (its branch
stopped where it stands; the team's request ends abnormally and resumably)."""


async def run_member(agent: Any, ctx: FlowContext, node: Node) -> None:
    """Run ``agent`` for one member step and record its output in the team trace.

    A member paused inside this team run (HITL) is resumed with an empty prompt, so it
    replays its pending tool calls with the same call UUIDs (R17) instead of re-reasoning.
    """
    session = ctx.session
    team: TeamTrace | None = ctx.attrs.get("team_trace")
    scope = ctx.attrs.get("team_scope")
    if session is None or team is None or scope is None:
        raise SessionStateError(
            f"member {agent.name!r} runs inside a TeamAgent (node {node.id!r}); "
            "call the team, not FlowEngine, for graphs with agent nodes"
        )
    mine = state_data(session.traces[agent.name]) if agent.name in session.traces else None
    resuming = (
        mine is not None
        and (mine.get("extras") or {}).get("team_run") == team.run_id
        and mine.get("route", "end") != "end"
        and not mine.get("finished", False)
    )
    prompt = None
    if not resuming:
        prompt = node.prompt_fn(ctx) if node.prompt_fn else team.original_prompt
    started = scope.clock.now_ms()
    child = scope.child(agent.ids("run"), agent.name)
    response = await agent.run(session, prompt, child, top_level=False)
    response.trace.extras["team_run"] = team.run_id
    team.last_agent = agent.name
    if session.is_pending:
        # the member parked the team; the node runs again on resume. Its reply (a HITL
        # summary) is the team's reply meanwhile, as in the original (see TeamAgent.run)
        if response.content:
            ctx.attrs[PENDING_REPLY] = response
        return
    if getattr(response, "error", None) is not None:
        # the member's model failed for good: this branch stops at the member (which is
        # asked again when the team resumes), the team's request ends abnormally
        ctx.attrs.setdefault(FAILED_REPLY, response)
        ctx.interrupt()
        return
    content = response.content or f"Agent [{agent.name}] processed but returned no textual content."
    team.records.append(
        TeamRecord(agent=agent.name, content=content, duration_ms=scope.clock.now_ms() - started)
    )
