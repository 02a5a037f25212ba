"""Registry: names for the Python callables that graph files refer to (R12)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .._check import shown
from ..errors import GraphDefinitionError, UsageError

__all__ = ["Registry"]

F = TypeVar("F", bound=Callable[..., Any])


class Registry:
    """Maps names to tasks, conditions and agents for graphs saved as JSON or YAML.

    A saved graph holds only names, and a loaded graph never evaluates strings.

    Example:
        >>> reg = Registry()
        >>> @reg.task("greet")
        ... def greet(ctx, node): ctx.put("msg", "hi")
        >>> reg.resolve("task", "greet") is greet
        True
    """

    def __init__(self) -> None:
        self._items: dict[str, dict[str, Any]] = {"task": {}, "condition": {}, "agent": {}}

    def add(self, kind: str, name: str, obj: Any) -> None:
        """Register ``obj`` under ``name`` for ``kind`` (task, condition, agent)."""
        if not isinstance(kind, str) or kind not in self._items:
            raise UsageError(f"kind is one of {sorted(self._items)}, not {shown(kind)}")
        if not isinstance(name, str) or not name:
            raise UsageError(f"a registry name is a non-empty string, not {shown(name)}")
        if kind == "agent":
            if not callable(getattr(obj, "run_as_member", None)):
                raise UsageError(f"an agent (ReActAgent, TeamAgent), not {type(obj).__name__}")
        elif not callable(obj):
            raise UsageError(f"a {kind} is a function, not {type(obj).__name__}")
        self._items[kind][name] = obj

    def task(self, name: str) -> Callable[[F], F]:
        """Decorator registering a task under ``name``."""

        def deco(fn: F) -> F:
            self.add("task", name, fn)
            return fn

        return deco

    def condition(self, name: str) -> Callable[[F], F]:
        """Decorator registering a condition under ``name``."""

        def deco(fn: F) -> F:
            self.add("condition", name, fn)
            return fn

        return deco

    def agent(self, agent: Any) -> Any:
        """Register an agent under its name."""
        self.add("agent", getattr(agent, "name", ""), agent)
        return agent

    def resolve(self, kind: str, name: str, *, graph_id: str = "", node_id: str = "") -> Any:
        """Return the object registered under ``name``; a typed error when unknown."""
        if not isinstance(kind, str) or kind not in self._items:
            raise UsageError(f"kind is one of {sorted(self._items)}, not {shown(kind)}")
        if not isinstance(name, str):
            raise UsageError(f"a registry name is text, not {shown(name)}")
        try:
            return self._items[kind][name]
        except KeyError:
            known = ", ".join(sorted(self._items[kind])) or "none"
            raise GraphDefinitionError(
                f"unknown {kind} {name!r} (registered: {known}); register it with "
                f"Registry.add({kind!r}, {name!r}, fn)",
                graph_id=graph_id or None,
                node_id=node_id or None,
            ) from None

    def name_of(self, kind: str, obj: Any) -> str | None:
        """The name ``obj`` is registered under, or None."""
        for name, item in (self._items.get(kind, {}) if isinstance(kind, str) else {}).items():
            if item is obj:
                return name
        return None
