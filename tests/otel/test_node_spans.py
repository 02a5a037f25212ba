"""Node spans are asked for (``instrument(node_spans=True)`` or
``INTERMISSION_OTEL_NODE_SPANS=1``): without them a graph's request is traced by its
workflow, model, tool and decision spans and its nodes cost the tracer nothing (issue 42)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.otel._spans import one

from intermission import InMemoryAgentSession
from intermission.examples import build_change_graph


@pytest.mark.otel(node_spans=False)
def test_without_node_spans_a_graph_request_has_no_node_spans(traced: Any) -> None:
    s = InMemoryAgentSession.of("no-nodes")
    build_change_graph(change_id="n-1").prompt("change it").session(s).call()
    names = [x["name"] for x in traced.spans()]
    assert names and not [n for n in names if n.startswith("node ")], names
    root = one(traced.spans(), "invoke_workflow change")
    assert root["events"][0]["name"] == "intermission.pause"  # the pause is still traced


@pytest.mark.otel(node_spans=True)
def test_with_node_spans_each_node_is_a_span(traced: Any) -> None:
    s = InMemoryAgentSession.of("nodes")
    build_change_graph(change_id="n-2").prompt("change it").session(s).call()
    assert [x["name"] for x in traced.spans() if x["name"].startswith("node ")]


def test_the_environment_asks_for_node_spans(monkeypatch: Any) -> None:
    from tests.otel.conftest import provider

    import intermission.otel as otel

    tp, exporter = provider()
    monkeypatch.setenv("INTERMISSION_OTEL_NODE_SPANS", "1")
    otel.instrument(tp)
    try:
        assert otel.active().node_spans is True  # type: ignore[union-attr]
        build_change_graph(change_id="n-3").prompt("go").session(
            InMemoryAgentSession.of("env")).call()  # fmt: skip
    finally:
        otel.uninstrument()
        tp.shutdown()
    assert any(s.name.startswith("node ") for s in exporter.get_finished_spans())
    with pytest.raises(Exception, match="node_spans"):
        otel.instrument(tp, node_spans="yes")  # type: ignore[arg-type]


def test_a_listener_is_told_node_events_unless_it_says_it_wants_none() -> None:
    """The core builds a node event for a listener only if one wants it: a listener
    without ``wants_node_events`` is told of every event; one answering False is told of
    the others only, and the session's log holds the node events either way."""
    from intermission.core import listeners

    class Listener:
        def __init__(self, wants: bool | None) -> None:
            self.kinds: list[str] = []
            if wants is not None:
                self.wants_node_events = lambda session: wants

        def on_event(self, session: Any, event: Any) -> None:
            self.kinds.append(event.kind)

    for wants, told_nodes in ((None, True), (True, True), (False, False)):
        heard = Listener(wants)
        listeners.add(heard)  # type: ignore[arg-type]
        try:
            s = InMemoryAgentSession.of(f"l-{wants}")
            build_change_graph(change_id="l").prompt("go").session(s).call()
        finally:
            listeners.remove(heard)  # type: ignore[arg-type]
        assert ("node_start" in heard.kinds) is told_nodes, (wants, heard.kinds)
        assert "team_start" in heard.kinds  # (the others are told regardless)
        assert any(e.kind == "node_start" for e in s.events)  # (on record either way)
