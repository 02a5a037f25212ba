"""The agent the AG-UI latency bench serves (``--agents _agui_agents:AGENTS``): one tool
call that needs approval and does nothing else, so what is timed is intermission."""

from __future__ import annotations

from typing import Any

from intermission import HITLInterceptor, ReActAgent, ScriptedModel, tool
from intermission.messages import ChatMessage, ToolCall


@tool
def apply(change: str) -> str:
    """Apply a change (a no-op here)."""
    return f"applied {change}"


def _reply(messages: list[ChatMessage], tools: Any) -> Any:
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    if any(m.role == "tool" for m in messages[last_user:]):
        return "Applied."
    return [ToolCall("apply", {"change": "c-1"})]


def bench() -> ReActAgent:
    """One approval, then the tool, then a one-line answer."""
    return (
        ReActAgent.of(ScriptedModel(_reply))
        .name("bench")
        .tools(apply)
        .interceptor(HITLInterceptor().on_tool("apply"))
        .build()
    )


AGENTS = {"bench": bench()}
