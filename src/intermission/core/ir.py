"""GraphIR: a plain-data picture of a graph plus a session's live state (R33).

Renderers (DOT and mermaid text here, graphviz SVG in the notebook layer) only read this;
nothing here imports a drawing library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..errors import UsageError
from .graph import Graph
from .spec import GraphSpec

__all__ = ["EdgeIR", "GraphIR", "NodeIR", "NodeState", "check_drawable", "extract"]

NodeState = Literal["not_reached", "visited", "current", "pending", "failed", "done"]
"""not_reached: never entered · visited: entered and left · current: a branch stands here
(runs next) · pending: the session is parked here · failed: its task raised · done: the
end node, reached."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeIR:
    """A node and its state."""

    key: str
    """A safe, stable id (``n0``, ``n1`` … in definition order) for DOT and mermaid."""
    id: str
    label: str
    kind: str
    state: NodeState
    visits: int = 0
    note: str | None = None
    """The pending reason on a pending node."""
    highlight: bool = False
    """Marked for attention (Compare: this node's state differs between the sessions)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EdgeIR:
    """A link and whether the run took it."""

    source: str
    target: str
    label: str | None
    taken: int = 0
    default: bool = False
    body: bool = False
    highlight: bool = False
    """Marked for attention (Compare: taken in one session, not in another)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphIR:
    """What a renderer needs."""

    id: str
    title: str | None
    nodes: tuple[NodeIR, ...]
    edges: tuple[EdgeIR, ...]
    pending_reason: str | None = None
    status: str | None = None

    def node(self, node_id: str) -> NodeIR:
        """The node with this id."""
        return next(n for n in self.nodes if n.id == node_id)


def check_drawable(obj: Any) -> None:
    """Raise UsageError unless ``obj`` is a spec, a graph or a team (something with a
    graph): views call this when they are made, so the mistake points at that line."""
    if not isinstance(obj, (Graph, GraphSpec)) and not isinstance(
        getattr(obj, "spec", None), GraphSpec
    ):
        raise UsageError(
            f"cannot draw a {type(obj).__name__}: give a GraphSpec, Graph or TeamAgent"
        )


def _graph_of(obj: Any) -> Graph:
    check_drawable(obj)
    if isinstance(obj, Graph):
        return obj
    spec = obj if isinstance(obj, GraphSpec) else obj.spec
    built: Graph = spec.build()
    return built


def extract(obj: Any, session: Any = None) -> GraphIR:
    """The IR of a spec, graph or team, with the state ``session`` recorded for it."""
    g = _graph_of(obj)
    run = None
    reason = None
    if session is not None:
        run = session.context.trace.graphs.get(g.id)
        reason = session.pending_reason if session.is_pending else None
    visited = run.visited if run else {}
    tokens = set(run.tokens) if run else set()
    failed = run.failed if run else None
    taken = run.taken if run else {}
    keys = {nid: f"n{i}" for i, nid in enumerate(g.nodes)}
    nodes = []
    for nid, node in g.nodes.items():
        state: NodeState = "not_reached"
        if nid == failed:
            state = "failed"
        elif nid in tokens:
            state = "pending" if session is not None and session.is_pending else "current"
        elif visited.get(nid):
            state = "done" if node.kind == "end" else "visited"
        nodes.append(
            NodeIR(
                key=keys[nid],
                id=nid,
                label=node.label,
                kind=node.kind,
                state=state,
                visits=visited.get(nid, 0),
                note=reason if state == "pending" else None,
            )
        )
    edges = []
    for node in g.nodes.values():
        for link in node.links:
            edges.append(
                EdgeIR(
                    source=keys[node.id],
                    target=keys[link.target],
                    label=link.title or link.when_name,
                    taken=taken.get(f"{node.id}>{link.target}", 0),
                    default=node.kind == "exclusive" and link.when is None,
                )
            )
        if node.loop_body:
            edges.append(
                EdgeIR(
                    source=keys[node.id],
                    target=keys[node.loop_body],
                    label="each",
                    taken=taken.get(f"{node.id}>{node.loop_body}", 0),
                    body=True,
                )
            )
    status = getattr(session, "status", None) if session is not None else None
    return GraphIR(
        id=g.id, title=g.title, nodes=tuple(nodes), edges=tuple(edges), pending_reason=reason,
        status=status,
    )  # fmt: skip
