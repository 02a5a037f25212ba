"""Finished spans as a text tree, one trace after another: what a trace viewer would show,
in a notebook or a terminal. Ids and wall-clock times are left out (traces, pauses and
links are numbered in order), so the same run always prints the same tree."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import attributes as A

__all__ = ["text_tree"]


def _attrs(obj: Any) -> dict[str, Any]:
    return dict(getattr(obj, "attributes", None) or {})


def _ids(span: Any) -> tuple[int, int]:
    ctx = span.get_span_context()
    return ctx.trace_id, ctx.span_id


class _Names:
    """Numbers for what would otherwise be random ids."""

    def __init__(self) -> None:
        self.pauses: dict[str, int] = {}

    def pause(self, pause_id: Any) -> str:
        number = self.pauses.setdefault(str(pause_id), len(self.pauses) + 1)
        return f"pause #{number}"


def _what(span: Any, traces: dict[int, int], spans: dict[tuple[int, int], Any],
          names: _Names) -> str:  # fmt: skip
    a = _attrs(span)
    notes: list[str] = []
    op = a.get(A.OPERATION)
    if op in ("invoke_agent", "invoke_workflow"):
        notes.append(f"conversation {a.get(A.CONVERSATION)}")
        notes.append(str(a.get(A.REQUEST_KIND, "")))
        if A.PAUSE_WAIT in a:
            notes.append(f"waited {a[A.PAUSE_WAIT]:,.0f} ms")
    elif op == "execute_tool":
        notes.append("ran" if a.get(A.EXECUTED) else "not run")
        if A.VERDICT in a:
            done = {"approve": "approved", "reject": "rejected", "skip": "skipped"}
            notes.append(done.get(a[A.VERDICT], str(a[A.VERDICT])))
        if a.get(A.EDITED):
            notes.append("edited")
        if a.get(A.REPLAYED):
            notes.append("recorded result")
    elif op == "chat":
        reasons = a.get(A.FINISH_REASONS)
        if reasons:
            notes.append("→ " + ", ".join(reasons))
    elif A.NODE_ID in a and a.get(A.NODE_COMPLETED) is False:
        notes.append("stopped here")
    for link in getattr(span, "links", None) or ():
        key = (link.context.trace_id, link.context.span_id)
        target = spans.get(key)
        where = f"trace {traces[key[0]]}" if key[0] in traces else "another trace"
        kind = _attrs(link).get(A.LINK_TYPE, "link")
        name = f" {target.name}" if target is not None else ""
        notes.append(f"{kind}: linked to {where}{name}")
    status = getattr(getattr(span, "status", None), "status_code", None)
    if getattr(status, "name", "") == "ERROR":
        notes.append("error " + str(a.get(A.ERROR_TYPE, "")))
    shown = " · ".join(n for n in notes if n)
    return f"{span.name}  [{shown}]" if shown else span.name


def _event(event: Any, names: _Names) -> str:
    a = _attrs(event)
    name = event.name
    bits: list[str] = []
    if A.PAUSE_ID in a:
        bits.append(names.pause(a[A.PAUSE_ID]))
    if A.GEN_PAUSE_ID in a:
        bits.append(names.pause(a[A.GEN_PAUSE_ID]))
    if A.VERDICT in a:
        bits.append(str(a[A.VERDICT]))
    if A.REVIEWER in a:
        bits.append(f"by {a[A.REVIEWER]}" + (f" via {a[A.VIA]}" if A.VIA in a else ""))
    if A.REASON in a:
        bits.append(f"“{a[A.REASON]}”")
    if A.PAUSE_TOOLS in a:
        bits.append("waits for " + ", ".join(a[A.PAUSE_TOOLS]))
    if A.RESOLUTION in a:
        bits.append(str(a[A.RESOLUTION]))
    return f"• {name}" + (f"  ({'; '.join(bits)})" if bits else "")


def text_tree(spans: Iterable[Any]) -> str:
    """The spans (an SDK exporter's ``ReadableSpan`` objects) as an indented tree per
    trace, oldest trace first; span events are the lines marked ``•``."""
    spans = sorted(spans, key=lambda s: (s.start_time or 0, s.end_time or 0))
    by_id = {_ids(s): s for s in spans}
    traces: dict[int, int] = {}
    for s in spans:
        traces.setdefault(_ids(s)[0], len(traces) + 1)
    kids: dict[tuple[int, int], list[Any]] = {}
    roots: dict[int, list[Any]] = {}
    for s in spans:
        trace_id = _ids(s)[0]
        parent = (trace_id, s.parent.span_id) if s.parent is not None else None
        if parent is not None and parent in by_id:
            kids.setdefault(parent, []).append(s)
        else:
            roots.setdefault(trace_id, []).append(s)
    names = _Names()
    lines: list[str] = []

    def walk(span: Any, prefix: str, last: bool, top: bool) -> None:
        head = "" if top else prefix + ("└─ " if last else "├─ ")
        lines.append(head + _what(span, traces, by_id, names))
        inner = prefix if top else prefix + ("   " if last else "│  ")
        children = kids.get(_ids(span), [])
        for event in getattr(span, "events", None) or ():
            lines.append(inner + ("│  " if children else "   ") + _event(event, names))
        for i, child in enumerate(children):
            walk(child, inner, i == len(children) - 1, False)

    for trace_id, number in traces.items():
        lines.append(f"trace {number}")
        for root in roots.get(trace_id, []):
            walk(root, "  ", True, False)
    return "\n".join(lines)
