"""Graph specs to and from plain data (JSON/YAML, R12): callables travel as registry names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._check import shown
from ..errors import GraphDefinitionError
from ..limits import MAX_DEPTH

if TYPE_CHECKING:
    from .registry import Registry
    from .spec import GraphSpec, NodeSpec

__all__ = ["check_document", "spec_from_dict", "spec_to_dict"]

_KINDS = {
    "start",
    "end",
    "activity",
    "exclusive",
    "parallel",
    "inclusive",
    "loop",
    "agent",
    "subgraph",
}


def _name(spec: GraphSpec, node: NodeSpec, kind: str, ref: Any, registry: Registry | None) -> Any:
    if ref is None or isinstance(ref, str):
        return ref
    name = registry.name_of(kind, ref) if registry else None
    if name is None:
        raise GraphDefinitionError(
            f"this {kind} is a Python callable with no registry name; register it "
            f"(Registry.add({shown(kind)}, name, fn)) to save the graph",
            graph_id=spec.id,
            node_id=node.id,
        )
    return name


def spec_to_dict(spec: GraphSpec, registry: Registry | None) -> dict[str, Any]:
    """Plain data for ``spec``."""
    layout: list[dict[str, Any]] = []
    for node in spec.nodes.values():
        item: dict[str, Any] = {"id": node.id, "type": node.kind}
        if node.title_text:
            item["title"] = node.title_text
        if node.meta:
            item["meta"] = dict(node.meta)
        if node.task_ref is not None:
            item["task"] = _name(spec, node, "task", node.task_ref, registry)
        if node.when_ref is not None:
            item["when"] = _name(spec, node, "condition", node.when_ref, registry)
        if node.kind == "agent":
            agent = node.agent
            item["agent"] = agent if isinstance(agent, str) else getattr(agent, "name", None)
        if node.kind == "loop":
            over = node.loop_over
            item["over"] = (
                over if isinstance(over, str) else _name(spec, node, "task", over, registry)
            )
            item["item"] = node.loop_item
            item["body"] = node.loop_body
        if node.kind == "subgraph" and node.subgraph is not None:
            item["graph"] = spec_to_dict(node.subgraph, registry)
        links = []
        for link in node.links:
            entry: dict[str, Any] = {"next_id": link.target}
            if link.when is not None:
                entry["when"] = _name(spec, node, "condition", link.when, registry)
            if link.title:
                entry["title"] = link.title
            if link.priority:
                entry["priority"] = link.priority
            links.append(entry)
        if links:
            item["link"] = links
        layout.append(item)
    data: dict[str, Any] = {"id": spec.id}
    if spec.title:
        data["title"] = spec.title
    if spec.meta:
        data["meta"] = dict(spec.meta)
    data["layout"] = layout
    return data


def check_document(data: Any, what: str) -> None:
    """A loaded JSON/YAML document must be plain data of bounded depth and size: YAML
    aliases can make a small file expand into billions of nodes when walked."""
    budget = _MAX_NODES
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise GraphDefinitionError(f"{what} has more than {_MAX_NODES} values")
        if depth > MAX_DEPTH:
            raise GraphDefinitionError(f"{what} is nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise GraphDefinitionError(f"{what}: keys are strings, not {shown(key)}")
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif not isinstance(value, (str, int, float, bool, type(None))):
            raise GraphDefinitionError(f"{what} holds a {type(value).__name__}, not plain data")


_MAX_NODES = 200_000


def _field(item: dict[str, Any], key: str, kinds: Any, default: Any, **where: Any) -> Any:
    value = item.get(key, default)
    if value is default or isinstance(value, kinds):
        return value
    names = kinds.__name__ if isinstance(kinds, type) else "/".join(k.__name__ for k in kinds)
    raise GraphDefinitionError(f"{shown(key)} is {names}, not {type(value).__name__}", **where)


def spec_from_dict(data: Any, registry: Registry | None, depth: int = 0) -> GraphSpec:
    """Build and validate a spec from plain data; unknown names fail now, not at run time.
    Every field is checked for its type: a hostile file gets a GraphDefinitionError
    naming the node, never a bare error."""
    from .spec import GraphSpec

    if depth == 0:
        check_document(data, "the graph")
    if depth > MAX_DEPTH:
        raise GraphDefinitionError(f"subgraphs nested deeper than {MAX_DEPTH} levels")
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
        raise GraphDefinitionError("a graph is an object with a string 'id' and a 'layout' list")
    gid = data["id"]
    title = _field(data, "title", str, None, graph_id=gid)
    spec = GraphSpec(gid, title, registry=registry)
    spec.meta = dict(_field(data, "meta", dict, None, graph_id=gid) or {})
    layout = data.get("layout")
    if not isinstance(layout, list):
        raise GraphDefinitionError("'layout' must be a list of nodes", graph_id=spec.id)
    for index, item in enumerate(layout):
        if not isinstance(item, dict):
            raise GraphDefinitionError(f"layout[{index}] is not an object", graph_id=spec.id)
        node_id = item.get("id") or f"n-{index}"
        if not isinstance(node_id, str):
            raise GraphDefinitionError(f"layout[{index}].id is not a string", graph_id=gid)
        where = {"graph_id": gid, "node_id": node_id}
        kind = item.get("type", "activity")
        if not isinstance(kind, str) or kind not in _KINDS:
            raise GraphDefinitionError(
                f"unknown node type {shown(kind)}; use one of {sorted(_KINDS)}", **where
            )
        if kind == "agent":
            node = spec.add_agent(_field(item, "agent", str, None, **where) or node_id, node_id)
        elif kind == "loop":
            over = _field(item, "over", str, "", **where)
            node = spec.add_loop(node_id, over, _field(item, "item", str, "item", **where))
            body = _field(item, "body", str, None, **where)
            if body:
                node.body(body)
        elif kind == "subgraph":
            child = spec_from_dict(item.get("graph"), registry, depth + 1)
            node = spec.add_subgraph(node_id, child)
        else:
            node = spec._add(node_id, kind)  # type: ignore[arg-type]  # (checked above)
        title = _field(item, "title", str, None, **where)
        if title:
            node.title(title)
        for key, value in (_field(item, "meta", dict, None, **where) or {}).items():
            node.meta_put(key, value)
        task = _field(item, "task", str, None, **where)
        if task:
            node.task(task)
        when = _field(item, "when", str, None, **where)
        if when:
            node.when(when)
        links = item.get("link", [])
        if isinstance(links, (str, dict)):
            links = [links]
        if not isinstance(links, list):
            raise GraphDefinitionError("'link' is a list of links", **where)
        for link in links:
            if isinstance(link, str):
                node.link_add(link)
            elif isinstance(link, dict) and isinstance(link.get("next_id"), str):
                priority = _field(link, "priority", int, 0, **where)
                if isinstance(priority, bool):
                    raise GraphDefinitionError("'priority' is a whole number", **where)
                node.link_add(
                    link["next_id"],
                    _field(link, "when", str, None, **where),
                    _field(link, "title", str, None, **where),
                    priority,
                )
            else:
                raise GraphDefinitionError(
                    "a link is a node id or an object with 'next_id'", **where
                )
    spec.build()  # resolve every name and validate now (R12)
    return spec
