"""GraphSpec: the fluent builder of flow graphs (the seed's ``GraphSpec`` / ``NodeSpec``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from .._check import shown
from .._json import check_json
from ..errors import GraphDefinitionError, NotSerializableError

if TYPE_CHECKING:
    from .context import FlowContext
    from .graph import Graph, Node
    from .registry import Registry

__all__ = [
    "END",
    "START",
    "Condition",
    "GraphSpec",
    "LinkSpec",
    "MemberAgent",
    "NodeKind",
    "NodeSpec",
    "Task",
]

START = "start"
"""Id of the node ``add_start()`` creates (the seed's ``Agent.ID_START``)."""
END = "end"
"""Id of the node ``add_end()`` creates (the seed's ``Agent.ID_END``)."""

NodeKind = Literal[
    "start", "end", "activity", "exclusive", "parallel", "inclusive", "loop", "agent", "subgraph"
]

Task = Callable[["FlowContext", "Node"], Awaitable[None] | None]
"""A node task: ``task(ctx, node)``, sync or async."""
Condition = Callable[["FlowContext"], bool]
"""A link or node condition: ``when(ctx) -> bool``."""


@runtime_checkable
class MemberAgent(Protocol):
    """What a graph needs from an agent used as a node (``spec.add_agent(agent)``)."""

    @property
    def name(self) -> str:
        """The agent's name, which is also its node id."""
        ...

    async def run_as_member(self, ctx: FlowContext, node: Node) -> None:
        """Run one member step inside a team graph."""
        ...


@dataclass(slots=True)
class LinkSpec:
    """A link to ``target``; ``when`` None makes it the default/unconditional link."""

    target: str
    when: Condition | str | None = None
    title: str | None = None
    priority: int = 0


class NodeSpec:
    """One node of a :class:`GraphSpec`; every setter returns the node for chaining."""

    def __init__(self, graph: GraphSpec, node_id: str, kind: NodeKind) -> None:
        self._graph = graph
        self.id = node_id
        self.kind: NodeKind = kind
        self.title_text: str | None = None
        self.task_ref: Task | str | None = None
        self.when_ref: Condition | str | None = None
        self.meta: dict[str, Any] = {}
        self.links: list[LinkSpec] = []
        self.agent: MemberAgent | str | None = None
        self.subgraph: GraphSpec | None = None
        self.loop_over: str | Callable[[FlowContext], list[Any]] | None = None
        self.loop_item = "item"
        self.loop_body: str | None = None
        self.prompt_fn: Callable[[FlowContext], str] | None = None

    def _changed(self) -> NodeSpec:
        self._graph._compiled = None
        return self

    def title(self, title: str) -> NodeSpec:
        """Set the human-readable title."""
        self.title_text = self._text("title", title)
        return self._changed()

    def task(self, task: Task | str) -> NodeSpec:
        """Set the task run when the node is entered (a callable or a registry name)."""
        self.task_ref = self._ref("task", task)
        return self._changed()

    def when(self, condition: Condition | str) -> NodeSpec:
        """Run the task only when ``condition(ctx)`` holds (the node is still passed)."""
        self.when_ref = self._ref("condition", condition)
        return self._changed()

    def meta_put(self, key: str, value: Any) -> NodeSpec:
        """Attach metadata (JSON) to the node."""
        self._text("meta key", key)
        try:
            check_json(f"meta.{key}", value)
        except NotSerializableError as exc:
            raise GraphDefinitionError(str(exc), graph_id=self._graph.id, node_id=self.id) from None
        self.meta[key] = value
        return self._changed()

    def prompt(self, fn: Callable[[FlowContext], str]) -> NodeSpec:
        """For a member agent node: build the member's prompt from the context (R16)."""
        if not callable(fn):
            raise GraphDefinitionError(
                "prompt() takes a function of the context", graph_id=self._graph.id, node_id=self.id
            )
        self.prompt_fn = fn
        return self._changed()

    def link_add(
        self,
        target: str,
        when: Condition | str | None = None,
        title: str | None = None,
        priority: int = 0,
    ) -> NodeSpec:
        """Add a link to ``target``: higher ``priority`` is tried first; no ``when`` = default."""
        self._text("target", target)
        if when is not None:
            self._ref("condition", when)
        if title is not None:
            self._text("title", title)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise GraphDefinitionError(
                f"priority is a whole number, not {shown(priority)}",
                graph_id=self._graph.id,
                node_id=self.id,
            )
        self.links.append(LinkSpec(target, when, title, priority))
        return self._changed()

    def body(self, target: str) -> NodeSpec:
        """For a loop node: the first node of the loop body (the body links back here)."""
        if self.kind != "loop":
            raise GraphDefinitionError(
                "body() is only for loop nodes", graph_id=self._graph.id, node_id=self.id
            )
        self.loop_body = self._text("body", target)
        return self._changed()

    def link_remove(self, target: str) -> NodeSpec:
        """Remove every link to ``target``."""
        self.links = [link for link in self.links if link.target != target]
        return self._changed()

    def link_clear(self) -> NodeSpec:
        """Remove all links."""
        self.links.clear()
        return self._changed()

    def _text(self, name: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise GraphDefinitionError(
                f"{name} is a non-empty string, not {shown(value)}",
                graph_id=self._graph.id,
                node_id=self.id,
            )
        return value

    def _ref(self, kind: str, ref: Any) -> Any:
        if not (callable(ref) or (isinstance(ref, str) and ref)):
            raise GraphDefinitionError(
                f"a {kind} is a function or a registry name, not {type(ref).__name__}",
                graph_id=self._graph.id,
                node_id=self.id,
            )
        return ref

    def __repr__(self) -> str:
        return f"<NodeSpec {self.kind} {self.id!r} -> {[x.target for x in self.links]}>"


class GraphSpec:
    """A flow graph under construction.

    Example:
        >>> spec = GraphSpec("hello")
        >>> _ = spec.add_start().link_add("greet")
        >>> greet = spec.add_activity("greet").task(lambda ctx, node: ctx.put("msg", "hi"))
        >>> _ = greet.link_add(END)
        >>> _ = spec.add_end()
        >>> spec.build().node_ids
        ('start', 'greet', 'end')
    """

    def __init__(self, graph_id: str, title: str | None = None, registry: Registry | None = None):
        from .registry import Registry

        if not isinstance(graph_id, str) or not graph_id:
            raise GraphDefinitionError(f"a graph id is a non-empty string, not {shown(graph_id)}")
        if title is not None and not isinstance(title, str):
            raise GraphDefinitionError("a graph title is text", graph_id=graph_id)
        if registry is not None and not isinstance(registry, Registry):
            raise GraphDefinitionError("registry is a Registry", graph_id=graph_id)
        self.id = graph_id
        self.title = title
        self.registry = registry
        self.meta: dict[str, Any] = {}
        self.declared_version: str | None = None
        """The graph's version label (``version("2")``); a team on it runs that version."""
        self.nodes: dict[str, NodeSpec] = {}
        self._compiled: Graph | None = None

    def version(self, label: str) -> GraphSpec:
        """Label the graph's version (R62): a team built on it runs sessions as that
        version unless its builder says otherwise. Returns the spec."""
        if not isinstance(label, str) or not label or "@" in label or len(label) > 64:
            raise GraphDefinitionError(
                f"a version label is non-empty text without '@' (at most 64 characters), "
                f"not {shown(label)}", graph_id=self.id,
            )  # fmt: skip
        self.declared_version = label
        return self

    def _add(self, node_id: str, kind: NodeKind) -> NodeSpec:
        if not isinstance(node_id, str) or not node_id:
            raise GraphDefinitionError("node ids must be non-empty strings", graph_id=self.id)
        if node_id in self.nodes:
            raise GraphDefinitionError(
                "a node with this id already exists; pick another id or get_node() it",
                graph_id=self.id,
                node_id=node_id,
            )
        node = self.nodes[node_id] = NodeSpec(self, node_id, kind)
        self._compiled = None
        return node

    def add_start(self, node_id: str = START) -> NodeSpec:
        """Add the start node (id ``"start"``)."""
        return self._add(node_id, "start")

    def add_end(self, node_id: str = END) -> NodeSpec:
        """Add an end node (id ``"end"``)."""
        return self._add(node_id, "end")

    def add_activity(self, node_id: str) -> NodeSpec:
        """Add an activity: runs its task, then follows every link whose condition holds."""
        return self._add(node_id, "activity")

    def add_exclusive(self, node_id: str) -> NodeSpec:
        """Add an exclusive gateway: the first matching link by priority, else the default."""
        return self._add(node_id, "exclusive")

    def add_parallel(self, node_id: str) -> NodeSpec:
        """Add a parallel gateway: forks all links; with several incoming links it joins all."""
        return self._add(node_id, "parallel")

    def add_inclusive(self, node_id: str) -> NodeSpec:
        """Add an inclusive gateway: forks matching links; as a join it waits for those."""
        return self._add(node_id, "inclusive")

    def add_loop(
        self,
        node_id: str,
        over: str | Callable[[FlowContext], list[Any]],
        item: str = "item",
    ) -> NodeSpec:
        """Add a loop: for each element of ``over`` (a context key or a function), put it
        under ``item`` and run the body (``.body(first_node)``, which links back here);
        when exhausted, follow the loop's own link."""
        if not (callable(over) or isinstance(over, str)) or not isinstance(item, str) or not item:
            raise GraphDefinitionError(
                "a loop goes over a context key or a function, into a named item",
                graph_id=self.id,
                node_id=node_id if isinstance(node_id, str) else None,
            )
        node = self._add(node_id, "loop")
        node.loop_over = over
        node.loop_item = item
        return node

    def add_agent(self, agent: MemberAgent | str, node_id: str | None = None) -> NodeSpec:
        """Add a member agent node; its id is the agent's name (R7, R16)."""
        named = isinstance(getattr(agent, "name", None), str)
        if not isinstance(agent, str) and not (
            named and callable(getattr(agent, "run_as_member", None))
        ):
            raise GraphDefinitionError(
                f"add_agent takes an agent (ReActAgent, TeamAgent) or a registry name, not "
                f"{type(agent).__name__}",
                graph_id=self.id,
            )
        name = agent if isinstance(agent, str) else agent.name
        node = self._add(node_id or name, "agent")
        node.agent = agent
        return node

    def add_subgraph(self, node_id: str, spec: GraphSpec) -> NodeSpec:
        """Add a node that runs ``spec`` as a child graph (a parked child parks this branch)."""
        if not isinstance(spec, GraphSpec) or spec is self:
            raise GraphDefinitionError(
                "add_subgraph takes another GraphSpec", graph_id=self.id,
                node_id=node_id if isinstance(node_id, str) else None,
            )  # fmt: skip
        node = self._add(node_id, "subgraph")
        node.subgraph = spec
        return node

    def get_node(self, node_id: str) -> NodeSpec:
        """Return the node spec with this id."""
        try:
            return self.nodes[node_id]
        except KeyError:
            raise GraphDefinitionError("no such node", graph_id=self.id, node_id=node_id) from None

    def remove_node(self, node_id: str) -> None:
        """Remove a node (links to it are left for validation to report)."""
        self.get_node(node_id)
        del self.nodes[node_id]
        self._compiled = None

    def build(self) -> Graph:
        """Validate and compile (cached until the spec changes). Raises GraphDefinitionError."""
        if self._compiled is None:
            from .graph import compile_graph

            self._compiled = compile_graph(self)
        return self._compiled

    # -- serialisation (R12) ---------------------------------------------------------
    def to_dict(self, registry: Registry | None = None) -> dict[str, Any]:
        """Plain data; callables are written by their registry names."""
        from .serialize import spec_to_dict

        return spec_to_dict(self, registry or self.registry)

    def to_json(self, registry: Registry | None = None) -> str:
        """JSON text of :meth:`to_dict`."""
        import json

        return json.dumps(self.to_dict(registry), indent=2)

    def to_yaml(self, registry: Registry | None = None) -> str:
        """YAML text of :meth:`to_dict`."""
        import yaml

        text: str = yaml.safe_dump(self.to_dict(registry), sort_keys=False)
        return text

    @classmethod
    def from_dict(cls, data: dict[str, Any], registry: Registry | None = None) -> GraphSpec:
        """Build a spec from plain data; unknown task/condition names are errors now."""
        from .serialize import spec_from_dict

        return spec_from_dict(data, registry)

    @classmethod
    def from_json(cls, text: str, registry: Registry | None = None) -> GraphSpec:
        """Load a spec from JSON text."""
        from .._json import loads

        if not isinstance(text, (str, bytes, bytearray)):
            raise GraphDefinitionError(f"from_json takes JSON text, not {type(text).__name__}")
        try:
            data = loads(text, "the graph")
        except ValueError as exc:
            raise GraphDefinitionError(f"not valid JSON: {exc}") from None
        return cls.from_dict(data, registry)

    @classmethod
    def from_yaml(cls, text: str, registry: Registry | None = None) -> GraphSpec:
        """Load a spec from YAML text (safe loader only)."""
        import yaml

        from ..limits import MAX_TEXT_BYTES

        if not isinstance(text, (str, bytes)):
            raise GraphDefinitionError(f"from_yaml takes YAML text, not {type(text).__name__}")
        if len(text) > MAX_TEXT_BYTES:
            raise GraphDefinitionError(f"the graph is larger than {MAX_TEXT_BYTES} bytes")
        try:
            data = yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError, ValueError) as exc:
            raise GraphDefinitionError(f"not valid YAML: {type(exc).__name__}: {exc}") from None
        return cls.from_dict(data, registry)

    def __repr__(self) -> str:
        return f"<GraphSpec {self.id!r} nodes={len(self.nodes)}>"
