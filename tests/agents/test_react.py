"""ReActAgent: the seed's pending scenarios, event orders, tools, sync/async/stream."""

from __future__ import annotations

import asyncio

import pytest

from intermission import (
    InMemoryAgentSession,
    NothingToResumeError,
    ReActAgent,
    ReActInterceptor,
    ScriptedModel,
    ScriptExhaustedError,
    ToolCall,
    tool,
)

DELETED: list[int] = []


@tool
def delete_user(user_id: int) -> str:
    """Delete a user."""
    DELETED.append(user_id)
    return f"user {user_id} deleted"


@tool
def explode(x: int) -> str:
    """Always fails."""
    raise RuntimeError("boom")


def script() -> ScriptedModel:
    def fn(messages, tools):  # type: ignore[no-untyped-def]
        if any(m.role == "tool" for m in messages):
            return "User 1001 deleted."
        return [ToolCall("delete_user", {"user_id": 1001})]

    return ScriptedModel(fn, chunk_size=4)


class PendOnDelete(ReActInterceptor):
    def on_tool_call_start(self, trace, exchange):  # type: ignore[no-untyped-def]
        if exchange.tool_name == "delete_user" and not trace.session.context.get("approved"):
            trace.session.pending(True, "sensitive operation, waiting for approval")


def agent(*interceptors, model=None) -> ReActAgent:  # type: ignore[no-untyped-def]
    return (
        ReActAgent.of(model or script())
        .name("ops")
        .tools(delete_user, explode)
        .interceptor(*interceptors)
        .build()
    )


def test_seed_interceptor_pends_on_delete_user_then_resumes() -> None:  # R1, R6, R3
    DELETED.clear()
    a = agent(PendOnDelete())
    s = InMemoryAgentSession.of("s")
    resp = a.prompt("delete user 1001").session(s).call()
    assert s.is_pending and s.pending_reason == "sensitive operation, waiting for approval"
    assert DELETED == [] and resp.content == "" and not resp.is_abnormal  # R6
    assert s.events.kinds() == [
        "run_start",
        "reason_start",
        "reason_end",
        "action_start",
        "run_end",
    ]  # generic pending: no HITLPending invented, no ActionEnd
    s.context.put("approved", True)
    resp = a.prompt().session(s).call()
    assert resp.content == "User 1001 deleted." and not s.is_pending and DELETED == [1001]
    assert [m.role for m in s.messages] == ["user", "assistant"]  # R6a


def test_seed_external_pending_while_call_async_runs() -> None:  # R5
    model = ScriptedModel(
        ["a long report " * 8, "second try finished"], chunk_size=4, chunk_delay=0.005
    )
    a = agent(model=model)
    s = InMemoryAgentSession.of("s")

    async def main() -> None:
        task = asyncio.ensure_future(a.prompt("write a long report").session(s).call_async())
        await asyncio.sleep(0.02)
        s.pending(True, "the user clicked stop")
        resp = await task
        assert resp.content == "" and s.is_pending and s.pending_reason == "the user clicked stop"
        resumed = await a.prompt().session(s).call_async()  # R5: resumable, asks again
        assert resumed.content == "second try finished" and not s.is_pending

    asyncio.run(main())
    assert model.turn == 2


def test_seed_external_pending_plus_cancel_while_streaming() -> None:  # R5, R26
    model = ScriptedModel(
        ["weather: sunny " * 20, "Hangzhou: sunny, 21°C"], chunk_size=2, chunk_delay=0.005
    )
    a = agent(model=model)
    s = InMemoryAgentSession.of("s")

    async def main() -> list[str]:
        seen = []
        stream = a.prompt("weather in Hangzhou").session(s).stream()
        async for ev in stream:
            seen.append(ev.kind)
            if ev.kind == "reason_delta" and len(seen) > 4:
                s.pending(True, "quota exhausted")
                await stream.aclose()
                break
        return seen

    kinds = asyncio.run(main())
    assert "run_end" not in kinds and "run_end" not in s.events.kinds()  # R26
    assert s.is_pending and s.pending_reason == "quota exhausted"
    resp = a.prompt().session(s).call()
    # the model is asked again; the scripted reply cut off by the stop is given again
    # (R41: a stop does not change the answer), so the script's second reply is unused
    assert resp.content == "weather: sunny " * 20 and s.status == "done"
    assert len(model.calls) == 2 and model.turn == 1


def test_event_order_plain_run() -> None:  # R24
    a = agent(model=ScriptedModel(["hi"]))
    s = InMemoryAgentSession.of("s")
    kinds = [e.kind for e in a.prompt("hello").session(s).stream()]
    assert kinds == ["run_start", "reason_start", "reason_delta", "reason_end", "run_end"]
    seqs = [e.seq for e in s.events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert {e.session_id for e in s.events} == {"s"} and {e.agent for e in s.events} == {"ops"}


def test_event_order_tool_run_sync_iteration() -> None:  # R24
    DELETED.clear()
    s = InMemoryAgentSession.of("s")
    events = list(agent().prompt("delete").session(s).stream())
    assert [e.kind for e in events] == [
        "run_start",
        "reason_start",
        "reason_end",
        "action_start",
        "tool_call_start",
        "tool_call_end",
        "action_end",
        "reason_start",
        "reason_delta",
        "reason_delta",
        "reason_delta",
        "reason_delta",
        "reason_delta",
        "reason_end",
        "run_end",
    ]
    end = events[5]
    assert end.kind == "tool_call_end" and end.observation == "user 1001 deleted"
    assert end.call_uuid == events[4].call_uuid == events[2].tool_calls[0].id


def test_event_order_cancel_emits_no_run_end_and_stays_resumable() -> None:  # R26
    model = ScriptedModel(["x" * 200, "again"], chunk_size=1, chunk_delay=0.001)
    a = agent(model=model)
    s = InMemoryAgentSession.of("s")
    stream = a.prompt("go").session(s).stream()
    for i, _ev in enumerate(stream):
        if i == 3:
            break
    assert s.events.kinds()[-1] == "reason_delta" and "run_end" not in s.events.kinds()
    # asked again, the model gives the reply the stop cut off (R41), whole this time
    assert a.prompt().session(s).call().content == "x" * 200 and len(model.calls) == 2


def test_event_order_error_raises_without_run_end() -> None:  # R26
    class Boom(ReActInterceptor):
        def on_reason_start(self, trace):  # type: ignore[no-untyped-def]
            raise KeyError("interceptor bug")

    s = InMemoryAgentSession.of("s")
    with pytest.raises(KeyError):
        list(agent(Boom(), model=ScriptedModel(["x"])).prompt("go").session(s).stream())
    assert s.events.kinds() == ["run_start"] and s.status == "failed"


def test_r4_empty_prompt_after_the_run_ended_is_a_typed_error() -> None:  # R4
    a = agent(model=ScriptedModel(["done"]))
    s = InMemoryAgentSession.of("s")
    a.prompt("go").session(s).call()
    with pytest.raises(NothingToResumeError):
        a.prompt().session(s).call()
    with pytest.raises(NothingToResumeError):
        a.prompt().session(InMemoryAgentSession.of("new")).call()


def test_r14_bad_arguments_and_tool_errors_become_observations() -> None:  # R13, R14
    model = ScriptedModel(
        [
            [ToolCall("delete_user", {"user_id": "not a number"}), ToolCall("explode", {"x": 1})],
            [ToolCall("nope", {})],
            "recovered",
        ]
    )
    s = InMemoryAgentSession.of("s")
    resp = agent(model=model).prompt("go").session(s).call()
    assert resp.content == "recovered" and not resp.is_abnormal
    tool_msgs = [m.content for m in model.calls[1] if m.role == "tool"]
    assert tool_msgs[0].startswith("Invalid arguments for tool delete_user: user_id")
    assert '"type": "integer"' in tool_msgs[0]  # the schema hint
    assert tool_msgs[1] == "Execution error in tool explode: RuntimeError: boom"
    assert [m.content for m in model.calls[2] if m.role == "tool"][-1] == "Tool [nope] not found."


def test_r15_script_that_runs_out_names_the_turn() -> None:  # R15, R13
    s = InMemoryAgentSession.of("s")
    model = ScriptedModel([[ToolCall("delete_user", {"user_id": 1})]])
    resp = agent(model=model).prompt("go").session(s).call()
    assert resp.is_abnormal and "turn 2" in resp.content and "ScriptExhaustedError" in resp.content

    async def direct() -> None:
        async for _ in ScriptedModel([]).stream([], []):
            pass

    with pytest.raises(ScriptExhaustedError) as info:
        asyncio.run(direct())
    assert info.value.turn == 1


def test_call_works_inside_a_running_event_loop() -> None:  # notebook cells
    a = agent(model=ScriptedModel(["from a cell"]))

    async def cell() -> str:
        return a.prompt("hi").session(InMemoryAgentSession.of("nb")).call().content

    assert asyncio.run(cell()) == "from a cell"


def test_max_turns_is_an_abnormal_answer() -> None:  # R13
    model = ScriptedModel(lambda m, t: [ToolCall("delete_user", {"user_id": 1})])
    a = ReActAgent.of(model).name("loop").tools(delete_user).max_turns(3).build()
    resp = a.prompt("forever").session(InMemoryAgentSession.of("s")).call()
    assert resp.is_abnormal and "maximum turns reached (3)" in resp.content
