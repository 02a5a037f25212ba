"""Spans as plain data, to compare in tests and across processes: the SDK's finished spans
(in-memory exporter) or JSON lines written by another process."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def span_data(span: Any) -> dict[str, Any]:
    """One finished SDK span as JSON-ready data."""
    ctx = span.get_span_context()
    return {
        "name": span.name,
        "trace": format(ctx.trace_id, "032x"),
        "span": format(ctx.span_id, "016x"),
        "parent": format(span.parent.span_id, "016x") if span.parent is not None else None,
        "kind": span.kind.name,
        "status": span.status.status_code.name,
        "attributes": {k: list(v) if isinstance(v, tuple) else v
                       for k, v in (span.attributes or {}).items()},
        "events": [
            {"name": e.name, "attributes": {k: list(v) if isinstance(v, tuple) else v
                                            for k, v in (e.attributes or {}).items()}}
            for e in span.events
        ],
        "links": [
            {"trace": format(link.context.trace_id, "032x"),
             "span": format(link.context.span_id, "016x"),
             "attributes": dict(link.attributes or {})}
            for link in span.links
        ],
        "start": span.start_time,
        "end": span.end_time,
    }  # fmt: skip


class JsonLinesExporter:
    """A span exporter that appends each span to a file as it ends (a process that is
    killed afterwards has written what ended before)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        with self.path.open("a") as out:
            for span in spans:
                out.write(json.dumps(span_data(span)) + "\n")
            out.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def read_spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


def one(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = named(spans, name)
    assert len(found) == 1, [s["name"] for s in spans]
    return found[0]


def children(spans: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in spans if s["parent"] == parent["span"] and s["trace"] == parent["trace"]]


def events(span: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [e["attributes"] for e in span["events"] if e["name"] == name]
