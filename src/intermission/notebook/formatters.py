"""``%load_ext intermission.notebook``: rich display for core objects (R38). The core types
carry no ``_repr_*``; this registers formatters for them."""

from __future__ import annotations

from typing import Any

from ..agents.request import AgentResponse
from ..agents.team import TeamAgent
from ..core.events_log import EventLog
from ..core.graph import Graph
from ..core.session import InMemoryAgentSession
from ..core.spec import GraphSpec
from ._html import esc
from .graph_view import GraphView
from .timeline import Timeline, render_timeline

__all__ = ["load_ipython_extension", "unload_ipython_extension"]


def _graph(obj: Any, include: Any = None, exclude: Any = None) -> dict[str, str]:
    return GraphView(obj)._repr_mimebundle_()


def _session(obj: InMemoryAgentSession) -> str:
    state = f"pending: {esc(obj.pending_reason)}" if obj.is_pending else esc(obj.status)
    return f"<div><b>session {esc(obj.session_id)}</b> · {state}</div>" + Timeline(obj).html()


def _response(obj: AgentResponse) -> str:
    flags = " · abnormal" * obj.is_abnormal + " · pending" * obj.is_pending
    return f"<div><b>response</b>{flags}<pre>{esc(obj.content)}</pre></div>"


def _events(obj: EventLog) -> str:
    return render_timeline(list(obj))


def load_ipython_extension(ipython: Any) -> None:
    """Register the formatters (idempotent)."""
    formatters = ipython.display_formatter
    mime = formatters.mimebundle_formatter
    for cls in (GraphSpec, Graph, TeamAgent):
        mime.for_type(cls, _graph)
    html = formatters.formatters["text/html"]
    html.for_type(InMemoryAgentSession, _session)
    html.for_type(AgentResponse, _response)
    html.for_type(EventLog, _events)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the formatters."""
    formatters = ipython.display_formatter
    for cls in (GraphSpec, Graph, TeamAgent):
        formatters.mimebundle_formatter.type_printers.pop(cls, None)
    for kind in (InMemoryAgentSession, AgentResponse, EventLog):
        formatters.formatters["text/html"].type_printers.pop(kind, None)
