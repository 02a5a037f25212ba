"""Per-agent state a session carries for its agents, opaque to the core.

A session keeps one state object per agent (``session.traces[name]``): a ReAct agent's
route and memory, a team's records. The core stores and restores them as JSON with a
``kind`` and never looks inside; agent modules register their state classes here, so a
snapshot's states are validated when it loads (if the agent's module was imported), or
when the agent first claims its state (``session.agent_state``).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from ..errors import SnapshotSchemaError

__all__ = ["AgentState", "claim", "register_state", "state_data", "state_from"]

S = TypeVar("S")


class AgentState(Protocol):
    """What a session needs from an agent's state: JSON with a ``kind``."""

    def model_dump(self, *, mode: str) -> dict[str, Any]:
        """The state as JSON data, including its ``kind``."""
        ...


_TYPES: dict[str, Any] = {}


def register_state(kind: str, cls: Any) -> None:
    """Make ``cls`` (a pydantic model with ``kind: Literal[kind]``) the state of ``kind``."""
    _TYPES[kind] = cls


def state_from(data: Any, path: str = "traces") -> Any:
    """A stored state: its registered class, validated, or the JSON itself when no agent
    module registered its kind (yet)."""
    if not isinstance(data, dict):
        raise SnapshotSchemaError("an agent state is a JSON object", path=path)
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise SnapshotSchemaError("an agent state names its kind (text)", path=f"{path}.kind")
    cls = _TYPES.get(kind)
    if cls is None:
        return data
    try:
        return cls.model_validate(data, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SnapshotSchemaError(first["msg"], path=f"{path}.{where}" if where else path) from None


def state_data(state: Any) -> dict[str, Any]:
    """The JSON of a state (as stored)."""
    if isinstance(state, dict):
        return state
    data: dict[str, Any] = state.model_dump(mode="json")
    return data


def claim(states: dict[str, Any], name: str, cls: type[S]) -> S | None:
    """``states[name]`` as a ``cls``: validated now if it is still JSON; None when there
    is none or it belongs to another kind of agent."""
    value = states.get(name)
    if isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        return None
    fields = getattr(cls, "model_fields", {})
    kind = fields["kind"].default if "kind" in fields else None
    if kind is None or value.get("kind") != kind:
        return None
    register_state(kind, cls)
    claimed = state_from(value, f"traces.{name}")
    states[name] = claimed
    return claimed  # type: ignore[no-any-return]
