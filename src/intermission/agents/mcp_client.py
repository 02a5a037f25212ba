"""Tools served over the Model Context Protocol (extra ``mcp``, R46, R48, R49).

``mcp_tools(command=[...])`` starts a server as a subprocess and talks to it over stdio;
``mcp_tools(url=...)`` connects over streamable HTTP. Either way the server's tools come
back as intermission tools — names, descriptions and JSON schemas from the server, its
annotations kept (``destructiveHint``…), so ``HITLInterceptor().on_destructive()`` and
``on_tool(name)`` treat them like any tool.

The connection (:mod:`.mcp_connection`) lives on a thread of its own with its own event
loop: a sync ``call()``, an ``asyncio`` run and a notebook cell can all use the same tools.
Every call of a tool that is not read-only goes through the session's ledger
(:mod:`.mcp_tool`): an approved call runs once even when the session resumes in another
process, against the same server started with other arguments.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .._check import shown
from .._compat import require
from ..errors import ToolDefinitionError, UsageError
from .mcp_connection import MCPConnection
from .mcp_tool import _BAD_NAME, MCPTool, MCPToolError

__all__ = ["MCPConnection", "MCPTool", "MCPToolError", "MCPTools", "mcp_tools"]


class MCPTools(list):  # type: ignore[type-arg]
    """The tools of one MCP server (a list of :class:`MCPTool`), with its ``connection``.

    ``close()`` stops it. Usable as a context manager."""

    connection: MCPConnection

    def close(self) -> None:
        """Close the server connection."""
        self.connection.close()

    def __enter__(self) -> MCPTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def mcp_tools(
    *,
    command: Sequence[str] | None = None,
    url: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    name: str | None = None,
    prefix: str = "",
    include: Sequence[str] | None = None,
    timeout_s: float = 30.0,
    errlog: Any = None,
) -> MCPTools:
    """Connect to an MCP server and return its tools as intermission tools.

    ``command``: the server's argv, started as a subprocess spoken to over stdio
    (``[sys.executable, "server.py"]``); ``url``: a streamable-HTTP endpoint
    (``"http://127.0.0.1:8000/mcp"``). ``prefix`` is put before every tool name (two
    servers with the same tool names); ``include`` keeps only the named tools. A server
    that cannot be reached raises :class:`~intermission.errors.ToolUnavailableError`.

    ``name``: the connection's identity, which the ledger keys of its calls carry (R48);
    without it, the name the server gives itself (``serverInfo.name``). Never the command
    line: the same server started with other arguments keeps its approved calls done. A
    server that names itself not at all needs ``name=`` (ToolDefinitionError).

    Example::

        tools = mcp_tools(command=[sys.executable, "ops_server.py"])
        agent = (ReActAgent.of(model).tools(*tools)
                 .interceptor(HITLInterceptor().on_destructive()).build())
    """
    require("mcp", "mcp")
    if not isinstance(prefix, str) or _BAD_NAME.search(prefix) or len(prefix) > 32:
        raise UsageError(f"prefix is up to 32 letters, digits, _ or -, not {shown(prefix)}")
    if include is not None and not (
        isinstance(include, (list, tuple, set, frozenset))
        and all(isinstance(n, str) for n in include)
    ):
        raise UsageError(f"include is a list of tool names, not {shown(include)}")
    connection = MCPConnection(
        command=command, url=url, env=env, cwd=cwd, name=name, timeout_s=timeout_s,
        errlog=errlog,
    )  # fmt: skip
    try:
        specs = connection.list_tools()
    except BaseException:
        connection.close()  # a server that could not be listed is stopped, not left running
        raise
    wanted = set(include) if include is not None else None
    if wanted is not None:
        missing = wanted - {s.name for s in specs}
        if missing:
            connection.close()
            raise UsageError(f"the server has no tool named {sorted(missing)}")
    tools = MCPTools(
        MCPTool(connection, spec, prefix=prefix)
        for spec in specs
        if wanted is None or spec.name in wanted
    )
    tools.connection = connection
    seen: dict[str, str] = {}
    for t in tools:
        if t.name in seen:
            connection.close()
            raise ToolDefinitionError(
                f"MCP tools {seen[t.name]!r} and {t.mcp_name!r} both become {t.name!r} (names "
                "are letters, digits, _ and - only): keep one with include=[...]"
            )
        seen[t.name] = t.mcp_name
    try:
        connection.identity()  # (known once connected: refused now, not at the first call)
    except BaseException:
        connection.close()
        raise
    return tools
