"""Fingerprints earlier releases gave an agent, so that a session they paused still opens.

The fingerprint (:mod:`intermission.agents.fingerprint`) was refined twice after sessions
had recorded it; neither change made another agent of anyone:

- c447910 (first): a schema's ``required`` names in the order the schema lists them, and
  every module by its last name (``intermission.hitl.interceptor`` was ``interceptor``);
- e860691: ``required`` sorted (arguments go by name, their order is moot);
- e0d27fe (current): intermission's own modules keep their full name, so that a user's
  ``examples.py`` copied from the bundled one is not it. This changed the fingerprint of
  every agent with a HITL interceptor, whose policy names the interceptor's class.

:func:`matches_earlier` recomputes both earlier digests from the agent as it is now (its
tools, schemas and policies as the current algorithm reads them, then undoing each
refinement), so a recorded fingerprint is accepted only when that very definition would
have had it. Each agent's earlier digests are computed once and cached with it.
"""

from __future__ import annotations

import re
import weakref
from typing import Any

from .fingerprint import _PROSE, _SCHEMA_LISTS, _SCHEMA_MAPS, _SCHEMA_ONE, digest

__all__ = ["earlier_fingerprints", "matches_earlier"]

_OWN_CODE = re.compile(r"^((?:partial\()*)intermission\.(?:[\w]+\.)*(\w+:)")
"""A code id of intermission's own code (``intermission.hitl.interceptor:HITLInterceptor``,
maybe inside ``partial(…)``), which the first two releases named by its last module."""

_CACHE: weakref.WeakKeyDictionary[Any, tuple[Any, frozenset[str]]] = weakref.WeakKeyDictionary()


def matches_earlier(agent: Any, recorded: str) -> bool:
    """True when ``recorded`` is the fingerprint an earlier release's algorithm gave this
    very agent definition (see the module's docstring); False for any other value, and
    for an agent whose fingerprint data cannot be read."""
    return isinstance(recorded, str) and recorded in earlier_fingerprints(agent)


def earlier_fingerprints(agent: Any) -> frozenset[str]:
    """The fingerprints the earlier algorithms give ``agent`` (cached per agent, renewed
    when its fingerprint's cache key changes, as a team's edited spec does)."""
    key_of = getattr(agent, "_fingerprint_key", None)
    key = key_of() if callable(key_of) else None
    try:
        cached = _CACHE.get(agent)
    except TypeError:  # (an agent that cannot be weakly referenced is not cached)
        cached = None
    if cached is not None and cached[0] is key:
        return cached[1]
    found = frozenset(
        {_earlier(agent, sort_required=False), _earlier(agent, sort_required=True)}
        - {None, getattr(agent, "fingerprint", None)}
    )
    try:
        _CACHE[agent] = (key, found)  # type: ignore[assignment]
    except TypeError:
        pass
    return found  # type: ignore[return-value]


def _earlier(agent: Any, *, sort_required: bool) -> str | None:
    """The digest of ``agent`` under the algorithm before e0d27fe (``sort_required``: as
    e860691 had it, else as c447910)."""
    data_of = getattr(agent, "_fingerprint_data", None)
    if not callable(data_of):
        return None
    try:
        data = data_of()
    except NotImplementedError:
        return None
    return digest(_undo(data, agent, sort_required))


def _undo(data: Any, agent: Any, sort_required: bool) -> Any:
    """``data`` (current fingerprint data of ``agent``) as an earlier release built it."""
    data = _short_names(data)
    if not isinstance(data, dict):
        return data
    if data.get("kind") == "react" and not sort_required:
        tools = getattr(agent, "tools", {})
        for item in data.get("tools", []):
            tool = tools.get(item.get("name")) if isinstance(tools, dict) else None
            if tool is not None:
                item["args"] = _unsorted_shape(getattr(tool, "parameters", None))
    if data.get("kind") == "team":
        _members(data.get("graph"), _graph_of(agent), sort_required)
    return data


def _short_names(data: Any) -> Any:
    """A copy of ``data`` with intermission's code ids by their last module name."""
    if isinstance(data, str):
        return _OWN_CODE.sub(r"\1\2", data)
    if isinstance(data, list):
        return [_short_names(v) for v in data]
    if isinstance(data, dict):
        return {k: _short_names(v) for k, v in data.items()}
    return data


def _unsorted_shape(schema: Any) -> Any:
    """:func:`schema_shape` as c447910 had it: ``required`` in the schema's own order."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _PROSE:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _unsorted_shape(v) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_unsorted_shape(v) for v in value]
        elif key in _SCHEMA_ONE:
            out[key] = _unsorted_shape(value)
        else:
            out[key] = value
    return out


def _graph_of(agent: Any) -> Any:
    spec = getattr(agent, "spec", None)
    build = getattr(spec, "build", None)
    return build() if callable(build) else None


def _members(data: Any, graph: Any, sort_required: bool) -> None:
    """A team's members in ``data`` by their earlier fingerprints (nodes in id order, as
    :func:`~intermission.agents.fingerprint.graph_data` lists them)."""
    if not isinstance(data, dict) or graph is None:
        return
    nodes = sorted(graph.nodes.values(), key=lambda n: n.id)
    for item, node in zip(data.get("nodes", []), nodes, strict=False):
        member = getattr(node, "agent", None)
        if member is not None and isinstance(item.get("agent"), list):
            earlier = _earlier(member, sort_required=sort_required)
            if earlier is not None:
                item["agent"] = [item["agent"][0], earlier]
        if getattr(node, "subgraph", None) is not None:
            _members(item.get("subgraph"), node.subgraph, sort_required)
