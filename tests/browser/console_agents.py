"""The agents of the console's browser tests: those of tests/agui/agents.py plus a change
two people other than its requester must approve (``--agents
tests.browser.console_agents:AGENTS``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.agui.agents import AGENTS as BASE
from tests.agui.agents import _script, delete_user

from intermission import ApprovalPolicy, HITLInterceptor, ReActAgent
from intermission.messages import ToolCall


def review() -> ReActAgent:
    """``delete_user`` approved by two principals, neither of them who asked for it."""
    policy = ApprovalPolicy(approvals=2, not_requester=True)
    return (
        ReActAgent.of(_script([ToolCall("delete_user", {"user_id": 1001})]))
        .name("review")
        .tools(delete_user)
        .interceptor(HITLInterceptor().on_tool("delete_user", policy=policy))
        .build()
    )


AGENTS: dict[str, Callable[[], Any]] = {**BASE, "review": review}
