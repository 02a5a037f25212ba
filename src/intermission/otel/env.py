"""Tracing switched on from the environment, for processes that do not call
:func:`~intermission.otel.instrument` themselves (``python -m intermission``: the CLI's
decisions and resumes, ``serve``).

``INTERMISSION_OTEL=1`` turns it on. Spans go to the tracer provider the process already
has (``opentelemetry-instrument`` sets one up); when it has none, to one made here that
exports over OTLP/HTTP where the standard variables say (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``;
the ``otlp`` extra) and flushes when the process exits (``serve`` on SIGTERM too). A
process gives that flush :data:`EXIT_TIMEOUT_S` at most: a collector that is down,
unreachable or silent never holds a command that took 0.3 s (or a stopping server) for
the exporter's default 10 s of retries.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

__all__ = ["EXIT_TIMEOUT_S", "EXPORT_TIMEOUT_S", "configure_from_env", "wanted"]

EXIT_TIMEOUT_S = 2.0
"""The longest a one-shot command waits at exit for its spans to be exported."""
EXPORT_TIMEOUT_S = 1.5
"""A one-shot command's exporter timeout (each export, retries included): less than
:data:`EXIT_TIMEOUT_S`, so the export gives up on its own before the exit stops waiting.
A lower ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``/``OTEL_EXPORTER_OTLP_TIMEOUT`` wins."""


def wanted() -> bool:
    """True when ``INTERMISSION_OTEL`` asks for tracing."""
    return os.environ.get("INTERMISSION_OTEL", "").strip().lower() in ("1", "true", "yes", "on")


def configure_from_env(*, one_shot: bool = False) -> bool:
    """Switch tracing on when ``INTERMISSION_OTEL`` asks for it; True when it is on.

    ``one_shot``: the process runs one short command (every CLI command but ``serve``):
    its exporter gives up after :data:`EXPORT_TIMEOUT_S`. A long-running process keeps the
    exporter's defaults. Either's exit waits for the spans :data:`EXIT_TIMEOUT_S` at most.
    """
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
        timeout = _export_timeout() if one_shot else None
        provider = sdk.TracerProvider(shutdown_on_exit=False)
        exporter = otlp.OTLPSpanExporter(timeout=timeout)
        provider.add_span_processor(export.BatchSpanProcessor(exporter))
        # (``serve`` too: a dead collector held its exit after SIGTERM for the exporter's
        # 10 s of retries)
        atexit.register(_shut_down_within, provider, EXIT_TIMEOUT_S)
        trace.set_tracer_provider(provider)
    instrument(provider)
    return True


def _export_timeout() -> float:
    """:data:`EXPORT_TIMEOUT_S`, or less when the OTLP variables ask for less (seconds)."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        raw = os.environ.get(name, "").strip()
        if raw:
            try:
                asked = float(raw)
            except ValueError:
                return EXPORT_TIMEOUT_S
            return min(asked, EXPORT_TIMEOUT_S) if asked > 0 else EXPORT_TIMEOUT_S
    return EXPORT_TIMEOUT_S


def _shut_down_within(provider: Any, seconds: float) -> None:
    """Flush and shut ``provider`` down, waiting ``seconds`` at most: the exporter's own
    timeout ends a refused or silent export first; this bounds what it does not cover (a
    name lookup that hangs). A daemon thread: the process never waits for it after this."""
    worker = threading.Thread(target=provider.shutdown, name="intermission-otel-exit", daemon=True)
    worker.start()
    worker.join(seconds)
