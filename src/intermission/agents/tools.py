"""Tools from typed Python functions: JSON schema and argument validation via pydantic (R14)."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from typing import Any, Generic, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from typing_extensions import ParamSpec, TypeVar

from .._finite import FINITE_ONLY, non_finite
from ..errors import ToolDefinitionError
from .models import ToolSchema

__all__ = ["Tool", "ToolArgumentError", "held_tool", "holder", "tool"]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

INJECTED = frozenset({"session"})
"""Parameter names filled in by the agent, not by the model (``session``: the running
session, e.g. for ``session.once(key, effect)``)."""


def held_tool(agent: Any, agent_name: str | None, tool_name: str) -> Tool | None:
    """The tool ``tool_name`` that ``agent`` itself holds (see :func:`holder`)."""
    found = holder(agent, agent_name, tool_name)
    return None if found is None else found.tools[tool_name]


def holder(agent: Any, agent_name: str | None, tool_name: str) -> Any:
    """The agent that holds the tool ``tool_name``: ``agent`` itself or, for a team, its
    member named ``agent_name`` — or None (R49). Approval policy, edited-argument checks and
    reviewer badges read the instance's own tools: another agent built with the same names
    (in this process or any other) never changes what this one asks about."""
    seen: set[int] = set()
    todo = [agent]  # agents and the graphs of teams, searched depth first
    while todo:
        current = todo.pop()
        if current is None or isinstance(current, str) or id(current) in seen:
            continue
        seen.add(id(current))
        tools = getattr(current, "tools", None)
        if isinstance(tools, dict) and agent_name in (None, getattr(current, "name", None)):
            if isinstance(tools.get(tool_name), Tool):
                return current
        nodes = getattr(current, "nodes", None)  # a GraphSpec
        if not isinstance(nodes, dict):
            nodes = getattr(getattr(current, "spec", None), "nodes", None)
        for node in (nodes or {}).values():
            todo.extend((getattr(node, "agent", None), getattr(node, "subgraph", None)))
    return None


P = ParamSpec("P", default=...)
R = TypeVar("R", default=Any)
# A tool keeps its function's signature for type checkers (``Tool[[user_id: int], str]``);
# the defaults make a bare ``Tool`` mean any tool, as it did before it was generic.


class ToolArgumentError(ValueError):
    """Arguments do not fit a tool's schema (becomes an observation, never crashes a run)."""


class Tool(Generic[P, R]):
    """A callable the model may ask for. Build one with :func:`tool`.

    ``destructive``: it may change the world (``HITLInterceptor().on_destructive()`` asks
    before it runs); ``annotations``: hints shown to reviewers (an MCP tool's own). Calling
    the tool calls the function, with its signature: type checkers see both."""

    destructive: bool = False
    annotations: dict[str, Any]

    def __init__(
        self,
        fn: Callable[P, R],
        name: str | None = None,
        description: str = "",
        *,
        destructive: bool = False,
    ):
        self.fn = fn
        self.destructive = bool(destructive)
        self.annotations = {}  # (a Python tool has none; MCP tools keep their server's)
        self.name = name or fn.__name__
        if not _NAME.fullmatch(self.name):
            # chat APIs accept ^[a-zA-Z0-9_-]{1,64}$ only (a lambda is named "<lambda>")
            raise ToolDefinitionError(
                f"{self.name!r} is not a tool name (letters, digits, _ and -, at most 64): "
                "name it with @tool(name=...)"
            )
        self.description = description or inspect.getdoc(fn) or self.name
        self.is_async = inspect.iscoroutinefunction(fn)
        try:
            hints = get_type_hints(fn)
        except Exception as exc:
            raise ToolDefinitionError(f"tool {self.name!r}: cannot read type hints: {exc}") from exc
        fields: dict[str, Any] = {}
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError) as exc:  # builtins and some C callables have none
            raise ToolDefinitionError(f"tool {self.name!r}: no signature to read: {exc}") from None
        self.injected: tuple[str, ...] = tuple(p for p in signature.parameters if p in INJECTED)
        for param in signature.parameters.values():
            if param.name in INJECTED:
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolDefinitionError(f"tool {self.name!r}: *args/**kwargs are not supported")
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (hints.get(param.name, Any), default)
        self.args_model: type[BaseModel] = create_model(
            # (allow_inf_nan: "inf", "nan" or a thousand nines are no float argument)
            f"{self.name}_args",
            __config__=ConfigDict(extra="forbid", allow_inf_nan=False),
            **fields,
        )
        self.parameters: dict[str, Any] = self.args_model.model_json_schema()
        self.parameters.pop("title", None)
        # a nested model keeps its own config (inf allowed): what it converted is checked
        self._nested = "$defs" in self.parameters

    @property
    def schema(self) -> ToolSchema:
        """The schema sent to models."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validated, coerced arguments; raises ToolArgumentError with a schema hint.
        A non-finite number (inf, -inf, nan — given, or read from a string such as a
        thousand nines) is refused wherever it sits, as the schema check refuses it."""
        where = non_finite(args)
        try:
            if where is not None:
                raise self._refused(f"{where}: {FINITE_ONLY}")
            model = self.args_model.model_validate(args)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'args'}: {e['msg']}" for e in exc.errors()
            )
            raise self._refused(problems) from None
        values = {k: getattr(model, k) for k in type(model).model_fields}
        where = non_finite(values) if getattr(self, "_nested", True) else None
        if where is not None:
            raise self._refused(f"{where}: {FINITE_ONLY}")
        return values

    def _refused(self, problems: str) -> ToolArgumentError:
        return ToolArgumentError(
            f"Invalid arguments for tool {self.name}: {problems}. "
            f"Expected JSON schema: {json.dumps(self.parameters, sort_keys=True)}"
        )

    async def invoke(
        self,
        args: dict[str, Any],
        session: Any = None,
        call_uuid: str | None = None,
        *,
        effect_id: str | None = None,
    ) -> Any:
        """Validate ``args`` and run the function (sync functions run inline).
        ``call_uuid``: the call's id (the provider's, made unique; metadata);
        ``effect_id``: the id intermission minted when the call was proposed (R48) — a
        tool that ledgers its effect keys it on this and the arguments it runs."""
        values = self.validate(args)
        if "session" in self.injected:
            values["session"] = session
        call: Callable[..., Any] = self.fn  # (by name, as the model gave them)
        result = call(**values)
        if inspect.isawaitable(result):
            result = await result
        return result

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the underlying function directly."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


def observation_text(result: Any) -> str:
    """How a tool result is shown to the model."""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...
@overload
def tool(
    *, name: str | None = None, description: str = "", destructive: bool = False
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str = "",
    destructive: bool = False,
) -> Tool[..., Any] | Callable[[Callable[..., Any]], Tool[..., Any]]:
    """Turn a typed function (sync or async) into a :class:`Tool`.

    ``destructive=True`` marks a tool that may change the world (see
    ``HITLInterceptor.on_destructive``).

    Example:
        ```python
        from intermission import (HITL, HITLInterceptor, InMemoryAgentSession, ReActAgent,
                                  ScriptedModel, ToolCall, tool)

        @tool(destructive=True)  # it may change the world: on_destructive() asks first
        def delete_user(user_id: int) -> str:
            "Delete a user account."
            return f"deleted {user_id}"

        print(delete_user.schema["parameters"]["properties"]["user_id"]["type"])
        #> integer
        model = ScriptedModel([[ToolCall("delete_user", {"user_id": 1001})], "Deleted."])
        hitl = HITLInterceptor().on_destructive()
        agent = ReActAgent.of(model).name("ops").tools(delete_user).interceptor(hitl).build()
        session = InMemoryAgentSession.of("s-1")
        agent.prompt("Delete user 1001").session(session).call()
        print([(t.tool_name, t.args) for t in HITL.pending_tasks(session)])
        #> [('delete_user', {'user_id': 1001})]
        ```
    """
    if name is not None and not isinstance(name, str):
        raise ToolDefinitionError(f"a tool name is text, not {type(name).__name__}")
    if not isinstance(description, str):
        raise ToolDefinitionError(f"a description is text, not {type(description).__name__}")
    if not isinstance(destructive, bool):
        raise ToolDefinitionError(f"destructive is True or False, not {type(destructive).__name__}")
    if fn is not None:
        if not callable(fn):
            raise ToolDefinitionError(f"@tool takes a function, not {type(fn).__name__}")
        return Tool(fn, name, description, destructive=destructive)
    return lambda f: Tool(f, name, description, destructive=destructive) if callable(f) else tool(f)
