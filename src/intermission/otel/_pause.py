"""The pause and the resume: the span context a request ended with, kept in the session
(``session.meta["otel"]``, saved with it), and the link a later request makes to it."""

from __future__ import annotations

import os
import re
from typing import Any

from opentelemetry.trace import Link, Span, SpanContext, TraceFlags

from . import attributes as A

__all__ = ["KEY", "VERSION", "link_to", "pause_record", "read_record", "write_record"]

_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")

KEY = "otel"
"""The session's meta entry tracing keeps."""
VERSION = 1


def read_record(session: Any) -> dict[str, Any] | None:
    """The record the session's last traced request left, when it is one we can read."""
    meta = getattr(session, "meta", None)
    record = meta.get(KEY) if isinstance(meta, dict) else None
    if not isinstance(record, dict) or record.get("v") != VERSION:
        return None  # (a record of another version: written by a newer intermission)
    trace, span = record.get("trace"), record.get("span")
    # (exactly the hex a span context carries: an id out of range fails an exporter's
    # whole batch, other sessions' spans with it)
    if not isinstance(trace, str) or not _TRACE_ID.fullmatch(trace) or not int(trace, 16):
        return None
    if not isinstance(span, str) or not _SPAN_ID.fullmatch(span) or not int(span, 16):
        return None
    return record


def write_record(session: Any, root: Span, status: str, pause_id: str | None) -> None:
    """Keep ``root``'s context with the session: the next request links to it."""
    meta = getattr(session, "meta", None)
    ctx = root.get_span_context()
    if not isinstance(meta, dict) or not ctx.is_valid:
        return
    record: dict[str, Any] = {
        "v": VERSION,
        "trace": format(ctx.trace_id, "032x"),
        "span": format(ctx.span_id, "016x"),
        "flags": int(ctx.trace_flags),
        "session": session.session_id,
        "at": float(session.clock.now_ms()),
        "status": status,
    }
    if pause_id is not None:
        record["pause"] = pause_id
    meta[KEY] = record  # (a new dict each time: snapshots and forks may share the old one)


def link_to(record: dict[str, Any], kind: str) -> Link:
    """A link to the span ``record`` names (``kind``: resume or fork)."""
    flags = record.get("flags")
    context = SpanContext(
        trace_id=int(record["trace"], 16),
        span_id=int(record["span"], 16),
        is_remote=True,
        trace_flags=TraceFlags(flags if isinstance(flags, int) and 0 <= flags < 256 else 1),
    )
    attrs: dict[str, Any] = {A.LINK_TYPE: kind}
    if isinstance(record.get("pause"), str):
        attrs[A.PAUSE_ID] = record["pause"]
    return Link(context, attrs)


def new_pause_id() -> str:
    """A pause's id: minted here, never taken from a model or a client."""
    return "pause-" + os.urandom(8).hex()


def pause_record(session: Any) -> tuple[dict[str, Any], list[str]]:
    """The pause event's attributes and the open interrupts' call ids."""
    hitl = getattr(session, "hitl", None)
    decided = getattr(hitl, "decisions", None) or {}
    tasks = [t for t in (getattr(hitl, "tasks", None) or ()) if t.call_uuid not in decided]
    interrupts = [t.call_uuid for t in tasks]
    attrs: dict[str, Any] = {
        A.PAUSE_INTERRUPTS: interrupts,
        A.PAUSE_TOOLS: [t.tool_name for t in tasks],
    }
    reason = getattr(session, "pending_reason", None)
    if isinstance(reason, str):
        attrs[A.PAUSE_REASON] = reason
    return attrs, interrupts


def checkpoint_id(session: Any) -> str | None:
    """``session-id#index`` of the session's newest checkpoint (None: it keeps none)."""
    history = getattr(session, "_history", None)  # (its marks: no state is rebuilt)
    marks = getattr(history, "marks", None)
    if not marks:
        return None
    return f"{session.session_id}#{history.first + len(marks) - 1}"  # type: ignore[union-attr]
