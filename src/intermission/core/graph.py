"""Compiled, validated graphs: what the engine runs (R7)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import GraphDefinitionError
from .spec import Condition, GraphSpec, MemberAgent, NodeKind, NodeSpec, Task

if TYPE_CHECKING:
    from .context import FlowContext

__all__ = ["Graph", "Link", "Node", "compile_graph"]


@dataclass(frozen=True, slots=True)
class Link:
    """A compiled link."""

    source: str
    target: str
    when: Condition | None
    title: str | None
    priority: int
    when_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """A compiled node; tasks receive it as their second argument."""

    id: str
    kind: NodeKind
    title: str | None
    task: Task | None
    when: Condition | None
    links: tuple[Link, ...]
    meta: dict[str, Any] = field(default_factory=dict)
    incoming: int = 0
    agent: MemberAgent | None = None
    subgraph: Graph | None = None
    loop_over: str | Callable[[FlowContext], list[Any]] | None = None
    loop_item: str = "item"
    loop_body: str | None = None
    prompt_fn: Callable[[FlowContext], str] | None = None
    is_join: bool = False
    """A parallel/inclusive gateway with several incoming links waits for arrivals."""
    fixed_route: tuple[tuple[str, str], ...] | None = None
    """(target, taken-link key) pairs when the route never depends on the context (an
    activity or start whose links are all unconditional): the engine skips routing."""

    @property
    def label(self) -> str:
        """The title, or the id."""
        return self.title or self.id


@dataclass(frozen=True, slots=True)
class Graph:
    """A validated graph. Build one with ``GraphSpec.build()``."""

    id: str
    title: str | None
    start: str
    nodes: dict[str, Node]

    @property
    def node_ids(self) -> tuple[str, ...]:
        """Node ids in definition order."""
        return tuple(self.nodes)


def _resolve(spec: GraphSpec, node: NodeSpec, kind: str, ref: Any) -> Any:
    if ref is None or callable(ref):
        return ref
    if isinstance(ref, str):
        if spec.registry is None:
            raise GraphDefinitionError(
                f"{kind} {ref!r} is a name but the spec has no registry; pass "
                "GraphSpec(..., registry=reg) or give a callable",
                graph_id=spec.id,
                node_id=node.id,
            )
        return spec.registry.resolve(kind, ref, graph_id=spec.id, node_id=node.id)
    raise GraphDefinitionError(
        f"{kind} must be a callable or a registry name, not {type(ref).__name__}",
        graph_id=spec.id,
        node_id=node.id,
    )


def _check_structure(spec: GraphSpec) -> str:
    gid = spec.id
    starts = [n.id for n in spec.nodes.values() if n.kind == "start"]
    if len(starts) != 1:
        raise GraphDefinitionError(
            "needs exactly one start node (spec.add_start())"
            if not starts
            else f"has {len(starts)} start nodes {starts}; keep one",
            graph_id=gid,
        )
    if not any(n.kind == "end" for n in spec.nodes.values()):
        raise GraphDefinitionError("needs an end node (spec.add_end())", graph_id=gid)
    for node in spec.nodes.values():
        for link in node.links:
            if link.target not in spec.nodes:
                raise GraphDefinitionError(
                    f"links to unknown node {link.target!r}; add that node or fix the link",
                    graph_id=gid,
                    node_id=node.id,
                )
            if spec.nodes[link.target].kind == "start":
                raise GraphDefinitionError(
                    "links back to the start node; link to the first real node instead",
                    graph_id=gid,
                    node_id=node.id,
                )
        if node.kind == "end":
            if node.links:
                raise GraphDefinitionError(
                    "an end node has no outgoing links", graph_id=gid, node_id=node.id
                )
            continue
        if not node.links:
            raise GraphDefinitionError(
                "has no outgoing link; add .link_add(...) (to END if it finishes the flow)",
                graph_id=gid,
                node_id=node.id,
            )
        if node.kind == "exclusive":
            defaults = [x.target for x in node.links if x.when is None]
            if len(defaults) > 1:
                raise GraphDefinitionError(
                    f"has {len(defaults)} default links {defaults}; give all but one a when=",
                    graph_id=gid,
                    node_id=node.id,
                )
        if node.kind == "loop":
            if node.loop_body is None or node.loop_body not in spec.nodes:
                raise GraphDefinitionError(
                    "a loop needs .body(first_body_node) naming an existing node",
                    graph_id=gid,
                    node_id=node.id,
                )
            if len(node.links) != 1:
                raise GraphDefinitionError(
                    "a loop has exactly one exit link (the body is set with .body())",
                    graph_id=gid,
                    node_id=node.id,
                )
        if node.kind == "subgraph" and node.subgraph is None:
            raise GraphDefinitionError(
                "a subgraph node needs a spec", graph_id=gid, node_id=node.id
            )
    return starts[0]


def _check_reachable(spec: GraphSpec, start: str) -> None:
    seen = {start}
    todo = [start]
    while todo:
        node = spec.nodes[todo.pop()]
        targets = [x.target for x in node.links]
        if node.loop_body:
            targets.append(node.loop_body)
        for target in targets:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    for node_id in spec.nodes:
        if node_id not in seen:
            raise GraphDefinitionError(
                "is unreachable from the start node; link to it or remove it",
                graph_id=spec.id,
                node_id=node_id,
            )


def compile_graph(spec: GraphSpec) -> Graph:
    """Validate ``spec`` and compile it into a :class:`Graph` (R7)."""
    start = _check_structure(spec)
    _check_reachable(spec, start)
    incoming: dict[str, int] = dict.fromkeys(spec.nodes, 0)
    for node in spec.nodes.values():
        for link in node.links:
            incoming[link.target] += 1
        if node.loop_body:
            incoming[node.loop_body] += 1
    nodes: dict[str, Node] = {}
    for ns in spec.nodes.values():
        links = tuple(
            sorted(
                (
                    Link(
                        ns.id,
                        x.target,
                        _resolve(spec, ns, "condition", x.when),
                        x.title,
                        x.priority,
                        x.when if isinstance(x.when, str) else None,
                    )
                    for x in ns.links
                ),
                key=lambda link: -link.priority,
            )
        )
        agent = ns.agent
        if isinstance(agent, str):
            agent = _resolve(spec, ns, "agent", agent)
        is_join = ns.kind in ("parallel", "inclusive") and incoming[ns.id] > 1
        fixed = (
            tuple((x.target, f"{ns.id}>{x.target}") for x in links)
            if ns.kind in ("start", "activity", "agent", "subgraph", "parallel")
            and all(x.when is None for x in links)
            else None
        )
        nodes[ns.id] = Node(
            id=ns.id,
            kind=ns.kind,
            title=ns.title_text,
            task=_resolve(spec, ns, "task", ns.task_ref),
            when=_resolve(spec, ns, "condition", ns.when_ref),
            links=links,
            meta=dict(ns.meta),
            incoming=incoming[ns.id],
            agent=agent,
            subgraph=ns.subgraph.build() if ns.subgraph is not None else None,
            loop_over=ns.loop_over,
            loop_item=ns.loop_item,
            loop_body=ns.loop_body,
            prompt_fn=ns.prompt_fn,
            is_join=is_join,
            fixed_route=fixed,
        )
    return Graph(spec.id, spec.title, start, nodes)
