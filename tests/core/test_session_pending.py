"""R1–R6 on sessions and bare graphs."""

from __future__ import annotations

import asyncio
import threading

import pytest
from tests._helpers import change_graph, linear

from intermission import FlowEngine, InMemoryAgentSession, NothingToResumeError


def test_r1_pending_sets_flag_and_reason_and_clears() -> None:  # R1
    s = InMemoryAgentSession.of("s")
    s.pending(True, "wait")
    assert s.is_pending and s.pending_reason == "wait"
    s.pending(False, "kept for display")
    assert not s.is_pending and s.pending_reason == "kept for display"
    s.pending(False, None)
    assert not s.is_pending and s.pending_reason is None


def test_r2_is_pending_is_exactly_context_stopped() -> None:  # R2
    s = InMemoryAgentSession.of("s")
    s.context.stop()
    assert s.is_pending and s.pending_reason is None
    s.pending(False)
    assert not s.context.is_stopped


def test_r1_r8_pending_in_task_stops_graph_and_keeps_position() -> None:  # R1, R8
    s = InMemoryAgentSession.of("change-001")
    result = FlowEngine().eval(change_graph(), s.context)
    assert result.status == "stopped"
    assert s.is_pending and s.pending_reason == "change plan awaits human review"
    assert s.context.trace.last_node_id() == "approval"
    assert result.positions == ("approval",)
    assert s.context.get("approval.request") == "upgrade order-service + migrate db"
    assert "change.result" not in s.context


def test_r3_new_eval_clears_pending_and_resumes() -> None:  # R3, R7a
    counts: dict[str, int] = {}
    spec = change_graph(counts)
    s = InMemoryAgentSession.of("c")
    engine = FlowEngine()
    engine.eval(spec, s.context)
    s.context.put("approval.decision", "APPROVE")
    result = engine.eval(spec, s.context)
    assert result.is_done and not s.is_pending and s.pending_reason is None
    assert s.context.get("change.result") == "executed"
    assert counts == {"proposal": 1, "executor": 1}  # earlier tasks never re-run (R8)
    assert s.context.get("calls.approval") == 2  # the pending node re-ran (R8)


def test_r4_eval_after_done_raises_and_runs_nothing() -> None:  # R4, R40
    counts: dict[str, int] = {}
    spec = change_graph(counts)
    s = InMemoryAgentSession.of("c")
    s.context.put("approval.decision", "APPROVE")
    FlowEngine().eval(spec, s.context)
    before = s.to_json()
    with pytest.raises(NothingToResumeError, match="already ran to its end"):
        FlowEngine().eval(spec, s.context)
    assert counts["executor"] == 1 and s.to_json() == before and s.status == "done"
    s.context.trace.clear()  # what the message says to do runs it again
    assert FlowEngine().eval(spec, s.context).is_done and counts["executor"] == 2


def test_r5_pending_from_another_thread_takes_effect_at_next_check_point() -> None:  # R5
    s = InMemoryAgentSession.of("t")
    entered = threading.Event()
    release = threading.Event()

    spec = linear(5)
    node_two = spec.get_node("n2")

    def slow(ctx, node):  # type: ignore[no-untyped-def]
        entered.set()
        assert release.wait(5)
        ctx.put("count", ctx.get("count", 0) + 1)

    node_two.task(slow)

    def pend() -> None:
        assert entered.wait(5)
        s.pending(True, "stop from outside")
        release.set()

    t = threading.Thread(target=pend)
    t.start()
    result = FlowEngine().eval(spec, s.context)
    t.join()
    # the node in flight finished first (R2), then the run stopped before n3
    assert result.status == "stopped" and s.context.get("count") == 3
    assert s.pending_reason == "stop from outside"
    assert FlowEngine().eval(spec, s.context).is_done
    assert s.context.get("count") == 6  # n2 ran again (it was the pending position)


def test_r5_pending_from_another_task_with_async_tasks() -> None:  # R5
    s = InMemoryAgentSession.of("a")
    spec = linear(4)

    async def slow(ctx, node):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.01)
        ctx.put("count", ctx.get("count", 0) + 1)

    spec.get_node("n1").task(slow)

    async def main() -> str:
        run = asyncio.ensure_future(FlowEngine().eval_async(spec, s.context))
        await asyncio.sleep(0.001)
        s.pending(True, "paused by a coroutine")
        return (await run).status

    assert asyncio.run(main()) == "stopped"
    assert s.context.get("count") == 2
