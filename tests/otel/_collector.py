"""A hand-written OTLP/HTTP trace receiver on 127.0.0.1 (``POST /v1/traces``, protobuf, as
the SDK's exporter sends it), keeping the spans it received as plain data; and the two
collectors an exporter must not wait for: a port nobody listens on, and one that accepts
the connection and never answers."""

from __future__ import annotations

import gzip
import socket
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind is not None else None


def _attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


class Collector:
    """Spans received, as ``{"name", "trace", "span", "parent", "attributes", "events"}``."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        received: list[dict[str, Any]] = []
        lock = threading.Lock()
        self._spans, self._lock = received, lock

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                with lock:
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            for span in scope.spans:
                                received.append({
                                    "name": span.name,
                                    "trace": span.trace_id.hex(),
                                    "span": span.span_id.hex(),
                                    "parent": span.parent_span_id.hex() or None,
                                    "attributes": _attrs(span.attributes),
                                    "events": [{"name": e.name, "attributes": _attrs(e.attributes)}
                                               for e in span.events],
                                })  # fmt: skip
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"

    def spans(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._spans)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def collector() -> Iterator[Collector]:
    found = Collector()
    try:
        yield found
    finally:
        found.close()


def dead_port() -> str:
    """An endpoint on a port nobody listens on (bound once, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/traces"


@contextmanager
def silent_collector() -> Iterator[str]:
    """An endpoint that accepts connections and never answers (a blackholed collector)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # the kernel accepts into the backlog; nobody ever reads or answers
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1/traces"
    finally:
        sock.close()
