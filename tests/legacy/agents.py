"""The agent the legacy fixtures were made with, in a form every release since the first
can run (tests/legacy/make_fixtures.py imports this very file under each old release's
code; tests/legacy/test_upgrade.py under the current one).

``legacy-ops`` asks a human before ``delete_user`` runs. Its model is a function of the
conversation (not a tape), so a session paused by one release is resumed by another:
a prompt with "hello" in it is answered at once (the finished session), any other prompt
calls ``delete_user`` and, once the call's observation is back, reports it.

Only names every release exports are used (``ReActAgent.of(…).name().tools()
.interceptor(HITLInterceptor().on_tool(…)).build()``, ``ScriptedModel(fn)``, ``tool``,
``ToolCall(name, args)``), and the tool is defined at module level so that its code id
(``agents:delete_user``) is the same whichever package path imports this file.
"""

from __future__ import annotations

from typing import Any

from intermission import HITLInterceptor, ReActAgent, ScriptedModel, ToolCall, tool

AGENT_NAME = "legacy-ops"
PAUSED_PROMPT = "delete user 1001"
FINISHED_PROMPT = "hello there"

RUNS: list[int] = []
"""The user ids ``delete_user`` ran for in this process (tests count the runs)."""


@tool
def delete_user(user_id: int) -> str:
    """Delete a user account (irreversible)."""
    RUNS.append(user_id)
    return f"user {user_id} deleted"


def _script(messages: list[Any], tools: Any) -> Any:
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    if "hello" in str(messages[last_user].content):
        return "Hello! Nothing to do."
    observations = [m.content for m in messages[last_user:] if m.role == "tool"]
    if observations:
        return f"Done: {observations[-1]}."
    return [ToolCall("delete_user", {"user_id": 1001})]


def build_agent() -> Any:
    """``legacy-ops``: one tool, ``delete_user``, which a human approves first."""
    return (
        ReActAgent.of(ScriptedModel(_script))
        .name(AGENT_NAME)
        .system_prompt("You manage user accounts.")
        .tools(delete_user)
        .interceptor(HITLInterceptor().on_tool("delete_user"))
        .build()
    )
