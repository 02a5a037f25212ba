"""Agents for the issue-40 hostile tests (``--agents tests.hostile._i40_agents:V2``):
``ops`` v1 whose model fails once its tool ran (the session ends resumable, not pending),
and ``ops`` v2. Every tool run is appended to ``$IM_EFFECT_FILE``."""

from __future__ import annotations

import json
import os
from typing import Any

from intermission import ReActAgent, ScriptedModel, ToolCall, tool


def _ran(version: str) -> None:
    path = os.environ.get("IM_EFFECT_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(version) + "\n")


def _script(messages: list[Any], tools: Any) -> Any:
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    if any(m.role == "tool" for m in messages[last_user:]):
        if os.environ.get("IM_MODEL_DOWN"):
            raise RuntimeError("the model is down")
        return "Done."
    return [ToolCall("probe", {})]


def ops(version: str) -> Any:
    """``ops`` at ``version``: one tool, ``probe``, no approval."""

    @tool
    def probe() -> str:
        """Look at the service."""
        _ran(version)
        return "ok"

    return ReActAgent.of(ScriptedModel(_script)).name("ops").version(version).tools(probe).build()


V1: dict[str, Any] = {"ops": [lambda: ops("1")]}
V2: dict[str, Any] = {"ops": [lambda: ops("2")]}


def legacy_v1() -> Any:
    """tests/legacy/agents.py's ``legacy-ops`` itself (unlabelled; the fixtures' agent)."""
    from tests.legacy.agents import build_agent

    return build_agent()


def legacy_v2() -> Any:
    """``legacy-ops`` version 2: ``delete_user`` gained a parameter (other code, no
    migration from the legacy version)."""
    from intermission import HITLInterceptor

    @tool
    def delete_user(user_id: int, hard: bool = True) -> str:
        """Delete a user account (irreversible); ``hard`` also purges backups."""
        _ran(f"v2 {user_id} hard={hard}")
        return f"user {user_id} deleted by v2"

    from tests.legacy.agents import AGENT_NAME
    from tests.legacy.agents import _script as legacy_script

    return (
        ReActAgent.of(ScriptedModel(legacy_script)).name(AGENT_NAME).version("2")
        .system_prompt("You manage user accounts.").tools(delete_user)
        .interceptor(HITLInterceptor().on_tool("delete_user")).build()
    )  # fmt: skip


LEGACY_BOTH: dict[str, Any] = {"legacy-ops": [legacy_v1, legacy_v2]}
"""The legacy agent as it was (unlabelled), and a labelled v2 beside it."""
