"""R41: streams pull. A reader that stops — ``for`` + break, ``async for`` + break,
``dispose()``, ``aclose()``, cancelling its task — after any event of a tool-calling run stops
the run there: no tool starts after the stop, a tool that started ends and is recorded, and
the session resumes to the same answer with every tool run once overall.

Before: the sync stream's worker thread and the async stream's unbounded queue ran ahead of
the reader; with the offline model the whole run was over before the first event arrived.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from intermission import (
    HITL,
    ChatMessage,
    HITLInterceptor,
    InMemoryAgentSession,
    ModelChunk,
    NothingToResumeError,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    tool,
)

LOG: list[str] = []
"""What the tools did, in order: 'debit:start', 'debit:end', 'credit:step1', 'credit:step2'."""


class Talker:
    """A model that writes a sentence before its tool calls (so a tool-calling reply has
    ReasonDelta events), answering from the conversation like a real model."""

    async def stream(self, messages: list[ChatMessage], tools: Any) -> AsyncIterator[ModelChunk]:
        if any(m.role == "tool" for m in messages):
            for part in ("Moved 5 ", "from alice ", "to bob."):
                yield ModelChunk(text=part)
            return
        for part in ("Checking ", "both accounts."):
            yield ModelChunk(text=part)
        yield ModelChunk(tool_calls=[ToolCall("debit", {"who": "alice", "amount": 5}, id="c-1"),
                                     ToolCall("credit", {"who": "bob", "amount": 5}, id="c-2")])


def scripted() -> ScriptedModel:
    """A list script: a reply cut off by a stop must be given again, not the next one."""
    calls = [ToolCall("debit", {"who": "alice", "amount": 5}, id="c-1"),
             ToolCall("credit", {"who": "bob", "amount": 5}, id="c-2")]  # fmt: skip
    return ScriptedModel([calls, "Moved 5 from alice to bob."], chunk_size=6)


@tool
def debit(who: str, amount: int) -> str:
    """Take money (sync)."""
    LOG.append("debit:start")
    LOG.append("debit:end")
    return f"debited {amount} from {who}"


@tool
async def credit(who: str, amount: int) -> str:
    """Give money (async, two steps)."""
    LOG.append("credit:step1")
    await asyncio.sleep(0)
    LOG.append("credit:step2")
    return f"credited {amount} to {who}"


MODELS: dict[str, Callable[[], Any]] = {"talker": Talker, "scripted": scripted}


def build(model: str, hitl: bool = False) -> ReActAgent:
    builder = ReActAgent.of(MODELS[model]()).name("bank").tools(debit, credit)
    if hitl:
        builder = builder.interceptor(HITLInterceptor().on_tool("debit"))
    return builder.build()


def uninterrupted(model: str) -> tuple[str, list[str]]:
    LOG.clear()
    s = InMemoryAgentSession.of("whole")
    kinds = [e.kind for e in build(model).prompt("move 5").session(s).stream()]
    return s.events[-1].content, kinds  # type: ignore[union-attr]


def _sync_stop(stream: Any, n: int, how: str) -> list[Any]:
    seen = []
    it = iter(stream)
    for ev in it:
        seen.append(ev)
        if len(seen) == n:
            if how == "dispose":
                stream.dispose()
            break
    return seen


def _async_stop(stream: Any, n: int, how: str) -> list[Any]:
    seen: list[Any] = []

    async def read(hold: asyncio.Event) -> None:
        async for ev in stream:
            seen.append(ev)
            if len(seen) == n:
                if how == "aclose":
                    await stream.aclose()
                    return
                if how == "cancel":
                    await hold.wait()  # holds event n, asks for nothing more
                return  # async for + break (return leaves the loop the same way)

    async def main() -> None:
        hold = asyncio.Event()
        task = asyncio.ensure_future(read(hold))
        if how == "cancel":
            while len(seen) < n and not task.done():
                await asyncio.sleep(0)
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await asyncio.sleep(0)

    asyncio.run(main())
    return seen


STOPS = {
    "for-break": lambda st, n: _sync_stop(st, n, "break"),
    "dispose": lambda st, n: _sync_stop(st, n, "dispose"),
    "async-for-break": lambda st, n: _async_stop(st, n, "break"),
    "aclose": lambda st, n: _async_stop(st, n, "aclose"),
    "task-cancel": lambda st, n: _async_stop(st, n, "cancel"),
}

EVERY_EVENT = [(m, n) for m in MODELS for n in range(1, len(uninterrupted(m)[1]) + 1)]
"""(model, n): stop after the n-th event, for every event of each model's run."""


@pytest.mark.parametrize("how", list(STOPS))
@pytest.mark.parametrize(("model", "n"), EVERY_EVENT)
def test_a_reader_that_stops_after_any_event_stops_the_run_there(
    model: str, how: str, n: int
) -> None:
    answer, whole = uninterrupted(model)
    LOG.clear()
    agent = build(model)
    s = InMemoryAgentSession.of("s")
    seen = STOPS[how](agent.prompt("move 5").session(s).stream(), n)
    assert [e.kind for e in seen] == whole[:n]  # events arrive in order, none skipped
    stop_kind = seen[-1].kind
    # nothing ran ahead of the reader: a tool starts only after the reader took its
    # ToolCallStart and asked for more, so no tool started after the last event read
    started = sum(e.kind == "tool_call_start" for e in seen)
    ended = sum(e.kind == "tool_call_end" for e in seen)
    assert LOG.count("debit:start") + LOG.count("credit:step1") == ended
    assert len(s.events) == n  # the log holds what the reader saw, nothing more
    if stop_kind != "run_end":
        assert "run_end" not in s.events.kinds() and s.status != "done"
        resumed = agent.prompt().session(s).call().content
    else:
        with pytest.raises(NothingToResumeError):
            agent.prompt().session(s).call()
        resumed = s.events[-1].content  # type: ignore[union-attr]
    assert resumed == answer
    assert LOG == ["debit:start", "debit:end", "credit:step1", "credit:step2"]  # each once
    assert started >= ended


@pytest.mark.parametrize("how", ["aclose", "task-cancel", "dispose"])
def test_a_tool_running_when_the_run_is_cancelled_finishes_and_is_recorded(how: str) -> None:
    LOG.clear()
    release = threading.Event()

    @tool
    async def slow_credit(who: str, amount: int) -> str:
        """Give money, slowly (two steps)."""
        LOG.append("credit:step1")
        while not release.is_set():
            await asyncio.sleep(0.002)
        LOG.append("credit:step2")
        return f"credited {amount} to {who}"

    calls = [ToolCall("slow_credit", {"who": "bob", "amount": 5}, id="c-9")]
    model = ScriptedModel([calls, "Credited."])
    agent = ReActAgent.of(model).name("bank").tools(slow_credit).build()
    s = InMemoryAgentSession.of("slow")
    stream = agent.prompt("credit bob").session(s).stream()

    def release_soon() -> None:
        time.sleep(0.05)
        assert "credit:step2" not in LOG  # the stop is waiting for the tool, not killing it
        release.set()

    if how == "dispose":
        def read() -> None:
            for _ev in stream:  # asks past ToolCallStart: the tool starts
                pass

        reader = threading.Thread(target=read)
        reader.start()
        while "credit:step1" not in LOG:
            time.sleep(0.001)
        threading.Thread(target=release_soon).start()
        stream.dispose()  # from another thread, mid-tool: returns once the run unwound
        reader.join(10)
    else:
        async def main() -> None:
            async def read() -> None:
                async for _ev in stream:
                    pass

            task = asyncio.ensure_future(read())
            while "credit:step1" not in LOG:
                await asyncio.sleep(0.001)
            threading.Thread(target=release_soon).start()
            if how == "aclose":
                await stream.aclose()
            else:
                task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

        asyncio.run(main())
    assert LOG == ["credit:step1", "credit:step2"]  # it finished
    assert s.events.kinds()[-1] == "tool_call_end" and "run_end" not in s.events.kinds()
    (end,) = [e for e in s.events if e.kind == "tool_call_end"]
    assert end.observation == "credited 5 to bob"
    assert agent.prompt().session(s).call().content == "Credited."
    assert LOG == ["credit:step1", "credit:step2"]  # its result was kept: not run again
    assert len(model.calls) == 2  # and the model was not asked for the tool call again


def test_an_hitl_run_stopped_at_every_event_of_both_requests_resumes_the_same() -> None:
    LOG.clear()
    whole = InMemoryAgentSession.of("whole")
    agent = build("talker", hitl=True)
    first = [e.kind for e in agent.prompt("move 5").session(whole).stream()]
    HITL.approve_all(whole, reviewer="lead")
    second = [e.kind for e in agent.prompt().session(whole).stream()]
    answer = whole.events[-1].content  # type: ignore[union-attr]
    structural = [k for k in first if k != "reason_delta"]  # (text chunks left out)
    assert structural[-3:] == ["reason_end", "hitl_pending", "run_end"]  # R25
    assert second[:3] == ["run_start", "hitl_decided", "action_start"]
    for request, kinds in (("first", first), ("resume", second)):
        for n in range(1, len(kinds) + 1):
            LOG.clear()
            s = InMemoryAgentSession.of(f"{request}-{n}")
            if request == "resume":
                agent.prompt("move 5").session(s).call()
                HITL.approve_all(s, reviewer="lead")
            seen = _sync_stop(agent.prompt(None if request == "resume" else "move 5")
                              .session(s).stream(), n, "break")  # fmt: skip
            assert [e.kind for e in seen] == kinds[:n]
            while s.status not in ("done",):
                if HITL.pending_tasks(s):
                    HITL.approve_all(s, reviewer="lead")
                agent.prompt().session(s).call()
            assert s.events[-1].content == answer, (request, n)  # type: ignore[union-attr]
            assert LOG == ["debit:start", "debit:end", "credit:step1", "credit:step2"]


def test_a_team_stopped_after_any_event_runs_each_node_and_effect_once() -> None:
    from intermission.examples import build_change_graph

    applied: list[str] = []

    def effect(change_id: str) -> str:
        applied.append(change_id)
        return f"applied {change_id}"

    def approved() -> InMemoryAgentSession:
        s = InMemoryAgentSession.of("change")
        build_change_graph(effect).prompt("Upgrade").session(s).call()
        s.context.put("approval.decision", "APPROVE")
        return s

    whole = approved()
    kinds = [e.kind for e in build_change_graph(effect).prompt().session(whole).stream()]
    answer = whole.events[-1].content  # type: ignore[union-attr]
    assert kinds[-1] == "team_end" and applied == ["change-001"]
    for how in ("for-break", "aclose", "task-cancel"):
        for n in range(1, len(kinds) + 1):
            applied.clear()
            s = approved()
            before = len(s.events)
            seen = STOPS[how](build_change_graph(effect).prompt().session(s).stream(), n)
            assert [e.kind for e in seen] == kinds[:n] and len(s.events) - before == n
            tool_ended = any(e.kind == "tool_call_end" for e in seen)
            assert applied == (["change-001"] if tool_ended else [])  # nothing ran ahead
            if seen[-1].kind != "team_end":
                build_change_graph(effect).prompt().session(s).call()
            assert s.events[-1].content == answer and applied == ["change-001"], (how, n)
