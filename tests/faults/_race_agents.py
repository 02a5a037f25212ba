"""Agents for the deadline and reviewer-race tests, by name, for the CLI's ``--agents
tests.faults._race_agents:AGENTS``: effects append one line to ``$IM_EFFECT_FILE`` (so a
test counts real runs across processes, whatever any ledger says)."""

from __future__ import annotations

import os
from typing import Any

from intermission import HITLInterceptor, ReActAgent, ScriptedModel, ToolCall, tool
from intermission.examples import build_change_graph
from intermission.testing.workers import append_effect

DEADLINE_MS = 200.0


def _record(what: str) -> None:
    path = os.environ.get("IM_EFFECT_FILE")
    if path:
        append_effect(path)(what)


def ops_agent(clock: Any = None) -> Any:
    """Asks before ``delete_user``, with a 200 ms deadline (on_expire="reject", the
    default); ``clock`` stamps its events (the session's clock stamps the deadline)."""

    @tool
    def delete_user(user_id: int) -> str:
        """Delete a user account (irreversible)."""
        _record(f"delete {user_id}")
        return f"user {user_id} deleted"

    def script(messages: list[Any], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m.content for m in messages[last_user:] if m.role == "tool"]
        return f"Done: {seen[-1]}." if seen else [ToolCall("delete_user", {"user_id": 1001})]

    builder = (
        ReActAgent.of(ScriptedModel(script))
        .name("ops")
        .tools(delete_user)
        .interceptor(HITLInterceptor().on_tool("delete_user", deadline_ms=DEADLINE_MS))
    )
    return (builder.clock(clock) if clock is not None else builder).build()


def change_graph() -> Any:
    """The change-approval graph whose effect leaves a line in ``$IM_EFFECT_FILE``."""
    path = os.environ.get("IM_EFFECT_FILE", os.devnull)
    return build_change_graph(append_effect(path))


def change_graph_with_deadline() -> Any:
    """:func:`change_graph` whose review must be decided within DEADLINE_MS of being
    asked (another agent: its approval step differs, so it has its own fingerprint)."""
    path = os.environ.get("IM_EFFECT_FILE", os.devnull)
    return build_change_graph(append_effect(path), deadline_ms=DEADLINE_MS)


AGENTS: dict[str, Any] = {"ops": ops_agent, "change": change_graph}
DEADLINE_AGENTS: dict[str, Any] = {"ops": ops_agent, "change": change_graph_with_deadline}
