"""Tracing on, spans to memory: the ``traced`` fixture (``traced.spans()`` as plain data)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests._helpers import need_module
from tests.otel._spans import span_data


class Traced:
    def __init__(self, exporter: Any, provider: Any) -> None:
        self.exporter = exporter
        self.provider = provider

    def spans(self) -> list[dict[str, Any]]:
        return [span_data(s) for s in self.exporter.get_finished_spans()]

    def clear(self) -> None:
        self.exporter.clear()


def provider() -> tuple[Any, Any]:
    need_module("opentelemetry.sdk", "tracing tests need the otel extra (opentelemetry-sdk)")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp, exporter


@pytest.fixture
def traced(request: pytest.FixtureRequest) -> Iterator[Traced]:
    """Tracing on for the test (``@pytest.mark.otel(capture_content=True, …)`` sets options)."""
    import intermission.otel as otel

    tp, exporter = provider()
    mark = request.node.get_closest_marker("otel")
    options = dict(mark.kwargs) if mark is not None else {}
    # (node spans on: these tests follow graphs node by node; test_node_spans.py: off)
    otel.instrument(tp, **{"capture_content": False, "experimental": False,
                           "node_spans": True, **options})  # fmt: skip
    try:
        yield Traced(exporter, tp)
    finally:
        otel.uninstrument()
        tp.shutdown()
