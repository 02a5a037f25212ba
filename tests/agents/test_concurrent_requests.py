"""One request at a time on a session object: a second one while the first runs is refused
with a typed error and changes nothing (R3, R26, R30 within one process)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from intermission import (
    HITL,
    AgentResponse,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ReActInterceptor,
    RequestInProgressError,
    ScriptedModel,
    SessionStateError,
    ToolCall,
    tool,
)

RAN: list[int] = []


@tool
def pay(amount: int) -> str:
    """Pay."""
    RAN.append(amount)
    return f"paid {amount}"


def approved_session(
    delay: float = 0.01, reply: str = "done"
) -> tuple[ReActAgent, ScriptedModel, InMemoryAgentSession]:
    RAN.clear()
    model = ScriptedModel(
        [[ToolCall("pay", {"amount": 5})], reply, "asked twice"], chunk_delay=delay
    )
    agent = (
        ReActAgent.of(model).name("payer").tools(pay)
        .interceptor(HITLInterceptor().on_tool("pay")).build()
    )  # fmt: skip
    s = InMemoryAgentSession.of("busy")
    agent.prompt("pay 5").session(s).call()
    HITL.approve_all(s)
    return agent, model, s


def test_second_call_async_while_the_first_runs_is_refused_and_changes_nothing() -> None:
    agent, model, s = approved_session()

    async def both() -> AgentResponse:
        first = asyncio.ensure_future(agent.prompt().session(s).call_async())
        await asyncio.sleep(0)  # the first request is running (awaiting the model)
        events_before = len(s.events)
        with pytest.raises(RequestInProgressError) as refused:
            await agent.prompt().session(s).call_async()
        assert len(s.events) == events_before and not s.is_pending
        assert isinstance(refused.value, SessionStateError)
        assert refused.value.session_id == "busy"
        return await first

    resp = asyncio.run(both())
    assert resp.content == "done" and RAN == [5]
    assert model.turn == 2  # the model was asked once on resume, not twice
    assert s.events.kinds().count("run_start") == 2  # the pause and the one resume


def test_a_request_from_another_thread_while_a_stream_runs_is_refused() -> None:
    agent, _, s = approved_session(delay=0.02)
    stream = agent.prompt().session(s).stream()
    it = iter(stream)
    assert next(it).kind == "run_start"  # the stream's request is running
    errors: list[BaseException] = []

    def click() -> None:
        try:
            agent.prompt().session(s).call()
        except BaseException as exc:  # the test inspects it
            errors.append(exc)

    t = threading.Thread(target=click)
    t.start()
    t.join(10)
    assert [type(e) for e in errors] == [RequestInProgressError]
    kinds = ["run_start", *(e.kind for e in it)]
    assert kinds[-1] == "run_end" and RAN == [5]


def test_the_session_is_free_again_after_a_cancelled_stream_and_after_an_error() -> None:
    agent, _, s = approved_session(delay=0.05, reply="a reply long enough for several chunks")
    stream = agent.prompt().session(s).stream()
    it = iter(stream)
    while next(it).kind != "reason_delta":  # the tool ran; the model is mid-reply
        pass
    stream.dispose()  # cancelled (R26): it returns once the run has unwound
    # the cut-off reply is given again (R41: the same answer as without the stop); the
    # tool ran once
    resumed = agent.prompt().session(s).call().content
    assert resumed == "a reply long enough for several chunks" and RAN == [5]

    class Boom(ReActInterceptor):
        def on_agent_start(self, trace: object) -> None:
            raise RuntimeError("boom")

    broken = ReActAgent.of(ScriptedModel(["x"])).name("broken").interceptor(Boom()).build()
    s2 = InMemoryAgentSession.of("err")
    with pytest.raises(RuntimeError):
        broken.prompt("go").session(s2).call()
    fine = ReActAgent.of(ScriptedModel(["fine"])).name("fine").build()
    # (another agent takes the session over on purpose: adopt)
    assert fine.prompt("go").session(s2).adopt().call().content == "fine"


def test_a_stream_left_by_break_or_a_cancelled_call_frees_the_session_at_once() -> None:  # R26
    # the natural code: leave the stream with `break` (or cancel a call) and resume on the
    # next line; the new request waits for the cancelled run to unwind instead of being
    # refused, and never runs on top of it
    model = ScriptedModel(
        ["a long reply that streams in pieces", "asked again", "a third reply, cut off", "fourth"],
        chunk_size=4, chunk_delay=0.01,
    )  # fmt: skip
    agent = ReActAgent.of(model).name("talker").build()
    s = InMemoryAgentSession.of("brk")

    async def main() -> tuple[str, str]:
        async for ev in agent.prompt("talk").session(s).stream():
            if ev.kind == "reason_delta":
                break
        first = (await agent.prompt().session(s).call_async()).content
        seen = len(s.events)
        task = asyncio.ensure_future(agent.prompt("again").session(s).call_async())
        while "reason_delta" not in s.events.kinds()[seen:]:  # mid-reply
            await asyncio.sleep(0.001)
        task.cancel()
        second = (await agent.prompt().session(s).call_async()).content
        return first, second

    # a reply cut off by the stop is given again on resume (R41), not the next one
    assert asyncio.run(main()) == ("a long reply that streams in pieces", "asked again")
    kinds = s.events.kinds()
    assert kinds.count("run_start") == 4 and kinds.count("run_end") == 2  # R26: no RunEnd


def test_stepping_a_team_while_it_runs_is_refused() -> None:  # R10
    from intermission import TeamAgent

    slow = ReActAgent.of(ScriptedModel(["thinking " * 8], chunk_size=4, chunk_delay=0.01))
    team = TeamAgent.sequential("steps", [slow.name("slow").build()])
    s = InMemoryAgentSession.of("step")

    async def main() -> list[type[BaseException]]:
        running = asyncio.ensure_future(team.prompt("go").session(s).call_async())
        while "reason_delta" not in s.events.kinds():
            await asyncio.sleep(0.001)
        refused: list[type[BaseException]] = []
        t = threading.Thread(target=lambda: _record(refused, lambda: team.step(s, 1)))
        t.start()
        t.join(10)
        await running
        return refused

    assert asyncio.run(main()) == [RequestInProgressError]
    assert s.status == "done"


def _record(into: list[type[BaseException]], fn: Any) -> None:
    try:
        fn()
    except BaseException as exc:  # the test inspects it
        into.append(type(exc))
