"""R7–R10: node kinds, stop vs interrupt, exact parallel resume, step budget."""

from __future__ import annotations

import pytest
from tests._helpers import linear

from intermission import (
    END,
    FlowContext,
    FlowEngine,
    FlowRuntimeError,
    GraphDefinitionError,
    GraphSpec,
    InMemoryAgentSession,
)


def _log(name: str):  # type: ignore[no-untyped-def]
    def task(ctx, node):  # type: ignore[no-untyped-def]
        ctx.put("log", [*ctx.get("log", []), name])

    return task


def test_r7a_bare_graph_runs_on_a_plain_context() -> None:  # R7a
    ctx = FlowContext.of("x")
    result = FlowEngine().eval(linear(3), ctx)
    assert result.is_done and ctx["count"] == 3 and result.steps == 5


def test_r7_exclusive_takes_first_match_by_priority_else_default() -> None:  # R7
    spec = GraphSpec("ex")
    spec.add_start().link_add("gw")
    spec.add_exclusive("gw").task(_log("gw")).link_add("low", when=lambda c: True).link_add(
        "high", when=lambda c: True, priority=5
    ).link_add("default")
    for name in ("low", "high", "default"):
        spec.add_activity(name).task(_log(name)).link_add(END)
    spec.add_end()
    ctx = FlowContext()
    FlowEngine().eval(spec, ctx)
    assert ctx["log"] == ["gw", "high"]  # gateway task ran before the link was chosen

    spec.get_node("gw").link_clear().link_add("low", when=lambda c: False).link_add(
        "high", when=lambda c: False
    ).link_add("default")
    ctx = FlowContext()
    FlowEngine().eval(spec, ctx)
    assert ctx["log"] == ["gw", "default"]


def test_r7_exclusive_without_match_or_default_is_a_typed_error() -> None:  # R7
    spec = GraphSpec("ex")
    spec.add_start().link_add("gw")
    spec.add_exclusive("gw").link_add("a", when=lambda c: False)
    spec.add_activity("a").link_add(END)
    spec.add_end()
    ctx = FlowContext()
    with pytest.raises(FlowRuntimeError, match="'gw'"):
        FlowEngine().eval(spec, ctx)
    assert ctx.trace.graphs["ex"].failed == "gw"


@pytest.mark.parametrize(
    ("mutate", "node", "fragment"),
    [
        (lambda s: s.get_node("a").link_add("ghost"), "a", "unknown node 'ghost'"),
        (lambda s: s.remove_node("start"), None, "start node"),
        (lambda s: s.remove_node("end") or s.get_node("a").link_clear().link_add("b"), None, "end"),
        (lambda s: s.add_activity("island").link_add(END), "island", "unreachable"),
        (lambda s: s.add_activity("dead"), "dead", None),
    ],
)
def test_r7_validation_names_the_node(mutate, node, fragment) -> None:  # type: ignore[no-untyped-def]  # R7
    spec = GraphSpec("v")
    spec.add_start().link_add("a")
    spec.add_activity("a").link_add("b")
    spec.add_activity("b").link_add(END)
    spec.add_end()
    spec.build()
    mutate(spec)
    with pytest.raises(GraphDefinitionError) as info:
        spec.build()
    if node:
        assert info.value.node_id == node and repr(node) in str(info.value)
    if fragment:
        assert fragment in str(info.value)


def test_r7_two_defaults_on_exclusive_is_refused() -> None:  # R7
    spec = GraphSpec("v")
    spec.add_start().link_add("gw")
    spec.add_exclusive("gw").link_add("a").link_add("b")
    spec.add_activity("a").link_add(END)
    spec.add_activity("b").link_add(END)
    spec.add_end()
    with pytest.raises(GraphDefinitionError, match="2 default links"):
        spec.build()


def _parallel(interrupt_in: str | None = None, stop_in: str | None = None) -> GraphSpec:
    spec = GraphSpec("par")
    spec.add_start().link_add("fork")
    spec.add_parallel("fork").link_add("a1").link_add("b1")

    def step(name: str):  # type: ignore[no-untyped-def]
        def task(ctx, node):  # type: ignore[no-untyped-def]
            ctx.put("log", [*ctx.get("log", []), name])
            if name == interrupt_in and not ctx.get("resumed"):
                ctx.interrupt()
            if name == stop_in and not ctx.get("resumed"):
                ctx.session.pending(True, "stop in " + name)

        return task

    spec.add_activity("a1").task(step("a1")).link_add("a2")
    spec.add_activity("a2").task(step("a2")).link_add("join")
    spec.add_activity("b1").task(step("b1")).link_add("b2")
    spec.add_activity("b2").task(step("b2")).link_add("join")
    spec.add_parallel("join").task(step("join")).link_add(END)
    spec.add_end()
    return spec


def test_r9_interrupt_ends_only_the_branch() -> None:  # R9
    s = InMemoryAgentSession.of("p")
    result = FlowEngine().eval(_parallel(interrupt_in="a1"), s.context)
    assert result.status == "parked"
    assert s.context["log"] == ["a1", "b1", "b2"]  # the sibling went on to the join
    assert not s.is_pending  # interrupt is not pending
    s.context.put("resumed", True)
    assert FlowEngine().eval(_parallel(interrupt_in="a1"), s.context).is_done
    assert s.context["log"] == ["a1", "b1", "b2", "a1", "a2", "join"]


def test_r9_stop_ends_the_whole_run_and_resume_is_exact() -> None:  # R9
    s = InMemoryAgentSession.of("p")
    spec = _parallel(stop_in="a2")
    result = FlowEngine().eval(spec, s.context)
    assert result.status == "stopped" and s.is_pending
    assert s.context["log"] == ["a1", "a2"]
    assert set(s.context.trace.positions()) == {"a2", "b1"}  # every branch recorded
    restored = InMemoryAgentSession.restore(s.to_json())
    restored.context.put("resumed", True)
    assert FlowEngine().eval(spec, restored.context).is_done
    assert restored.context["log"] == ["a1", "a2", "a2", "b1", "b2", "join"]


def test_r9_join_arrivals_survive_a_pause() -> None:  # R9
    s = InMemoryAgentSession.of("p")
    spec = _parallel(stop_in="b1")
    FlowEngine().eval(spec, s.context)
    assert s.context.trace.graphs["par"].joins == {"join": 1}  # branch a already arrived
    s.context.put("resumed", True)
    FlowEngine().eval(spec, s.context)
    assert s.context["log"] == ["a1", "a2", "b1", "b1", "b2", "join"]


def test_r10_step_budget_advances_n_nodes_then_stops_resumably() -> None:  # R10
    s = InMemoryAgentSession.of("b")
    spec = linear(5)
    seen = []
    while True:
        result = FlowEngine().eval(spec, s.context, steps=2)
        seen.append((result.status, s.context.get("count", 0)))
        if result.is_done:
            break
        assert not s.is_pending and s.status == "paused"
    assert seen == [("budget", 1), ("budget", 3), ("budget", 5), ("done", 5)]


def test_r7_inclusive_forks_matching_and_joins_those() -> None:  # R7
    spec = GraphSpec("inc")
    spec.add_start().link_add("fork")
    spec.add_inclusive("fork").link_add("a", when=lambda c: True).link_add(
        "b", when=lambda c: False
    ).link_add("c")
    for name in "abc":
        spec.add_activity(name).task(_log(name)).link_add("join")
    spec.add_inclusive("join").task(_log("join")).link_add(END)
    spec.add_end()
    ctx = FlowContext()
    assert FlowEngine().eval(spec, ctx).is_done
    assert ctx["log"] == ["a", "c", "join"]


def test_r7_loop_iterates_a_list() -> None:  # R7
    spec = GraphSpec("loop")
    spec.add_start().link_add("each")
    spec.add_loop("each", over="items", item="item").body("work").link_add(END)
    spec.add_activity("work").task(
        lambda ctx, node: ctx.put("out", [*ctx.get("out", []), ctx["item"] * 10])
    ).link_add("each")
    spec.add_end()
    ctx = FlowContext()
    ctx.put("items", [1, 2, 3])
    assert FlowEngine().eval(spec, ctx).is_done
    assert ctx["out"] == [10, 20, 30]


def test_r7_subgraph_pauses_and_resumes_inside_the_child() -> None:  # R7, R8
    child = GraphSpec("child")
    child.add_start().link_add("gate")

    def gate(ctx, node):  # type: ignore[no-untyped-def]
        ctx.put("gate_runs", ctx.get("gate_runs", 0) + 1)
        if not ctx.get("ok"):
            ctx.session.pending(True, "child waits")

    child.add_activity("gate").task(gate).link_add(END)
    child.add_end()
    parent = GraphSpec("parent")
    parent.add_start().link_add("before")
    parent.add_activity("before").task(_log("before")).link_add("sub")
    parent.add_subgraph("sub", child).link_add("after")
    parent.add_activity("after").task(_log("after")).link_add(END)
    parent.add_end()
    s = InMemoryAgentSession.of("sg")
    assert FlowEngine().eval(parent, s.context).status == "stopped"
    assert s.pending_reason == "child waits"
    s.context.put("ok", True)
    s2 = InMemoryAgentSession.restore(s.to_json())
    assert FlowEngine().eval(parent, s2.context).is_done
    assert s2.context["log"] == ["before", "after"] and s2.context["gate_runs"] == 2


def test_r9_stop_in_on_node_start_skips_the_task_until_resume() -> None:  # R9
    class Gate:
        def on_node_start(self, ctx, node):  # type: ignore[no-untyped-def]
            if node.id == "n1" and not ctx.get("go"):
                ctx.stop()

    s = InMemoryAgentSession.of("g")
    engine = FlowEngine([Gate()])
    assert engine.eval(linear(3), s.context).status == "stopped"
    assert s.is_pending and s.pending_reason is None and s.context["count"] == 1
    s.context.put("go", True)
    assert engine.eval(linear(3), s.context).is_done and s.context["count"] == 3
