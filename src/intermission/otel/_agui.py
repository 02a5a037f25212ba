"""W3C trace context on AG-UI runs: a client's ``traceparent`` continues into the server's
run, and the run's own trace context goes back on the response's ``traceparent`` header."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind

from . import attributes as A

__all__ = ["ServerRun"]


class ServerRun:
    """The ``POST /agents/{name}`` span of one AG-UI run (a SERVER span, child of the
    client's span when the request carried ``traceparent``); the run's spans nest under it."""

    def __init__(
        self, tracer: Any, headers: Mapping[str, str], agent: str, thread_id: str, run_id: str
    ) -> None:
        parent = propagate.extract(dict(headers))
        self.span = tracer.start_span(
            "POST /agents/{name}", context=parent, kind=SpanKind.SERVER,
            attributes={
                "http.request.method": "POST", "http.route": "/agents/{name}",
                A.AGENT_NAME: agent, A.CONVERSATION: thread_id, A.AGUI_RUN: run_id,
            },
        )  # fmt: skip
        self.context = trace.set_span_in_context(self.span, parent)
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=self.context)
        self.headers = {k: v for k, v in carrier.items() if k in ("traceparent", "tracestate")}
        """What the response carries: the run's trace context."""

    @contextmanager
    def entered(self) -> Iterator[None]:
        """Within: this span is current, so a run started here (its thread takes a copy of
        the context it starts in) runs under it."""
        token = otel_context.attach(self.context)
        try:
            yield
        finally:
            otel_context.detach(token)

    async def frames(self, frames: AsyncIterator[str]) -> AsyncIterator[str]:
        """``frames``, with the run started inside this span's context (the run's thread
        takes a copy of the context it starts in); the span ends with the response."""
        try:
            token = otel_context.attach(self.context)
            try:
                first = await frames.__anext__()
            except StopAsyncIteration:
                return
            finally:
                otel_context.detach(token)
            yield first
            async for frame in frames:
                yield frame
        finally:
            self.span.end()
