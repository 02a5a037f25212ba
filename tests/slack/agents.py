"""Agents the Slack tests serve: one tool call each, under different policies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.agui.agents import _effect, _script

from intermission import ApprovalPolicy, HITLInterceptor, ReActAgent, ScriptedModel, tool
from intermission.core.session import AgentSession
from intermission.messages import ChatMessage, ToolCall


@tool
def delete_user(user_id: int, session: AgentSession) -> str:
    """Delete a user account (irreversible)."""
    _effect(f"{session.session_id} delete_user {user_id}")
    return f"user {user_id} deleted"


@tool
def post_note(text: str, session: AgentSession) -> str:
    """Post a note."""
    _effect(f"{session.session_id} post_note {len(text)}")
    return "posted"


def _agent(name: str, call: ToolCall, policy: ApprovalPolicy) -> Callable[[], Any]:
    def make() -> Any:
        return (
            ReActAgent.of(_script([call])).name(name).tools(delete_user, post_note)
            .interceptor(HITLInterceptor().on_tool(call.name, policy=policy))
            .build()
        )  # fmt: skip

    return make


@tool
def lookup_user(user_id: int, session: AgentSession) -> str:
    """Look a user up (harmless, asked about all the same)."""
    _effect(f"{session.session_id} lookup_user {user_id}")
    return f"user {user_id} found"


def _numbered() -> Any:
    """A model that numbers its calls per reply, as some providers do: every request's call
    is ``call_0``, on the user its prompt names: ``delete 2002`` deletes, ``look 7`` looks
    up."""

    def script(messages: list[ChatMessage], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        if any(m.role == "tool" for m in messages[last_user:]):
            return "Done."
        verb, user_id = str(messages[last_user].content).split()
        name = "lookup_user" if verb == "look" else "delete_user"
        return [ToolCall(name, {"user_id": int(user_id)}, "call_0")]

    return (
        ReActAgent.of(ScriptedModel(script)).name("numbered").tools(delete_user, lookup_user)
        .interceptor(HITLInterceptor().on_tool("delete_user", policy=ApprovalPolicy())
                     .on_tool("lookup_user", policy=ApprovalPolicy()))
        .build()
    )  # fmt: skip


DELETE = ToolCall("delete_user", {"user_id": 1001})
LONG = "x" * 5000
"""A note longer than a Slack section can show whole."""

AGENTS: dict[str, Callable[[], Any]] = {
    # a rejection needs a reason (the default): Reject opens the console card
    "ops": _agent("ops", DELETE, ApprovalPolicy()),
    # no reason needed: Reject works from Slack
    "lax": _agent("lax", DELETE, ApprovalPolicy(reason_to_reject=False)),
    # two people, not the one who asked
    "quorum": _agent("quorum", DELETE, ApprovalPolicy(approvals=2, not_requester=True)),
    "long": _agent("long", ToolCall("post_note", {"text": LONG}), ApprovalPolicy()),
    "brief": _agent("brief", DELETE, ApprovalPolicy(expires_after_ms=1)),
    # two people within a minute (the deadline sweeper expires it)
    "numbered": _numbered,
    "quorum_minute": _agent("quorum_minute", DELETE,
                            ApprovalPolicy(approvals=2, not_requester=True,
                                           expires_after_ms=60_000)),
}
