"""5. Rendering: a 50-node graph as SVG, a 10,000-event timeline."""

from __future__ import annotations

import statistics

from _shared import (
    row,
    timed,
    verdict,
)


def bench_render() -> None:
    print("\n5. rendering")
    from intermission import END, FakeClock, GraphSpec, InMemoryAgentSession, NodeStartEvent
    from intermission.core.events_log import RunScope
    from intermission.notebook import GraphView, Timeline

    spec = GraphSpec("fifty")
    spec.add_start().link_add("n0")
    for i in range(50):
        node = spec.add_exclusive(f"n{i}") if i % 5 == 0 else spec.add_activity(f"n{i}")
        nxt = f"n{i + 1}" if i + 1 < 50 else END
        if i % 5 == 0 and i + 2 < 50:
            node.link_add(f"n{i + 2}", when=lambda c: False).link_add(nxt)
        else:
            node.link_add(nxt)
    spec.add_end()
    view = GraphView(spec)
    t = statistics.median(timed(lambda: view._repr_mimebundle_(), 1) for _ in range(7))
    row(
        "render a 50-node graph (SVG via dot)",
        f"{t * 1e3:.0f} ms",
        "",
        verdict(t <= 0.15) + " (≤ 150 ms)",
    )

    s = InMemoryAgentSession("tl", max_events=10_000)
    scope = RunScope("run-1", "agent", s, FakeClock())
    for i in range(10_000):
        scope.emit(NodeStartEvent, graph_id="g", node_id=f"n{i % 50}", node_kind="activity")
    paged = statistics.median(timed(lambda: Timeline(s).html(), 1) for _ in range(5))
    full = statistics.median(timed(lambda: Timeline(s, max_events=0).html(), 1) for _ in range(3))
    row("render a 10,000-event timeline (paged, last 500)", f"{paged * 1e3:.0f} ms", "",
        verdict(paged <= 1.0) + " (≤ 1 s)")  # fmt: skip
    row("render a 10,000-event timeline (all rows)", f"{full * 1e3:.0f} ms")
