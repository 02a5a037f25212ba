"""Agents of two versions for the blue-green tests (``--agents tests.agui.versions_agents:V1``
on the old server, ``:V2`` or ``:V2_MIGRATING`` on the new one).

Each version's tool appends ``<thread> v<N> delete_user <id>`` to the file named by
AGUI_EFFECTS, so a test counts real executions, and which version ran them, across server
processes."""

from __future__ import annotations

import os
from typing import Any

from intermission import HITLInterceptor, ReActAgent, ScriptedModel, tool
from intermission.core.session import AgentSession
from intermission.messages import ChatMessage, ToolCall


def _effect(line: str) -> None:
    path = os.environ.get("AGUI_EFFECTS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def _model() -> ScriptedModel:
    def script(messages: list[ChatMessage], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        observations = [m.content for m in messages[last_user:] if m.role == "tool"]
        if observations:
            return f"Done: {'; '.join(str(o) for o in observations)}."
        return [ToolCall("delete_user", {"user_id": 1001})]

    return ScriptedModel(script)


@tool
def delete_user(user_id: int, session: AgentSession) -> str:
    """Delete a user account (irreversible)."""
    version = session.agent_version
    _effect(f"{session.session_id} v{version} delete_user {user_id}")
    return f"user {user_id} deleted by v{version}"


def _ops(version: str) -> Any:
    return (
        ReActAgent.of(_model())
        .name("ops")
        .version(version)
        .tools(delete_user)
        .interceptor(HITLInterceptor().on_tool("delete_user"))
    )


def _upcast(session: Any) -> None:
    """v1 → v2: what v2 expects in the context."""
    session.context["ops.schema"] = 2


V1 = {"ops": [_ops("1").build()]}
"""The old server: ops@1 only."""
V2 = {"ops": [_ops("2").build()]}
"""The new server: ops@2, which does not migrate ops@1's sessions."""
V2_MIGRATING = {"ops": [_ops("2").migrates_from("1", _upcast).build()]}
"""A new server whose ops@2 migrates ops@1's sessions."""
BOTH = {"ops": [_ops("1").build(), _ops("2").build()]}
"""Both versions on one server (a blue-green deploy's overlap)."""
