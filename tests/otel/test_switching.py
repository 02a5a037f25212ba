"""Tracing switched off or on again while a request is in flight: the request is followed
to its end (its pause still recorded), and nothing of it stays current in the context it
ran in — a later span, of this session or any other, never nests under a span that ended."""

from __future__ import annotations

from typing import Any

from tests.otel._spans import named, one

import intermission.otel as otel
from intermission import (
    END,
    FlowEngine,
    GraphSpec,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    tool,
)
from intermission.core import listeners


def _gate_graph(switch: Any) -> GraphSpec:
    def gate(ctx: Any, node: Any) -> None:
        switch()
        ctx.session.pending(True, "needs approval")

    spec = GraphSpec("switch")
    spec.add_start().link_add("gate")
    spec.add_activity("gate").task(gate).link_add(END)
    spec.add_end()
    return spec


def _no_current_span() -> bool:
    from opentelemetry import trace

    return not trace.get_current_span().get_span_context().is_valid


def test_uninstrument_mid_request_follows_it_to_its_end_and_leaves_nothing_current(
    traced: Any,
) -> None:
    s = InMemoryAgentSession.of("off-1")
    FlowEngine().eval(_gate_graph(otel.uninstrument), s.context)  # (runs in this context)
    assert _no_current_span()
    assert not otel.is_instrumented() and not listeners.LISTENERS
    spans = traced.spans()
    root = one(spans, "invoke_workflow switch")
    assert one(spans, "node gate")["parent"] == root["span"]
    assert [e["name"] for e in root["events"]] == ["intermission.pause"]
    assert s.meta["otel"]["span"] == root["span"]  # the resume can still link to it
    # later work in this thread is no child of the ended request
    with traced.provider.get_tracer("user").start_as_current_span("later"):
        pass
    assert one(traced.spans(), "later")["parent"] is None
    traced.clear()
    agent = ReActAgent.of(ScriptedModel(["hi"])).name("other").build()
    agent.prompt("x").session(InMemoryAgentSession.of("off-2")).call()
    assert traced.spans() == []  # off: nothing new is traced


def test_instrument_again_mid_request_takes_the_request_over(traced: Any) -> None:
    from tests.otel.conftest import provider

    tp2, exporter2 = provider()
    s = InMemoryAgentSession.of("again-1")
    FlowEngine().eval(_gate_graph(lambda: otel.instrument(tp2)), s.context)
    assert _no_current_span()
    assert listeners.LISTENERS == [otel.active()]  # one listener, the new one
    root = one(traced.spans(), "invoke_workflow switch")  # begun by the first, ended
    assert root["events"][0]["name"] == "intermission.pause"
    assert s.meta["otel"]["span"] == root["span"]

    @tool
    def look(city: str) -> str:
        """Look."""
        return city

    script = [[ToolCall("look", {"city": "Oslo"}, "c1")], "done"]
    agent = ReActAgent.of(ScriptedModel(script)).name("next").tools(look).build()
    agent.prompt("x").session(InMemoryAgentSession.of("again-2")).call()
    later = [s for s in exporter2.get_finished_spans() if s.name == "invoke_agent next"]
    assert len(later) == 1 and later[0].parent is None  # never under the first request
    assert not named(traced.spans(), "invoke_agent next")
    tp2.shutdown()
