"""Dependency-free renderers of GraphIR: DOT source, mermaid and a plain-text outline."""

from __future__ import annotations

from .._text import visible
from .ir import GraphIR, NodeIR

__all__ = ["STYLE", "to_dot", "to_mermaid", "to_text"]

# kind → (shape, fill) and state → (fill, border, pen width): one palette for every renderer
SHAPES = {
    "start": "circle",
    "end": "doublecircle",
    "activity": "box",
    "agent": "component",
    "exclusive": "diamond",
    "parallel": "diamond",
    "inclusive": "diamond",
    "loop": "hexagon",
    "subgraph": "box3d",
}
STYLE = {
    "not_reached": ("#ffffff", "#9e9e9e", "1"),
    "visited": ("#e8f5e9", "#43a047", "1.5"),
    "done": ("#c8e6c9", "#2e7d32", "2"),
    "current": ("#e3f2fd", "#1e88e5", "2.5"),
    "pending": ("#fff3e0", "#fb8c00", "3"),
    "failed": ("#ffebee", "#e53935", "3"),
}
HIGHLIGHT = "#d81b60"
"""The colour of what differs between compared sessions."""
GATEWAY_MARK = {"exclusive": "×", "parallel": "+", "inclusive": "○"}


def _q(text: str) -> str:
    r"""A DOT double-quoted string: control characters shown as escapes (a raw ``\r`` or
    NUL would break the file or the layout), then backslashes, quotes and newlines escaped
    (a backslash would otherwise start DOT's own ``\l``/``\r`` justification)."""
    shown = visible(text, keep_newlines=True)
    return '"' + shown.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def node_label(node: NodeIR) -> str:
    """The text shown in a node (label, gateway mark, visit count, pending note)."""
    label = node.label
    if node.kind in GATEWAY_MARK:
        label = f"{GATEWAY_MARK[node.kind]} {label}"
    if node.visits > 1:
        label += f" (×{node.visits})"
    if node.note:
        label += f"\nwaiting: {node.note}"
    return label


def _legend() -> list[str]:
    # one plaintext node holding an HTML-like table, one state a row: narrow, so the column
    # it shares with the start node (rankdir=LR) stays narrow and the graph fits an output
    rows = "".join(
        f'<TR><TD BGCOLOR="{fill}" COLOR="{border}" BORDER="1">{state.replace("_", " ")}</TD></TR>'
        for state, (fill, border, _) in STYLE.items()
    )
    return [
        f'  legend [shape=plaintext, fontsize=12, label=<<TABLE BORDER="0" CELLSPACING="2">'
        f"{rows}</TABLE>>];"
    ]


def _wrap(label: str, width: int = 26) -> str:
    """Long lines of a node label broken at spaces: a wide node widens the whole graph,
    and a wide graph is scaled down until its text is too small to read."""
    out = []
    for line in label.split("\n"):
        words, current = line.split(" "), ""
        for word in words:
            if current and len(current) + 1 + len(word) > width:
                out.append(current)
                current = word
            else:
                current = f"{current} {word}" if current else word
        out.append(current)
    return "\n".join(out)


def to_dot(ir: GraphIR, legend: bool = True) -> str:
    """DOT source; node ids are the safe keys, names only appear in quoted labels."""
    lines = [
        f"digraph {_q(ir.id)} {{",
        "  rankdir=LR;",
        "  nodesep=0.3; ranksep=0.35;",
        '  node [fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=12];',
    ]
    if legend:
        lines += _legend()
    for n in ir.nodes:
        fill, border, width = STYLE[n.state]
        mark = f', peripheries=2, color="{HIGHLIGHT}"' if n.highlight else f', color="{border}"'
        lines.append(
            f"  {n.key} [label={_q(_wrap(node_label(n)))}, shape={SHAPES.get(n.kind, 'box')}, "
            f'style="filled,rounded", fillcolor="{fill}"{mark}, '
            f"penwidth={width}, tooltip={_q(n.id + ' · ' + n.state)}];"
        )
    for e in ir.edges:
        attrs = []
        if e.label:
            attrs.append(f"label={_q(e.label)}")
        if e.highlight:
            attrs.append(f'color="{HIGHLIGHT}", penwidth=3')
        else:
            attrs.append('color="#2e7d32", penwidth=2.5' if e.taken else 'color="#9e9e9e"')
        if e.default:
            attrs.append("style=dashed")
        lines.append(f"  {e.source} -> {e.target} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


_MERMAID_SAFE = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:!?'()-_/+*=@"
)


def _m(text: str) -> str:
    """A mermaid quoted label: every character its grammar could read as syntax (quotes,
    ``#`` entities, ``%%`` comments, brackets, ``<>``, control characters that end a line)
    written as a ``#code;`` entity; newlines as ``<br/>``."""
    out = []
    for line in visible(text, keep_newlines=True).split("\n"):
        out.append("".join(c if c in _MERMAID_SAFE or ord(c) > 0x7F else f"#{ord(c)};"
                           for c in line))  # fmt: skip
    return "<br/>".join(out)


def to_mermaid(ir: GraphIR) -> str:
    """Mermaid flowchart text (JupyterLab renders ``text/vnd.mermaid`` natively)."""
    open_close = {
        "start": ("((", "))"), "end": ("(((", ")))"), "exclusive": ("{", "}"),
        "parallel": ("{", "}"), "inclusive": ("{", "}"), "loop": ("{{", "}}"),
        "agent": ("[[", "]]"),
    }  # fmt: skip
    lines = ["flowchart LR"]
    for n in ir.nodes:
        a, b = open_close.get(n.kind, ("[", "]"))
        lines.append(f'  {n.key}{a}"{_m(node_label(n))}"{b}')
    for e in ir.edges:
        arrow = "==>" if e.taken else ("-.->" if e.default else "-->")
        label = f'|"{_m(e.label)}"|' if e.label else ""
        lines.append(f"  {e.source} {arrow}{label} {e.target}")
    for state, (fill, border, _) in STYLE.items():
        lines.append(f"  classDef {state} fill:{fill},stroke:{border}")
    lines.append(f"  classDef differs stroke:{HIGHLIGHT},stroke-width:4px")
    for n in ir.nodes:
        lines.append(f"  class {n.key} {n.state}")
    differs = [n.key for n in ir.nodes if n.highlight]
    if differs:
        lines.append(f"  class {','.join(differs)} differs")
    return "\n".join(lines) + "\n"


def to_text(ir: GraphIR) -> str:
    """A plain-text outline: one line per node with its state (control characters in
    ids and the pending reason shown as escapes, like the CLI: R42, R50)."""
    reason = f" — pending: {visible(ir.pending_reason)}" if ir.pending_reason else ""
    out = [f"graph {visible(ir.id)}{reason}"]
    for n in ir.nodes:
        out.append(
            f"{'*' if n.highlight else ' '} [{n.state}] {visible(n.id)} ({n.kind})"
            + (f" ×{n.visits}" if n.visits > 1 else "")
        )
    return "\n".join(out)
