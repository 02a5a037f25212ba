"""Recorded positions of a flow: every branch cursor, join arrival and loop index (R8, R9).

These are plain slotted classes because the engine touches them on every node; the
snapshot module converts them to and from pydantic models.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FlowTrace", "GraphRun"]


class GraphRun:
    """Where one graph (or one subgraph instance) stands.

    ``tokens`` is the stack of branch cursors still to run; the last one runs next. A
    token names the node it is at: the node was entered (or is about to be), and its task
    runs (again) when the token is taken. ``joins`` counts arrivals at join nodes
    (``-1``: the join released its token). ``inclusive`` is the stack of branch counts
    opened by inclusive forks. ``loops`` holds each loop node's next index.
    """

    __slots__ = (
        "children",
        "ended",
        "failed",
        "inclusive",
        "joins",
        "last",
        "loops",
        "started",
        "taken",
        "tokens",
        "visited",
    )

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.joins: dict[str, int] = {}
        self.inclusive: list[int] = []
        self.loops: dict[str, int] = {}
        self.children: dict[str, GraphRun] = {}
        self.last: str | None = None
        self.visited: dict[str, int] = {}
        self.taken: dict[str, int] = {}
        self.failed: str | None = None
        self.started = False
        self.ended = False

    @property
    def done(self) -> bool:
        """True when the graph ran to its end and no branch is left."""
        return self.started and not self.tokens and self.ended

    def to_data(self) -> dict[str, Any]:
        """Plain JSON data (used by snapshots)."""
        data: dict[str, Any] = {"tokens": list(self.tokens), "started": self.started}
        if self.ended:
            data["ended"] = True
        if self.last is not None:
            data["last"] = self.last
        if self.joins:
            data["joins"] = dict(self.joins)
        if self.inclusive:
            data["inclusive"] = list(self.inclusive)
        if self.loops:
            data["loops"] = dict(self.loops)
        if self.children:
            data["children"] = {k: v.to_data() for k, v in self.children.items()}
        if self.visited:
            data["visited"] = dict(self.visited)
        if self.taken:
            data["taken"] = dict(self.taken)
        if self.failed is not None:
            data["failed"] = self.failed
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> GraphRun:
        """Rebuild from :meth:`to_data` output (already validated by the snapshot model)."""
        run = cls()
        run.tokens = list(data.get("tokens", []))
        run.started = bool(data.get("started", False))
        run.ended = bool(data.get("ended", False))
        run.last = data.get("last")
        run.joins = dict(data.get("joins", {}))
        run.inclusive = list(data.get("inclusive", []))
        run.loops = dict(data.get("loops", {}))
        run.children = {k: cls.from_data(v) for k, v in data.get("children", {}).items()}
        run.visited = dict(data.get("visited", {}))
        run.taken = dict(data.get("taken", {}))
        run.failed = data.get("failed")
        return run


class FlowTrace:
    """The positions of every graph run in a context, keyed by graph id."""

    __slots__ = ("graphs", "root")

    def __init__(self) -> None:
        self.graphs: dict[str, GraphRun] = {}
        self.root: str | None = None

    def run_for(self, graph_id: str) -> GraphRun:
        """The run record of ``graph_id``, created on first use."""
        run = self.graphs.get(graph_id)
        if run is None:
            run = self.graphs[graph_id] = GraphRun()
            if self.root is None:
                self.root = graph_id
        return run

    def last_node_id(self, graph_id: str | None = None) -> str | None:
        """The node most recently entered in ``graph_id`` (default: the root graph)."""
        gid = graph_id or self.root
        run = self.graphs.get(gid) if gid else None
        return run.last if run else None

    def positions(self, graph_id: str | None = None) -> list[str]:
        """The nodes where the graph's branches stand (what runs next on resume)."""
        gid = graph_id or self.root
        run = self.graphs.get(gid) if gid else None
        return list(run.tokens) if run else []

    def is_end(self, graph_id: str | None = None) -> bool:
        """True when the graph has finished."""
        gid = graph_id or self.root
        run = self.graphs.get(gid) if gid else None
        return bool(run and run.done)

    def clear(self, graph_id: str | None = None) -> None:
        """Forget positions (one graph, or all): the next eval starts from the start node."""
        if graph_id is None:
            self.graphs.clear()
            self.root = None
        else:
            self.graphs.pop(graph_id, None)
