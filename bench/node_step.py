"""1. An in-memory node step of a 100-node linear graph: intermission against a plain
Python loop, LangGraph and Burr."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _shared import (
    line_spec,
    median_rounds,
    row,
    timed,
    verdict,
)


def bench_node_step(rounds: int) -> None:
    print("\n1. in-memory node step, 100-node linear graph (event log on)")
    from intermission import FlowEngine, InMemoryAgentSession

    n = 100
    graph = line_spec(n)
    engine = FlowEngine()

    def intermission_run() -> None:
        session = InMemoryAgentSession.of("b")
        engine.eval(graph, session.context)
        assert session.context["count"] == n and len(session.events) == 2 * (n + 2)

    funcs = [lambda s: s.__setitem__("count", s["count"] + 1) for _ in range(n)]

    def floor_run() -> None:
        state = {"count": 0}
        for f in funcs:
            f(state)

    systems: dict[str, Callable[[], float]] = {
        "python loop (floor)": lambda: timed(floor_run, 50) / n,
        "intermission": lambda: timed(intermission_run, 20) / n,
    }
    try:
        from typing import TypedDict

        from langgraph.graph import END as LG_END
        from langgraph.graph import START as LG_START
        from langgraph.graph import StateGraph

        class S(TypedDict):
            count: int

        g = StateGraph(S)
        for i in range(n):
            g.add_node(f"n{i}", lambda s: {"count": s["count"] + 1})
        g.add_edge(LG_START, "n0")
        for i in range(n - 1):
            g.add_edge(f"n{i}", f"n{i + 1}")
        g.add_edge(f"n{n - 1}", LG_END)
        lg = g.compile()
        cfg = {"recursion_limit": 1000}
        systems["langgraph"] = lambda: timed(lambda: lg.invoke({"count": 0}, cfg), 3) / n
    except ImportError as exc:
        print("   langgraph not installed:", exc)
    try:
        from burr.core import ApplicationBuilder, State, action

        def make() -> Any:
            @action(reads=["count"], writes=["count"])
            def step(state: State) -> State:
                return state.update(count=state["count"] + 1)

            return step

        app = (
            ApplicationBuilder()
            .with_actions(**{f"n{i}": make() for i in range(n)})
            .with_transitions(*[(f"n{i}", f"n{i + 1}") for i in range(n - 1)], (f"n{n - 1}", "n0"))
            .with_state(count=0)
            .with_entrypoint("n0")
            .build()
        )
        systems["burr"] = lambda: timed(lambda: app.run(halt_after=[f"n{n - 1}"]), 5) / n
    except ImportError as exc:
        print("   burr not installed:", exc)
    med = median_rounds(systems, rounds)
    us = {k: v * 1e6 for k, v in med.items()}
    mine = us["intermission"]
    row("node step: python loop floor", f"{us['python loop (floor)']:.3f} µs")
    row("node step: intermission (event log on)", f"{mine:.2f} µs",
        f"{mine / us['python loop (floor)']:.0f}× the floor",
        verdict(mine <= 3.0) + " (≤ 3 µs)")  # fmt: skip
    for peer, need in (("langgraph", 40), ("burr", 8)):
        if peer in us:
            faster = us[peer] / mine
            row(f"node step: {peer}", f"{us[peer]:.1f} µs", f"intermission {faster:.0f}× faster",
                verdict(faster >= need) + f" (≥ {need}×)")  # fmt: skip
