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
