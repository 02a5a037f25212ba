"""Agents the AG-UI tests serve (``--agents tests.agui.agents:AGENTS``).

Every tool that changes the world appends a line to the file named by AGUI_EFFECTS, so a
test counts real executions across server processes."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from intermission import (
    ApprovalPolicy,
    HITLInterceptor,
    ModelChunk,
    ReActAgent,
    ScriptedModel,
    tool,
)
from intermission.core.session import AgentSession
from intermission.examples import build_change_graph
from intermission.messages import ChatMessage, ToolCall


def _effect(line: str) -> None:
    path = os.environ.get("AGUI_EFFECTS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def _script(calls: list[ToolCall]) -> ScriptedModel:
    def script(messages: list[ChatMessage], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        observations = [m.content for m in messages[last_user:] if m.role == "tool"]
        return f"Done: {'; '.join(observations)}." if observations else list(calls)

    return ScriptedModel(script)


@tool
def delete_user(user_id: int, session: AgentSession) -> str:
    """Delete a user account (irreversible)."""
    _effect(f"{session.session_id} delete_user {user_id}")
    return f"user {user_id} deleted"


@tool
def refund(order: str, amount: int, session: AgentSession) -> str:
    """Refund an order."""
    _effect(f"{session.session_id} refund {order} {amount}")
    return f"refunded {amount} on {order}"


def ops() -> ReActAgent:
    """One tool call that needs approval."""
    return (
        ReActAgent.of(_script([ToolCall("delete_user", {"user_id": 1001})]))
        .name("ops")
        .tools(delete_user)
        .interceptor(HITLInterceptor().on_tool("delete_user"))
        .build()
    )


def pair() -> ReActAgent:
    """Two tool calls in one batch: two open interrupts."""
    calls = [
        ToolCall("delete_user", {"user_id": 7}),
        ToolCall("refund", {"order": "A-1", "amount": 5}),
    ]
    return (
        ReActAgent.of(_script(calls))
        .name("pair")
        .tools(delete_user, refund)
        .interceptor(HITLInterceptor().on_tool("delete_user").on_tool("refund"))
        .build()
    )


HASTY_MS = 300
"""How long ``hasty``'s approval stays open: far longer than its run takes to pause, under
any load (a millisecond was not: the first task a process builds can take longer, and
then the run ended rejected instead of pausing), short enough to wait out."""


def hasty() -> ReActAgent:
    """A tool call whose approval expires soon (HASTY_MS) after it is asked for."""
    return (
        ReActAgent.of(_script([ToolCall("delete_user", {"user_id": 3})]))
        .name("hasty")
        .tools(delete_user)
        .interceptor(HITLInterceptor().on_tool("delete_user", deadline_ms=HASTY_MS))
        .build()
    )


def outlast_hasty() -> None:
    """Wait until an approval ``hasty`` asked for before this call has expired (its
    deadline is HASTY_MS after it was asked for, by a clock of this machine: the test
    servers' stores run here)."""
    time.sleep(HASTY_MS / 1000 + 0.05)


@tool
def post_note(text: str, session: AgentSession) -> str:
    """Post a note for everyone to read."""
    _effect(f"{session.session_id} post_note")
    return "posted"


def note() -> ReActAgent:
    """A tool call whose argument is the user's text (whatever it holds)."""

    def script(messages: list[ChatMessage], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        if any(m.role == "tool" for m in messages[last_user:]):
            return "Posted."
        return [ToolCall("post_note", {"text": messages[last_user].content})]

    return (
        ReActAgent.of(ScriptedModel(script))
        .name("note")
        .tools(post_note)
        .interceptor(HITLInterceptor().on_tool("post_note"))
        .build()
    )


def change() -> Any:
    """The change graph: a confirmation at its approval node."""
    return build_change_graph(
        effect=lambda cid: (_effect(f"graph apply {cid}"), f"applied {cid}")[1]
    )


@tool
def store_value(value: Any, session: AgentSession) -> str:
    """Store a JSON value (``true`` and ``1`` are different values)."""
    _effect(f"{session.session_id} store_value {value!r}")
    return f"stored {value!r}"


def value() -> ReActAgent:
    """One approval of a tool whose argument is any JSON value."""
    return (
        ReActAgent.of(_script([ToolCall("store_value", {"value": 0})]))
        .name("value")
        .tools(store_value)
        .interceptor(HITLInterceptor().on_tool("store_value"))
        .build()
    )


def twice() -> ReActAgent:
    """Two approvals one after the other: delete 1, then (after its result) delete 2."""

    def script(messages: list[ChatMessage], tools: Any) -> Any:
        last = max(i for i, m in enumerate(messages) if m.role == "user")
        n = sum(1 for m in messages[last:] if m.role == "tool")
        if n < 2:
            return [ToolCall("delete_user", {"user_id": n + 1})]
        return "Both done."

    return (
        ReActAgent.of(ScriptedModel(script))
        .name("twice")
        .tools(delete_user)
        .interceptor(HITLInterceptor().on_tool("delete_user"))
        .build()
    )


GATE = threading.Event()
"""``gated``'s tool waits for this (in-process tests open it)."""
ENTERED = threading.Semaphore(0)
"""Released once each time ``gated``'s tool starts waiting."""


@tool
def wait_at_gate(session: AgentSession) -> str:
    """Wait until the test opens the gate."""
    ENTERED.release()
    GATE.wait(timeout=600)
    return "through"


def gated() -> ReActAgent:
    """An approved tool that takes as long as the test wants (GATE)."""
    return (
        ReActAgent.of(_script([ToolCall("wait_at_gate", {})]))
        .name("gated")
        .tools(wait_at_gate)
        .interceptor(HITLInterceptor().on_tool("wait_at_gate"))
        .build()
    )


def _lazy(name: str) -> Callable[[], ReActAgent]:
    """An agent like ``ops`` whose factory takes 0.3 s (building a real agent takes time:
    two runs that start together reach the store together)."""

    def make() -> ReActAgent:
        time.sleep(0.3)
        return (
            ReActAgent.of(_script([ToolCall("delete_user", {"user_id": 5})]))
            .name(name)
            .tools(delete_user)
            .interceptor(HITLInterceptor().on_tool("delete_user"))
            .build()
        )

    return make


def _marker(kind: str, session: AgentSession) -> Path:
    """A file next to AGUI_EFFECTS for one thread (``entered-``/``gate-<thread>``)."""
    return Path(os.environ["AGUI_EFFECTS"]).with_name(f"{kind}-{session.session_id}")


@tool
def slow_step(session: AgentSession) -> str:
    """A slow approved step: runs until the test creates its gate file, then records."""
    _marker("entered", session).touch()
    gate = _marker("gate", session)
    until = time.monotonic() + 300
    while not gate.exists() and time.monotonic() < until:
        time.sleep(0.02)
    _effect(f"{session.session_id} slow_step")
    return "slow step done"


def slow() -> ReActAgent:
    """An approved tool that takes as long as the test wants, across processes (its gate
    is a file)."""
    return (
        ReActAgent.of(_script([ToolCall("slow_step", {})]))
        .name("slow")
        .tools(slow_step)
        .interceptor(HITLInterceptor().on_tool("slow_step"))
        .build()
    )


def quorum() -> ReActAgent:
    """One tool call two different principals must approve (``delete_user``)."""
    policy = ApprovalPolicy(approvals=2)
    return (
        ReActAgent.of(_script([ToolCall("delete_user", {"user_id": 1001})]))
        .name("quorum")
        .tools(delete_user)
        .interceptor(HITLInterceptor().on_tool("delete_user", policy=policy))
        .build()
    )


FLAKY_CALLS: dict[str, int] = {}
"""Model calls of ``flaky``, by the text of the user's message."""


class _Flaky:
    """A model whose first two calls for a message fail with a connection error."""

    async def stream(self, messages: list[ChatMessage], tools: Any) -> Any:
        text = [m.content for m in messages if m.role == "user"][-1] or ""
        FLAKY_CALLS[text] = FLAKY_CALLS.get(text, 0) + 1
        if FLAKY_CALLS[text] <= 2:
            raise ConnectionError("the model server refused the connection")
        yield ModelChunk(text=f"answer to {text}")


def flaky() -> ReActAgent:
    """Its model fails for good on a message's first request (one retry), then answers."""
    return ReActAgent.of(_Flaky()).name("flaky").retry_config(max_retries=1, delay_ms=0).build()


AGENTS: dict[str, Callable[[], Any]] = {
    "ops": ops, "pair": pair, "hasty": hasty, "note": note, "change": change,
    "value": value, "twice": twice, "gated": gated, "slow": slow, "quorum": quorum,
    "flaky": flaky,
}  # fmt: skip
LAZY: dict[str, Callable[[], Any]] = {**AGENTS, "lazy": _lazy("lazy"), "lax": _lazy("lax")}
"""The agents plus two whose factories are slow (apart: agui_app calls each factory once)."""
