"""Tracing switched on from the environment, for processes that do not call
:func:`~intermission.otel.instrument` themselves (``python -m intermission``: the CLI's
decisions and resumes, ``serve``).

``INTERMISSION_OTEL=1`` turns it on. Spans go to the tracer provider the process already
has (``opentelemetry-instrument`` sets one up); when it has none, to one made here that
exports over OTLP/HTTP where the standard variables say (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``;
the ``otlp`` extra) and flushes when the process exits.
"""

from __future__ import annotations

import os

__all__ = ["configure_from_env", "wanted"]


def wanted() -> bool:
    """True when ``INTERMISSION_OTEL`` asks for tracing."""
    return os.environ.get("INTERMISSION_OTEL", "").strip().lower() in ("1", "true", "yes", "on")


def configure_from_env() -> bool:
    """Switch tracing on when ``INTERMISSION_OTEL`` asks for it; True when it is on."""
    if not wanted():
        return False
    from .._compat import require
    from . import instrument

    trace = require("opentelemetry.trace", "otel")
    provider = trace.get_tracer_provider()
    if not hasattr(provider, "add_span_processor"):  # (the API's placeholder: nobody set one)
        sdk = require("opentelemetry.sdk.trace", "otel")
        export = require("opentelemetry.sdk.trace.export", "otel")
        otlp = require("opentelemetry.exporter.otlp.proto.http.trace_exporter", "otlp")
        provider = sdk.TracerProvider()
        provider.add_span_processor(export.BatchSpanProcessor(otlp.OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
    instrument(provider)
    return True
