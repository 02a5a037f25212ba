"""Compare: sessions side by side — graph paths with their differences, timelines aligned
where they part, final answers, effects (R45). A display object (text/plain and HTML), so
it reads the same in nbval and on GitHub's notebook viewer."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from itertools import zip_longest
from typing import Any

from .._text import visible
from ..core.ir import GraphIR, NodeIR, extract
from ..core.render_text import HIGHLIGHT, to_dot, to_text
from ..errors import UsageError
from ..hitl.graph import ApprovalKeys
from ._html import CSS, esc
from .graph_view import svg_of
from .timeline import _BADGE, _detail, effect_label, ledger_state

__all__ = ["Compare"]

Row = tuple[str, list[str], bool]
"""``(what, value per session, differs)``."""


def _answer(session: Any) -> str:
    for event in reversed(list(session.events)):
        if event.kind in ("run_end", "team_end") and event.agent == session.agent:
            return str(event.content)
    return ""


WIDTH = 100
"""Plain text fits this many columns (a terminal, a notebook's text output)."""


_SHOWN_ELSEWHERE = {ApprovalKeys().decision, ApprovalKeys().time, ApprovalKeys().by}
"""The decision has its own row (who made it too); when it was made always differs and
says nothing."""


def _context_differences(sessions: Sequence[Any]) -> list[tuple[str, list[str]]]:
    """The context keys whose values differ between the sessions, each value as short
    JSON (``—`` where a session has no such key)."""
    datas = [dict(getattr(s.context, "data", {})) for s in sessions]
    out = []
    for key in sorted({k for d in datas for k in d} - _SHOWN_ELSEWHERE):
        shown = [
            "—" if key not in d else json.dumps(d[key], ensure_ascii=False, default=str)
            for d in datas
        ]
        if len(set(shown)) > 1:
            out.append((key, shown))
    return out


def _forked_at(session: Any, default: int) -> int:
    """How many events a fork's log had at its fork point (``default`` for a session that
    is not a fork, or no longer keeps that checkpoint)."""
    parent = getattr(session, "parent", None)
    if parent is None:
        return default
    found = [cp.events for cp in session.history if cp.index == parent[1]]
    return found[0] if found else default


def _effect(entry: Any, session: Any) -> str:
    return "—" if entry is None else ledger_state(entry, session.session_id)


class Compare:
    """``Compare(agent, a, b, ...)``: what each session did, side by side. Rows that differ
    are highlighted; the timelines share the events they have in common (up to the fork
    point) and then run in parallel columns."""

    def __init__(self, agent: Any, *sessions: Any, names: Sequence[str] | None = None) -> None:
        if len(sessions) < 2:
            raise UsageError("Compare takes an agent and two or more sessions")
        for s in sessions:
            if not all(hasattr(s, a) for a in ("session_id", "events", "context", "ledger")):
                raise UsageError(f"Compare takes sessions, not {type(s).__name__}")
        self.agent = agent
        self.sessions = list(sessions)
        self.names = list(names) if names is not None else [s.session_id for s in sessions]
        if len(self.names) != len(self.sessions) or not all(isinstance(n, str) for n in self.names):
            raise UsageError("names: one name (text) per session")

    # -- the comparison as data --------------------------------------------------------
    @property
    def shared_events(self) -> int:
        """How many events the sessions share: the history before the fork point (the
        checkpoint a fork was taken at; for sessions that are not forks, the events they
        have in common from the start)."""
        logs = [list(s.events) for s in self.sessions]
        common = 0
        for column in zip(*logs, strict=False):
            first = column[0]
            if any((e.seq, e.kind) != (first.seq, first.kind) for e in column[1:]):
                break
            common += 1
        return min([common, *(_forked_at(s, common) for s in self.sessions)])

    def graphs(self) -> list[GraphIR]:
        """Each session's graph state, nodes and edges that differ between them marked
        (``highlight``); empty for an agent without a graph."""
        if not hasattr(self.agent, "spec"):
            return []
        irs = [extract(self.agent, s) for s in self.sessions]

        def node_key(n: NodeIR) -> tuple[str, int]:
            return (n.state, n.visits)

        differ = {
            n.id for column in zip(*(ir.nodes for ir in irs), strict=True)
            for n in column if len({node_key(m) for m in column}) > 1
        }  # fmt: skip
        edges_differ = {
            (e.source, e.target) for column in zip(*(ir.edges for ir in irs), strict=True)
            for e in column if len({bool(m.taken) for m in column}) > 1
        }  # fmt: skip
        return [
            replace(
                ir,
                nodes=tuple(replace(n, highlight=n.id in differ) for n in ir.nodes),
                edges=tuple(
                    replace(e, highlight=bool(e.taken) and (e.source, e.target) in edges_differ)
                    for e in ir.edges
                ),
            )
            for ir in irs
        ]

    def rows(self) -> list[Row]:
        """``(what, value per session, differs)``: status, answer, decision, the nodes of
        the graph, effects, tool calls a dry run did not run."""
        return self._rows(self.graphs())

    def _rows(self, graphs: list[GraphIR]) -> list[Row]:
        out: list[Row] = []

        def add(what: str, values: list[str]) -> None:
            out.append((what, values, len(set(values)) > 1))

        add("status", [s.status for s in self.sessions])
        add("answer", [_answer(s) for s in self.sessions])
        add("decision", [str(s.context.get("approval.decision") or "—") for s in self.sessions])
        for key, values in _context_differences(self.sessions):
            add(f"context {key}", values)
        for column in zip(*(ir.nodes for ir in graphs), strict=True):
            add(
                f"node {column[0].id}",
                [n.state.replace("_", " ") + (f" ×{n.visits}" if n.visits > 1 else "")
                 for n in column],
            )  # fmt: skip
        keys = sorted({k for s in self.sessions for k in s.ledger})
        for key in keys:
            effects = [_effect(s.ledger.get(key), s) for s in self.sessions]
            add(f"effect {effect_label(key)} (family ledger)", effects)
        dry = [
            sum(e.kind == "tool_call_end" and e.error == "dry_run" for e in s.events)
            for s in self.sessions
        ]
        add("tool calls not run (dry run)", [str(n) for n in dry])
        return out

    # -- display -----------------------------------------------------------------------
    def _gather(self) -> tuple[list[GraphIR], list[Row], int]:
        """What both forms show, worked out once per display."""
        graphs = self.graphs()
        return graphs, self._rows(graphs), self.shared_events

    def text(self) -> str:
        """The comparison as plain text (``*`` marks the rows that differ)."""
        _, rows, shared = self._gather()
        return self._text(rows, shared)

    def html(self) -> str:
        """The comparison as HTML (graphs, a table of differences, aligned timelines)."""
        return self._html(*self._gather())

    def _text(self, rows: list[Row], shared: int) -> str:
        cut = 38

        def cell(value: str) -> str:
            value = visible(value)  # model text: no raw ESC or CR reaches a terminal or log
            return value if len(value) <= cut else value[: cut - 1] + "…"

        first = max(len(cell(what)) for what, _, _ in rows) + 2
        widths = [
            max([len(cell(name))] + [len(cell(values[i])) for _, values, _ in rows]) + 2
            for i, name in enumerate(self.names)
        ]
        head = " " * (first + 2) + "".join(
            cell(n).ljust(wd) for n, wd in zip(self.names, widths, strict=True)
        )
        lines = [head]
        for what, values, differs in rows:
            cells = "".join(cell(v).ljust(wd) for v, wd in zip(values, widths, strict=True))
            lines.append(f"{'*' if differs else ' '} {cell(what).ljust(first)}{cells}")
        lines.append(f"  {shared} events in common (before the fork point), then apart")
        table = [line.rstrip() for line in lines]
        if max(len(line) for line in table) <= WIDTH:
            return "\n".join(table)
        return self._blocks(rows, shared)

    def _blocks(self, rows: list[Row], shared: int) -> str:
        """The plain text when the table is wider than WIDTH columns: a row a block, one
        line when every session agrees, else one line per session."""
        names = [visible(n) for n in self.names]  # model text: escaped, as in the table
        pad = max(len(n) for n in names)

        def fit(line: str) -> str:
            return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"

        lines = []
        for what, values, differs in rows:
            if not differs:
                lines.append(fit(f"  {visible(what)}: {visible(values[0])} (all)"))
                continue
            lines.append(fit(f"* {visible(what)}"))
            for name, value in zip(names, values, strict=True):
                lines.append(fit(f"      {name.ljust(pad)}  {visible(value)}"))
        lines.append(f"  {shared} events in common (before the fork point), then apart")
        return "\n".join(line.rstrip() for line in lines)

    def _html(self, graph_irs: list[GraphIR], rows: list[Row], shared: int) -> str:
        heads = "".join(f"<th>{esc(n)}</th>" for n in self.names)
        body = "".join(
            f"<tr class='{'im-diff' if differs else ''}'><td>{esc(what)}</td>"
            + "".join(f"<td>{esc(v)}</td>" for v in values)
            + "</tr>"
            for what, values, differs in rows
        )
        parts = [CSS, "<div class='im-compare'>"]
        graphs = "".join(  # (none for an agent without a graph: a ReAct agent)
            f"<div class='im-cmp-graph'><b>{esc(name)}</b>{_svg(ir)}</div>"
            for name, ir in zip(self.names, graph_irs, strict=True)
        ) if graph_irs else ""
        if graphs:
            parts.append(
                f"<p>Nodes and paths that differ are outlined in <b style='color:{HIGHLIGHT}'>"
                f"magenta</b>.</p><div class='im-cmp-graphs'>{graphs}</div>"
            )
        parts.append(f"<table><tr><th>what</th>{heads}</tr>{body}</table>")
        parts.append(self._timelines(shared))
        parts.append("</div>")
        return "".join(parts)

    def _timelines(self, shared: int) -> str:
        logs = [
            [e for e in list(s.events)[shared:] if e.kind != "reason_delta" or e.final]
            for s in self.sessions
        ]  # (streamed text chunks: their text is in the ReasonEnd row)
        t0 = next((s.events[0].ts for s in self.sessions if len(s.events)), 0.0)
        head = "".join(f"<th>{esc(n)}</th>" for n in self.names)
        rows = [
            f"<tr><td colspan='{len(self.sessions)}'><i>{shared} events in common (the "
            "history before the fork point)</i></td></tr>"
        ]
        for column in zip_longest(*logs):
            cells = "".join(
                "<td></td>" if e is None else f"<td>{_cell(e, t0)}</td>" for e in column
            )
            rows.append(f"<tr>{cells}</tr>")
        return f"<table><tr>{head}</tr>{''.join(rows)}</table>"

    def _repr_mimebundle_(
        self, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None
    ) -> dict[str, str]:
        graphs, rows, shared = self._gather()
        html = self._html(graphs, rows, shared)
        return {"text/plain": self._text(rows, shared), "text/html": html}

    def __repr__(self) -> str:
        return f"<Compare {visible(', '.join(self.names))}>"


def _svg(ir: GraphIR) -> str:
    dot = to_dot(ir, legend=False)
    svg = svg_of(dot)
    if svg is None:
        return f"<pre>{esc(to_text(ir))}</pre>"
    return f"<div class='im-graph-card'>{svg}</div>"


def _cell(event: Any, t0: float) -> str:
    name, css = _BADGE.get(event.kind, (event.kind, "im-run"))
    if event.kind == "tool_call_end" and event.error == "dry_run":
        name, css = "not run (dry run)", "im-skip"
    return (
        f"<span class='im-t'>+{event.ts - t0:.0f} ms</span> "
        f"<span class='im-badge {css}'>{esc(name)}</span> {_detail(event)}"
    )

