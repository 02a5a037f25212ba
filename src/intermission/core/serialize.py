"""Graph specs to and from plain data (JSON/YAML, R12): callables travel as registry names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import GraphDefinitionError

if TYPE_CHECKING:
    from .registry import Registry
    from .spec import GraphSpec, NodeSpec

__all__ = ["spec_from_dict", "spec_to_dict"]

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
            f"(Registry.add({kind!r}, name, fn)) to save the graph",
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


def spec_from_dict(data: Any, registry: Registry | None) -> GraphSpec:
    """Build and validate a spec from plain data; unknown names fail now, not at run time."""
    from .spec import GraphSpec

    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise GraphDefinitionError("a graph is an object with a string 'id' and a 'layout' list")
    spec = GraphSpec(data["id"], data.get("title"), registry=registry)
    spec.meta = dict(data.get("meta") or {})
    layout = data.get("layout")
    if not isinstance(layout, list):
        raise GraphDefinitionError("'layout' must be a list of nodes", graph_id=spec.id)
    for index, item in enumerate(layout):
        if not isinstance(item, dict):
            raise GraphDefinitionError(f"layout[{index}] is not an object", graph_id=spec.id)
        node_id = item.get("id") or f"n-{index}"
        kind = item.get("type", "activity")
        if kind not in _KINDS:
            raise GraphDefinitionError(
                f"unknown node type {kind!r}; use one of {sorted(_KINDS)}",
                graph_id=spec.id,
                node_id=node_id,
            )
        if kind == "agent":
            node = spec.add_agent(item.get("agent") or node_id, node_id)
        elif kind == "loop":
            node = spec.add_loop(node_id, item.get("over", ""), item.get("item", "item"))
            if item.get("body"):
                node.body(item["body"])
        elif kind == "subgraph":
            node = spec.add_subgraph(node_id, spec_from_dict(item.get("graph"), registry))
        else:
            node = spec._add(node_id, kind)
        if item.get("title"):
            node.title(item["title"])
        for key, value in (item.get("meta") or {}).items():
            node.meta_put(key, value)
        if item.get("task"):
            node.task(item["task"])
        if item.get("when"):
            node.when(item["when"])
        links = item.get("link", [])
        if isinstance(links, (str, dict)):
            links = [links]
        for link in links:
            if isinstance(link, str):
                node.link_add(link)
            elif isinstance(link, dict) and isinstance(link.get("next_id"), str):
                node.link_add(
                    link["next_id"],
                    link.get("when"),
                    link.get("title"),
                    int(link.get("priority", 0)),
                )
            else:
                raise GraphDefinitionError(
                    "a link is a node id or an object with 'next_id'",
                    graph_id=spec.id,
                    node_id=node_id,
                )
    spec.build()  # resolve every name and validate now (R12)
    return spec
