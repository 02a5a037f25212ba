"""An MCP server's tool as an intermission tool (extra ``mcp``, R46, R48, R49): the
server's name, description, JSON schema and annotations; calls go through the session's
ledger.

Every call of a tool that is not ``readOnlyHint: true`` goes through the ledger, whatever
``idempotentHint`` says: "idempotent" is the server's claim about identical calls in a
row, not about the world in between — a person may have edited the file since — and an
approved effect is ours to run once. The ledger key is ours too (R48):
``mcp/<connection identity>/<tool>/<effect id>/<fingerprint of the arguments>`` — the
effect id minted when the model proposed the call (never the provider's call id) and the
hash of the arguments that run (an approval with edited arguments is another effect).
"""

from __future__ import annotations

import re
from typing import Any

from .._compat import require
from .._finite import FINITE_ONLY, non_finite
from ..decisions import fingerprint
from ..errors import ToolDefinitionError, UsageError
from .mcp_connection import MCPConnection
from .tools import Tool, ToolArgumentError, observation_text

__all__ = ["MCPTool", "MCPToolError"]

_BAD_NAME = re.compile(r"[^A-Za-z0-9_-]")
_ANNOTATION_KEYS = {
    "title": "title",
    "read_only_hint": "readOnlyHint",
    "destructive_hint": "destructiveHint",
    "idempotent_hint": "idempotentHint",
    "open_world_hint": "openWorldHint",
}


class MCPToolError(Exception):
    """The server ran the tool and reported an error (shown to the model as such)."""


def _destructive(annotations: dict[str, Any]) -> bool:
    """May the tool change the world? The MCP defaults, failing closed: a tool is
    destructive unless it says it only reads (``readOnlyHint``) or that it is not
    (``destructiveHint: false``)."""
    if annotations.get("readOnlyHint") is True:
        return False
    return annotations.get("destructiveHint") is not False


class MCPTool(Tool):
    """A tool of an MCP server; its calls, unless read-only, run once through the ledger.

    Its schema, description and annotations are the server's; every call of a tool not
    marked ``readOnlyHint: true`` goes through the session's ledger under a key of ours (see
    the module), so an approved call runs once however often, and wherever, the session
    resumes (R48, R49)."""

    def __init__(self, connection: MCPConnection, spec: Any, *, prefix: str = "") -> None:
        self.connection = connection
        self.mcp_name: str = spec.name
        name = prefix + _BAD_NAME.sub("_", spec.name)[: 64 - len(prefix)]
        self.fn = self._call_direct
        self.name = name
        self.description = spec.description or spec.name
        self.is_async = True
        self.injected = ()
        raw = getattr(spec, "annotations", None)
        self.annotations = {
            camel: getattr(raw, attr)
            for attr, camel in _ANNOTATION_KEYS.items()
            if raw is not None and getattr(raw, attr, None) is not None
        }
        self.destructive = _destructive(self.annotations)
        self.ledgered = self.annotations.get("readOnlyHint") is not True
        """Calls go through the ledger unless the tool only reads (R49); ``idempotentHint``
        changes nothing: the world may have changed between two identical calls."""
        schema = getattr(spec, "input_schema", None) or getattr(spec, "inputSchema", None)
        self.parameters = dict(schema or {"type": "object", "properties": {}})
        self.parameters.pop("title", None)
        try:
            jsonschema = require("jsonschema", "mcp")
            jsonschema.Draft202012Validator.check_schema(self.parameters)
            self._validator = jsonschema.Draft202012Validator(self.parameters)
        except Exception as exc:
            raise ToolDefinitionError(
                f"MCP tool {spec.name!r} has an input schema that is not JSON Schema: {exc}"
            ) from None

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments, checked against the server's JSON schema."""
        if not isinstance(args, dict):
            raise ToolArgumentError(f"Invalid arguments for tool {self.name}: not an object")
        where = non_finite(args)  # (JSON Schema's "number" takes inf; no tool does)
        if where is not None:
            raise ToolArgumentError(
                f"Invalid arguments for tool {self.name}: {where}: " + FINITE_ONLY
            )
        problems = [
            f"{'.'.join(map(str, e.path)) or 'args'}: {e.message}"
            for e in self._validator.iter_errors(args)
        ]
        if problems:
            raise ToolArgumentError(
                f"Invalid arguments for tool {self.name}: {'; '.join(problems)}"
            )
        return dict(args)

    async def _call_direct(self, **args: Any) -> Any:
        return await self._run(args)

    async def _run(self, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.connection.call(self.mcp_name, args)
        return {"text": _result_text(result), "is_error": bool(getattr(result, "is_error", False))}

    def effect_key(self, values: dict[str, Any], effect_id: str) -> str:
        """The ledger key of a call (R48): the connection's identity (``name=`` or the
        server's ``serverInfo`` name, never its argv), the tool, the effect id minted when
        the call was proposed and the fingerprint of the arguments that run."""
        identity = self.connection.identity()
        return f"mcp/{identity}/{self.mcp_name}/{effect_id}/{fingerprint(values)}"

    async def invoke(
        self,
        args: dict[str, Any],
        session: Any = None,
        call_uuid: str | None = None,
        *,
        effect_id: str | None = None,
        approval: Any = None,
    ) -> Any:
        """Validate, then call the server once per effect (through the ledger; an approved
        call's entry records ``approval``, the approval that authorised it, R60)."""
        values = self.validate(args)
        once = getattr(session, "once_async", None)
        effect = effect_id or call_uuid
        if once is not None and effect and self.ledgered:
            key = self.effect_key(values, effect)
            if approval is not None:
                outcome = await once(key, lambda: self._run(values), approval=approval)
            else:
                outcome = await once(key, lambda: self._run(values))
        else:
            outcome = await self._run(values)
        if outcome.get("is_error"):
            raise MCPToolError(outcome.get("text") or "the tool reported an error")
        return outcome.get("text", "")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the tool directly (blocking; outside of any run)."""
        if args:
            raise UsageError("call an MCP tool with keyword arguments")
        outcome = self.connection._run(self._run(self.validate(kwargs)))
        if outcome["is_error"]:
            raise MCPToolError(outcome["text"])
        return outcome["text"]

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r} on {self.connection.name!r})"


def _result_text(result: Any) -> str:
    """What the model reads of a CallToolResult: its text content (structured content
    when there is no text; other content types named)."""
    pieces = []
    for item in getattr(result, "content", None) or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            pieces.append(item.text)
        else:
            pieces.append(f"[{kind} content]")
    if not pieces:
        structured = getattr(result, "structured_content", None)
        if structured is not None:
            return observation_text(structured)
    return "\n".join(pieces)
