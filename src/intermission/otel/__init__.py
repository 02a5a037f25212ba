"""Traces that cross the human pause: OpenTelemetry spans of what intermission does.

``instrument()`` makes every request of this process a trace that follows the OpenTelemetry
GenAI conventions — ``invoke_agent {agent}`` (``invoke_workflow {team}`` for a team or a
graph), ``chat {model}`` for each model call, ``execute_tool {tool}`` for each tool call,
graph nodes in between when asked (``node_spans=True``) — with ``gen_ai.conversation.id``
set to the session id. A pause ends the request's spans normally, with a pause record, and
keeps the ended span's context in the session (saved with it), so the resume, in any process
and however much later, starts a trace **linked** to the paused one. Decisions are span
events; a call a person rejected or skipped gets an ``execute_tool`` span marked not run; a
result returned from the ledger is never reported as run again. It listens to what the core
emits: the core never imports OpenTelemetry. Needs the ``otel`` extra (``pip install
'intermission[otel]'``).

Example:
    >>> from opentelemetry.sdk.trace import TracerProvider  # doctest: +SKIP
    >>> import intermission.otel
    >>> intermission.otel.instrument(TracerProvider())  # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .._compat import require
from .tree import text_tree

if TYPE_CHECKING:
    from ._tracer import Tracing

__all__ = ["active", "instrument", "is_instrumented", "server_run", "text_tree", "uninstrument"]

_ACTIVE: Tracing | None = None


def instrument(
    tracer_provider: Any = None,
    *,
    capture_content: bool | None = None,
    experimental: bool | None = None,
    node_spans: bool | None = None,
) -> None:
    """Trace every request of this process from now on (again: with the new settings).

    Args:
        tracer_provider: where spans go (default: OpenTelemetry's global provider).
        capture_content: also record messages, tool arguments and results (default: the
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` environment variable).
        experimental: also emit the provisional pause/resume events and attributes of the
            open GenAI proposal (``gen_ai.agent.paused`` …; default: whether
            ``OTEL_SEMCONV_STABILITY_OPT_IN`` contains ``gen_ai_latest_experimental``).
        node_spans: also a span for each graph node a request runs (default: whether
            ``INTERMISSION_OTEL_NODE_SPANS`` is set to 1/true/yes). Off, graph nodes cost
            the tracer nothing; the agent, model, tool and decision spans are the same.
    """
    global _ACTIVE
    from .._check import shown
    from ..errors import UsageError

    if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
        raise UsageError(
            "tracer_provider is an OpenTelemetry TracerProvider (or None for the global one), "
            f"not {shown(tracer_provider)}"
        )
    for name, given in (("capture_content", capture_content), ("experimental", experimental),
                        ("node_spans", node_spans)):  # fmt: skip
        if given is not None and not isinstance(given, bool):
            raise UsageError(f"{name} is True, False or None, not {shown(given)}")
    require("opentelemetry.trace", "otel")
    require("opentelemetry.context", "otel")
    from ..core import listeners
    from ._tracer import Tracing

    if capture_content is None:
        flag = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
        capture_content = flag.strip().lower() in ("1", "true", "yes")
    if experimental is None:
        opt_in = os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "")
        experimental = "gen_ai_latest_experimental" in {p.strip() for p in opt_in.split(",")}
    if node_spans is None:
        flag = os.environ.get("INTERMISSION_OTEL_NODE_SPANS", "")
        node_spans = flag.strip().lower() in ("1", "true", "yes")
    new = Tracing(tracer_provider, capture_content=capture_content, experimental=experimental,
                  node_spans=node_spans)  # fmt: skip
    for old in [item for item in listeners.LISTENERS if isinstance(item, Tracing)]:
        new.take_over(old)  # requests in flight go on, with the new settings
    _ACTIVE = new
    listeners.add(new)


def uninstrument() -> None:
    """Stop tracing: no new request is traced; requests in flight end their spans as they
    end (so nothing of theirs stays current in their caller's context)."""
    global _ACTIVE
    if _ACTIVE is not None:
        _ACTIVE.retire()
        _ACTIVE = None


def is_instrumented() -> bool:
    """True while :func:`instrument` is in effect."""
    return _ACTIVE is not None


def active() -> Tracing | None:
    """The tracing in effect (for the AG-UI server and the CLI), or None."""
    return _ACTIVE


def server_run(headers: Any, agent: str, thread_id: str, run_id: str) -> Any:
    """The span of an AG-UI run continuing the client's ``traceparent`` (see
    :class:`intermission.otel._agui.ServerRun`), or None while tracing is off."""
    if _ACTIVE is None:
        return None
    from ._agui import ServerRun

    return ServerRun(_ACTIVE.tracer, headers, agent, thread_id, run_id)
