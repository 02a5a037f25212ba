"""PydanticAIModel (R46) with pydantic-ai's own offline models: FunctionModel (a function
decides each reply, streamed or whole) and TestModel (calls every tool, then answers),
through call, call_async and stream, with HITL and a resume in another process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module

from intermission import (
    HITL,
    HITLInterceptor,
    InMemoryAgentSession,
    PydanticAIModel,
    ReActAgent,
    UsageError,
    tool,
)
from intermission.stores import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _pydantic_ai_installed() -> None:
    need_module("pydantic_ai", "the pydantic-ai extra (pip install intermission[pydantic-ai])")


MOVES: list[tuple[str, int]] = []


@tool
def move_money(account: str, amount: int) -> str:
    """Move money to an account."""
    MOVES.append((account, amount))
    return f"moved {amount} to {account}"


@tool
def balance(account: str) -> str:
    """Read an account's balance."""
    return f"{account}: 100"


SEEN: list[list[str]] = []


def banker(messages: list[Any], info: Any) -> Any:
    """A FunctionModel: two calls in one turn, then an answer that quotes what the tools
    returned (so the tool results must reach the model, under their call ids)."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart

    SEEN.append([type(p).__name__ for m in messages for p in m.parts])
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(
            parts=[
                TextPart("Checking, then moving."),
                ToolCallPart("balance", {"account": "acme"}, tool_call_id="t-1"),
                ToolCallPart("move_money", {"account": "acme", "amount": 5}, tool_call_id="t-2"),
            ]
        )
    said = "; ".join(f"{p.tool_call_id}={p.content}" for p in returns)
    return ModelResponse(parts=[TextPart(f"Done: {said}")])


async def streaming_banker(messages: list[Any], info: Any) -> Any:
    """The same, streamed: text in pieces, tool calls as deltas."""
    from pydantic_ai.messages import ToolReturnPart
    from pydantic_ai.models.function import DeltaToolCall

    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        yield "Checking, "
        yield "then moving."
        yield {0: DeltaToolCall("balance", '{"account": "acme"}', tool_call_id="s-1")}
        yield {1: DeltaToolCall("move_money", '{"account": "acme", ', tool_call_id="s-2")}
        yield {1: DeltaToolCall(json_args='"amount": 5}')}
        return
    yield "Done: "
    yield "; ".join(f"{p.tool_call_id}={p.content}" for p in returns)


def agent_on(model: Any, name: str = "banker") -> ReActAgent:
    return (
        ReActAgent.of(model)
        .name(name)
        .system_prompt("You move money carefully.")
        .tools(balance, move_money)
        .interceptor(HITLInterceptor().on_tool("move_money"))
        .build()
    )


def function_model(streamed: bool) -> Any:
    from pydantic_ai.models.function import FunctionModel

    if streamed:
        return PydanticAIModel(FunctionModel(stream_function=streaming_banker))
    return PydanticAIModel(FunctionModel(banker), stream=False)


@pytest.mark.parametrize("streamed", [True, False])
@pytest.mark.parametrize("how", ["call", "call_async", "stream"])
def test_function_model_through_hitl_with_every_way_of_running(streamed: bool, how: str) -> None:
    MOVES.clear()
    agent = agent_on(function_model(streamed))
    s = InMemoryAgentSession.of(f"pai-{how}-{streamed}")

    def run(prompt: str | None) -> tuple[str, list[str]]:
        request = agent.prompt(prompt) if prompt else agent.prompt()
        if how == "call":
            r = request.session(s).call()
            return r.content, []
        if how == "call_async":
            return asyncio.run(request.session(s).call_async()).content, []
        kinds = [e.kind for e in request.session(s).stream()]
        return s.events[-1].content, kinds  # type: ignore[union-attr]

    _, first = run("move 5 to acme")
    assert s.is_pending and MOVES == []
    task, = HITL.pending_tasks(s)
    assert (task.tool_name, task.args) == ("move_money", {"account": "acme", "amount": 5})
    assert task.call_uuid == ("s-2" if streamed else "t-2")  # the provider's call id is kept
    if how == "stream":
        structural = [k for k in first if k != "reason_delta"]
        assert structural[-3:] == ["reason_end", "hitl_pending", "run_end"]  # R25
        deltas = [e for e in s.events if e.kind == "reason_delta" and not e.final]
        assert len(deltas) == (2 if streamed else 1)  # streamed text arrives in pieces
    HITL.approve_all(s, reviewer="lead")
    answer, _ = run(None)
    assert MOVES == [("acme", 5)]
    ids = ("s-1", "s-2") if streamed else ("t-1", "t-2")
    assert answer == f"Done: {ids[0]}=acme: 100; {ids[1]}=moved 5 to acme"
    reason_end = next(e for e in s.events if e.kind == "reason_end")
    assert reason_end.content == "Checking, then moving."
    assert [c.name for c in reason_end.tool_calls] == ["balance", "move_money"]


def test_the_conversation_reaches_pydantic_ai_as_requests_and_responses() -> None:
    SEEN.clear()
    MOVES.clear()
    agent = agent_on(function_model(False), "banker2")
    s = InMemoryAgentSession.of("pai-msgs")
    agent.prompt("move 5 to acme").session(s).call()
    HITL.approve_all(s)
    agent.prompt().session(s).call()
    assert SEEN[0] == ["SystemPromptPart", "UserPromptPart"]
    assert SEEN[1] == [
        "SystemPromptPart", "UserPromptPart", "TextPart", "ToolCallPart", "ToolCallPart",
        "ToolReturnPart", "ToolReturnPart",
    ]  # fmt: skip


def test_test_model_calls_every_tool_and_repeated_ids_get_fresh_ones() -> None:
    from pydantic_ai.models.test import TestModel

    MOVES.clear()
    agent = agent_on(PydanticAIModel(TestModel()), "tester")
    s = InMemoryAgentSession.of("pai-test")
    agent.prompt("do it").session(s).call()
    tasks = HITL.pending_tasks(s)
    assert [t.tool_name for t in tasks] == ["move_money"]
    HITL.approve_all(s)
    r = agent.prompt().session(s).call()
    assert not r.is_abnormal and len(MOVES) == 1
    ends = [e for e in s.events if e.kind == "tool_call_end"]
    assert {e.tool_name for e in ends} == {"balance", "move_money"}


def test_a_call_id_the_conversation_already_has_is_replaced_by_a_fresh_one() -> None:
    """Approvals are keyed by call id: a model repeating an id (TestModel's are fixed per
    tool name) must not make two calls one."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    def repeater(messages: list[Any], info: Any) -> Any:
        done = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if len(done) < 3:
            return ModelResponse(parts=[ToolCallPart("balance", {"account": "a"}, "fixed")])
        return ModelResponse(parts=[TextPart("three looks")])

    agent = agent_on(PydanticAIModel(FunctionModel(repeater), stream=False), "repeater")
    s = InMemoryAgentSession.of("pai-ids")
    assert agent.prompt("look thrice").session(s).call().content == "three looks"
    ids = [c.id for e in s.events if e.kind == "reason_end" for c in e.tool_calls]
    assert len(ids) == len(set(ids)) == 3 and ids[0] == "fixed"


def test_provider_errors_are_model_errors_and_end_the_run_abnormally() -> None:
    from pydantic_ai.models.function import FunctionModel

    def broken(messages: list[Any], info: Any) -> Any:
        raise RuntimeError("HTTP 503 from the provider")

    agent = agent_on(PydanticAIModel(FunctionModel(broken), stream=False), "broken")
    s = InMemoryAgentSession.of("pai-err")
    r = agent.prompt("hi").session(s).call()
    assert r.is_abnormal and r.content.startswith("Model error: ModelError: ")
    assert "HTTP 503 from the provider" in r.content
    unknown = agent_on(PydanticAIModel("no-such-provider:model"), "unknown")
    r = unknown.prompt("hi").session(InMemoryAgentSession.of("pai-unknown")).call()
    assert r.is_abnormal and "cannot build model 'no-such-provider:model'" in r.content
    with pytest.raises(UsageError):
        PydanticAIModel(42)
    with pytest.raises(UsageError):
        PydanticAIModel("  ")


WORKER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from tests.agents.test_pydantic_ai_model import MOVES, agent_on, function_model
    from intermission import HITL
    from intermission.stores import SQLiteStore
    store = SQLiteStore({db!r})
    agent = agent_on(function_model(True))
    with store.resume("pai-x") as s:
        HITL.approve_all(s, reviewer="bob")
    with store.resume("pai-x") as s:
        print(agent.prompt().session(s).call().content)
    print(MOVES)
    """
)


def test_a_session_paused_on_a_pydantic_ai_call_resumes_in_another_process(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "pai.sqlite")
    store = SQLiteStore(db)
    s = InMemoryAgentSession.of("pai-x")
    agent_on(function_model(True)).prompt("move 5 to acme").session(s).call()
    store.save(s)
    out = subprocess.run(
        [sys.executable, "-c", WORKER.format(root=str(ROOT), db=db)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    answer, moves = out.stdout.strip().splitlines()
    assert answer == "Done: s-1=acme: 100; s-2=moved 5 to acme"
    assert moves == "[('acme', 5)]"
    assert store.load("pai-x").status == "done"
    store.close()


def test_a_model_that_cannot_stream_is_asked_for_whole_replies() -> None:
    from pydantic_ai.models.function import FunctionModel

    MOVES.clear()
    agent = agent_on(PydanticAIModel(FunctionModel(banker)), "whole")  # stream=True (default)
    s = InMemoryAgentSession.of("pai-whole")
    agent.prompt("move 5 to acme").session(s).call()
    HITL.approve_all(s)
    assert agent.prompt().session(s).call().content.startswith("Done: t-1=acme: 100")
    assert MOVES == [("acme", 5)]


def test_a_reader_that_stops_mid_reply_gets_the_same_answer_on_resume() -> None:
    """Stopping the stream while pydantic-ai is still streaming closes its stream; nothing
    ran, and the resume asks the model again and goes on to the same pause (R41)."""
    from pydantic_ai.models.function import FunctionModel

    MOVES.clear()
    calls: list[int] = []

    async def counting(messages: list[Any], info: Any) -> Any:
        calls.append(1)
        async for piece in streaming_banker(messages, info):
            yield piece

    agent = agent_on(PydanticAIModel(FunctionModel(stream_function=counting)), "stopper")
    s = InMemoryAgentSession.of("pai-stop")
    stream = agent.prompt("move 5 to acme").session(s).stream()
    for event in stream:
        if event.kind == "reason_delta":
            break  # the first piece of text: the reply is still streaming
    stream.dispose()
    assert not s.is_pending and MOVES == [] and calls == [1]
    kinds = [e.kind for e in agent.prompt().session(s).stream()]
    assert calls == [1, 1] and s.is_pending and "hitl_pending" in kinds
    (task,) = HITL.pending_tasks(s)
    assert task.call_uuid == "s-2"
    HITL.approve_all(s)
    assert agent.prompt().session(s).call().content.startswith("Done: s-1=acme: 100")
    assert MOVES == [("acme", 5)]
