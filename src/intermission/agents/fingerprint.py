"""An agent's fingerprint: a short hash of what decides the effects it has on the world.

A session records the name and fingerprint of the agent that made it; another agent — one
with another name, or the same name with other tools or another approval policy — is
refused (:class:`~intermission.AgentMismatchError`) unless the caller adopts the session on
purpose. So the fingerprint holds what decides what runs and who must agree first, and
nothing else:

- each tool: its name, its argument schema (types, required names, constraints; not its
  descriptions or titles), whether it is marked destructive, and which code runs it (the
  function's module — its own name, not its package path — and qualified name; an MCP
  tool: its server's name and the tool's name on it; intermission's own code keeps its
  full module name, so a user's ``examples.py`` copied from the bundled one is not it).
  The body of the function is not hashed: fixing a tool and redeploying keeps paused
  sessions resumable; swapping it for another function (the bundled example's, say)
  does not;
- each interceptor that describes a policy (``policy_data()``, as the HITL interceptor
  does: which tools ask, its policies, deadlines, approvers and what expiry means);
- for a team: its graph (node ids and kinds, task, condition and link code, loops,
  subgraphs) and each member's name and fingerprint.

Deliberately left out, so they may change while sessions wait: the model, the system
prompt, docstrings and descriptions, titles, prompt functions, ``max_turns``, the session
window, ``output_key``, the retry settings, the clock and id factory, and interceptors
that only watch (logging, timing). It is computed once per agent (on first use) and
cached; a running request never recomputes it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .._json import canonical_dumps

__all__ = ["code_id", "digest", "graph_data", "react_data", "schema_shape", "team_data"]

_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
_SCHEMA_LISTS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_SCHEMA_ONE = frozenset(
    {"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else"}
)
_PROSE = frozenset({"title", "description", "examples", "$comment"})


def schema_shape(schema: Any) -> Any:
    """``schema`` without its prose (titles, descriptions, examples) and with its required
    names sorted: what it accepts. A property *named* ``title`` or ``description`` is
    kept."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _PROSE:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: schema_shape(v) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [schema_shape(v) for v in value]
        elif key in _SCHEMA_ONE:
            out[key] = schema_shape(value)
        elif key == "required" and isinstance(value, list):
            out[key] = sorted(value, key=str)  # (arguments go by name: their order is moot)
        else:
            out[key] = value
    return out


def _module_name(module: str | None) -> str:
    """The module's own name, without its package path: one file is imported under
    several names (``tests.agents.x`` and ``agents.x``; ``src.app`` and ``app``) and a
    script run as ``python app.py`` is ``__main__`` there and ``app`` to ``--agents
    app:AGENTS``; all of them are ``x`` or ``app`` here."""
    if module == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        path = getattr(main, "__file__", None)
        if spec is not None and getattr(spec, "name", None):
            module = str(spec.name)
        elif isinstance(path, str) and path:
            from pathlib import Path

            module = Path(path).stem
    if module is not None and module.startswith("intermission."):
        # intermission's own code (the bundled examples) keeps its full name: a user's
        # module of the same last name (an ``examples.py`` copied from it) is not it
        return module
    return (module or "?").rpartition(".")[2]


def code_id(fn: Any) -> str | None:
    """Which code ``fn`` is: ``module:qualname`` (a bound method: its function's; a
    ``functools.partial``: its function's; a callable object: its class's). None for None."""
    if fn is None:
        return None
    inner = getattr(fn, "func", None)  # functools.partial
    if inner is not None and callable(inner) and hasattr(fn, "args"):
        return f"partial({code_id(inner)})"
    fn = getattr(fn, "__func__", fn)  # a bound method
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(qualname, str):
        cls = type(fn)
        return f"{_module_name(cls.__module__)}:{cls.__qualname__}"
    return f"{_module_name(getattr(fn, '__module__', None))}:{qualname}"


def _tool_data(tool: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": tool.name,
        "args": schema_shape(getattr(tool, "parameters", None)),
        "destructive": bool(getattr(tool, "destructive", False)),
    }
    connection = getattr(tool, "connection", None)
    if connection is not None:  # an MCP tool: the server it calls, by its identity
        data["mcp"] = [getattr(connection, "name", "") or "", getattr(tool, "mcp_name", tool.name)]
    else:
        data["code"] = code_id(getattr(tool, "fn", None))
    return data


def _policies(interceptors: Any) -> list[Any]:
    """What each interceptor that decides effects says about itself (``policy_data``)."""
    out = []
    for interceptor in interceptors:
        describe: Callable[[], Any] | None = getattr(interceptor, "policy_data", None)
        data = describe() if callable(describe) else None
        if data is not None:
            out.append({"by": code_id(type(interceptor)), "policy": data})
    return out


def graph_data(graph: Any) -> dict[str, Any]:
    """The fingerprint data of a compiled team graph (members by their fingerprints)."""
    nodes = []
    for node in sorted(graph.nodes.values(), key=lambda n: n.id):
        item: dict[str, Any] = {"id": node.id, "kind": node.kind}
        if node.task is not None:
            item["task"] = code_id(node.task)
        if node.when is not None:
            item["when"] = code_id(node.when)
        links = [[link.target, code_id(link.when), link.priority] for link in node.links]
        if links:
            item["links"] = links
        if node.kind == "loop":
            over = node.loop_over
            item["loop"] = [
                over if isinstance(over, str) or over is None else code_id(over),
                node.loop_item,
                node.loop_body,
            ]
        if node.agent is not None:
            member = node.agent
            item["agent"] = [member.name, getattr(member, "fingerprint", None)
                             or code_id(type(member))]  # fmt: skip
        if node.subgraph is not None:
            item["subgraph"] = graph_data(node.subgraph)
        nodes.append(item)
    return {"id": graph.id, "start": graph.start, "nodes": nodes}


def digest(data: Any) -> str:
    """16 hex digits of the SHA-256 of ``data``'s canonical JSON."""
    import hashlib  # lazy: keeps `import intermission` lean

    return hashlib.sha256(canonical_dumps(data).encode()).hexdigest()[:16]


def react_data(tools: dict[str, Any], interceptors: Any) -> dict[str, Any]:
    """The fingerprint data of a ReAct agent."""
    return {
        "kind": "react",
        "tools": [_tool_data(tools[name]) for name in sorted(tools)],
        "policies": _policies(interceptors),
    }


def team_data(graph: Any, interceptors: Any) -> dict[str, Any]:
    """The fingerprint data of a team on its compiled ``graph``."""
    return {"kind": "team", "graph": graph_data(graph), "policies": _policies(interceptors)}
