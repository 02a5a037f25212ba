"""The agents a Temporal worker serves in the tests (``--agents tests.temporal.agents:AGENTS``).

Their tool writes its effect to a file (``$IM_TEMPORAL_EFFECTS``), a line per effect with
the process that did it: the tests count what happened there, not what intermission says
happened. ``$IM_TEMPORAL_SLOW``: a
file whose presence makes the tool wait inside its effect (a worker is killed there).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from intermission import ApprovalPolicy, HITLInterceptor, ReActAgent, ToolCall, tool
from intermission.agents.scripted import ScriptedModel


def _effects() -> Path:
    return Path(os.environ["IM_TEMPORAL_EFFECTS"])


def _slow() -> None:
    flag = os.environ.get("IM_TEMPORAL_SLOW")
    if flag and Path(flag).exists():
        Path(flag + ".started").write_text(str(os.getpid()))
        time.sleep(3600)  # killed here


def _agent(name: str, policy: ApprovalPolicy | None = None, users: int = 1) -> ReActAgent:
    @tool
    def delete_user(user_id: int) -> str:
        """Delete a user account (irreversible)."""
        _slow()
        with _effects().open("a") as f:
            f.write(f"{name}:{user_id}:{os.getpid()}\n")
        return f"user {user_id} deleted"

    calls = [[ToolCall("delete_user", {"user_id": 7 + n})] for n in range(users)]
    model = ScriptedModel([*calls, "Done."] * 20)
    hitl = (
        HITLInterceptor().on_tool("delete_user", policy)
        if policy
        else HITLInterceptor().on_tool("delete_user")
    )
    return ReActAgent.of(model).name(name).tools(delete_user).interceptor(hitl).build()


def _ops() -> ReActAgent:
    return _agent("ops")


def _quorum() -> ReActAgent:
    return _agent("quorum", ApprovalPolicy(approvals=2, not_requester=True))


def _timed() -> ReActAgent:
    return _agent("timed", ApprovalPolicy(expires_after_ms=1500, on_expire="reject"))


def _twice() -> ReActAgent:
    return _agent("twice", users=2)


AGENTS = {"ops": _ops, "quorum": _quorum, "timed": _timed, "twice": _twice}
