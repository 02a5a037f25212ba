"""2e. What tracing costs: a node step (100-node linear graph, in memory) and a pause and a
claimed resume of the 3-node approval graph on SQLite, with ``intermission.otel`` on (the
OpenTelemetry SDK, a simple processor, an in-memory exporter) and off, interleaved in one
process. Off is the code path every untraced process runs: one falsy check per event."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from _shared import (
    Pool,
    approval_spec,
    claimed_resume,
    line_spec,
    median_rounds,
    row,
    timed,
    verdict,
    warm_wal,
)


def bench_otel(rounds: int, tmp: Path) -> None:
    print("\n2e. tracing on vs off (OpenTelemetry SDK, in-memory exporter)")
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError as exc:
        print("   the otel extra is not installed:", exc)
        return
    import intermission.otel as otel
    from intermission import FlowEngine, InMemoryAgentSession
    from intermission.stores import SQLiteStore

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def traced(fn: Callable[[], float], node_spans: bool = False) -> Callable[[], float]:
        def sample() -> float:
            otel.instrument(provider, node_spans=node_spans)
            try:
                return fn()
            finally:
                otel.uninstrument()
                exporter.clear()

        return sample

    n = 100
    line = line_spec(n)
    engine = FlowEngine()

    def node_run() -> None:
        session = InMemoryAgentSession.of("b")
        engine.eval(line, session.context)

    def steps() -> float:
        return timed(node_run, 20) / n

    med = median_rounds({"off": steps, "on": traced(steps),
                         "nodes": traced(steps, node_spans=True)}, rounds)  # fmt: skip
    off, on, nodes = med["off"] * 1e6, med["on"] * 1e6, med["nodes"] * 1e6
    row("node step: tracing on vs off", f"{on:.2f} µs", f"{on / off:.2f}× off ({off:.2f} µs)",
        f"target ≤ 1.5×: {verdict(on / off <= 1.5)}")  # fmt: skip
    row("node step: with node spans (asked for) vs off", f"{nodes:.2f} µs",
        f"{nodes / off:.2f}× off (a span per node)")

    graph = approval_spec()
    store = SQLiteStore(tmp / "otel.db")
    counter = iter(range(10**9))
    per = 40
    pools = {"off": Pool("o", counter, per), "on": Pool("t", counter, per)}

    def pause_one(sid: str) -> Any:
        s = InMemoryAgentSession.of(sid)
        engine.eval(graph, s.context)
        store.save(s)

    resume_one = claimed_resume(store, engine, graph)
    pauses = {"off": pools["off"].pause(pause_one), "on": traced(pools["on"].pause(pause_one))}
    resumes = {"off": pools["off"].resume(resume_one), "on": traced(pools["on"].resume(resume_one))}
    warm_wal(pauses["off"], tmp / "otel.db-wal")
    p = median_rounds(pauses, rounds)
    for _ in range(rounds + 2):  # sessions for every resume round (traced ones carry meta)
        pauses["off"]()
        pauses["on"]()
    r = median_rounds(resumes, rounds, warmup=0)
    for what, med in (("pause → parked", p), ("resume → done (claimed)", r)):
        off, on = med["off"] * 1e3, med["on"] * 1e3
        row(f"{what}: tracing on vs off", f"{on:.3f} ms", f"{on / off:.2f}× off ({off:.3f} ms)",
            f"target ≤ 1.2×: {verdict(on / off <= 1.2)}")  # fmt: skip
    store.close()
