"""Agents whose ``delete_user`` approvers are a callable policy (only alice may decide),
for the CLI's ``--agents tests.hitl._policy_agents:AGENTS``: every real run appends a line
to ``$IM_EFFECT_FILE``."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from intermission import HITLInterceptor, HITLTask, ReActAgent, ScriptedModel, ToolCall, tool
from intermission.testing.workers import append_effect


def only_alice(reviewer: str | None, task: HITLTask) -> bool:
    """Alice, or whoever ``$IM_ALLOWED`` names (a CLI test's own OS user)."""
    return reviewer == os.environ.get("IM_ALLOWED", "alice")


def ops_agent(who: Callable[[str | None, HITLTask], bool] = only_alice) -> Any:
    """Asks before ``delete_user``; ``who(reviewer, task)`` says who may decide."""

    @tool
    def delete_user(user_id: int) -> str:
        """Delete a user account (irreversible)."""
        append_effect(os.environ.get("IM_EFFECT_FILE", os.devnull))(f"delete {user_id}")
        return f"user {user_id} deleted"

    def script(messages: list[Any], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m.content for m in messages[last_user:] if m.role == "tool"]
        return f"Done: {seen[-1]}." if seen else [ToolCall("delete_user", {"user_id": 1001})]

    hitl = HITLInterceptor().on_tool("delete_user").approvers(who)
    builder = ReActAgent.of(ScriptedModel(script)).name("ops").tools(delete_user)
    return builder.interceptor(hitl).build()


AGENTS: dict[str, Any] = {"ops": ops_agent}
