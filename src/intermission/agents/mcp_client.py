"""Tools served over the Model Context Protocol (extra ``mcp``, R46).

``mcp_tools(command=[...])`` starts a server as a subprocess and talks to it over stdio;
``mcp_tools(url=...)`` connects over streamable HTTP. Either way the server's tools come
back as intermission tools — names, descriptions and JSON schemas from the server, its
annotations kept (``destructiveHint``…), so ``HITLInterceptor().on_destructive()`` and
``on_tool(name)`` treat them like any tool.

The connection lives on a thread of its own with its own event loop: a sync ``call()``, an
``asyncio`` run and a notebook cell can all use the same tools. It reconnects when the
server went away. Every call goes through the session's ledger, keyed by the call UUID:
an approved call runs once even when the session resumes in another process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import tempfile
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from .. import _check
from .._check import shown
from .._compat import require
from ..errors import ToolDefinitionError, ToolUnavailableError, UsageError
from .tools import Tool, ToolArgumentError, observation_text

__all__ = ["MCPConnection", "MCPTool", "MCPTools", "mcp_tools"]

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


class MCPConnection:
    """One MCP server: a stdio subprocess (``command``) or a streamable-HTTP ``url``.

    Connects on first use, on its own thread and event loop; a dropped connection is
    opened again on the next call. ``close()`` (or the end of the process) stops it.
    """

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        url: str | None = None,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        timeout_s: float = 30.0,
        errlog: Any = None,
    ) -> None:
        if (command is None) == (url is None):
            raise UsageError("mcp_tools takes command=[...] (stdio) or url=... (HTTP), one of them")
        if command is not None and not (
            isinstance(command, (list, tuple))
            and command
            and all(isinstance(c, str) and c and "\x00" not in c for c in command)
        ):
            raise UsageError(
                "command is the server's argv as a list of strings, e.g. "
                f"[sys.executable, 'server.py'], not {shown(command)}"
            )
        if url is not None and not (
            isinstance(url, str)
            and url.startswith(("http://", "https://"))
            and url.isprintable()
            and len(url) <= 2048
        ):
            raise UsageError(
                f"url is the http(s) URL of a streamable-HTTP MCP server, not {shown(url)}"
            )
        _check.number("timeout_s", timeout_s, 0.001, 86_400)
        if env is not None and not (
            isinstance(env, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            raise UsageError(f"env maps variable names to strings, not {shown(env)}")
        _check.text("name", name, optional=True, empty=False)
        self.command = list(command) if command is not None else None
        self.url = url
        self.env = dict(env) if env is not None else None
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.name = name or (os.path.basename(self.command[-1]) if self.command else str(url))
        self.timeout_s = float(timeout_s)
        self.errlog = errlog
        self._errfile: Any = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._held: asyncio.Future[None] | None = None
        self._connecting = asyncio.Lock()
        self.connects = 0
        """How many times a connection was opened (1 + reconnections)."""
        weakref.finalize(self, MCPConnection._shutdown, self.__dict__)

    # -- the background loop -------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=f"intermission-mcp-{self.name}", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
                self._connecting = asyncio.Lock()  # (used on this loop only)
            return self._loop

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        """Run ``coro`` on the connection's loop from any thread (blocking)."""
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:  # (not the builtin one before 3.11)
            future.cancel()
            raise TimeoutError(f"no answer within {timeout} s") from None

    def _transport(self) -> Any:
        if self.url is not None:
            return self.url
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert self.command is not None
        params = StdioServerParameters(
            command=self.command[0], args=self.command[1:], env=self.env, cwd=self.cwd
        )
        return stdio_client(params, errlog=self._errlog())

    def _errlog(self) -> Any:
        """Where a stdio server's stderr goes: ``errlog`` when given, else a file of our
        own (a notebook would show the server's log in whatever cell runs a tool); its
        last lines go into the error when the server fails."""
        if self.errlog is not None:
            return self.errlog
        if self._errfile is None:
            self._errfile = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        return self._errfile

    def stderr_tail(self, lines: int = 8) -> str:
        """The last lines a stdio server wrote to its stderr (when we keep it)."""
        if self._errfile is None:
            return ""
        try:
            self._errfile.flush()
            self._errfile.seek(0)
            text = self._errfile.read()[-20_000:]
            self._errfile.seek(0, os.SEEK_END)
        except (OSError, ValueError):
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    async def _connected(self) -> Any:
        """The open client, connecting first when there is none (on the loop thread).
        Calls that find no client at the same moment wait for one connection together,
        rather than each starting a server."""
        if self._client is not None:
            return self._client
        async with self._connecting:
            if self._client is None:
                await self._connect()
            return self._client

    async def _connect(self) -> None:
        mcp = require("mcp", "mcp")
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()

        async def hold() -> None:
            # the client is entered and left in this one task (anyio's cancel scopes
            # require it); calls from other tasks of this loop use it meanwhile
            try:
                kwargs: dict[str, Any] = {"read_timeout_seconds": self.timeout_s}
                async with mcp.Client(self._transport(), **kwargs) as client:
                    ready.set_result(client)
                    await stop.wait()
            except BaseException as exc:
                if not ready.done():
                    if isinstance(exc, asyncio.CancelledError):
                        ready.cancel()
                    else:
                        ready.set_exception(exc)
                        ready.exception()  # (whoever waits still gets it; no "never retrieved")
            finally:
                self._client = None

        task = asyncio.ensure_future(hold())
        try:
            client = await asyncio.wait_for(asyncio.shield(ready), self.timeout_s)
        except BaseException:
            stop.set()
            task.cancel()
            try:  # let the transport stop the server it started before going on
                await asyncio.wait_for(task, 10)
            except BaseException:
                pass
            raise
        self._client, self._stop, self._held = client, stop, task
        self.connects += 1

    async def _drop(self) -> None:
        stop, task = self._stop, self._held
        self._client = self._stop = self._held = None
        if stop is not None:
            stop.set()
        if task is not None:
            try:
                await asyncio.wait_for(task, 5)
            except BaseException:  # a transport that will not close cleanly: let it go
                pass

    # -- what tools use -------------------------------------------------------------------
    def list_tools(self) -> list[Any]:
        """The server's tool descriptions (``mcp.types.Tool``)."""

        async def listing() -> list[Any]:
            try:
                client = await self._connected()
                tools: list[Any] = []
                cursor = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        return tools
            except Exception as exc:
                await self._drop()
                raise self._unavailable(exc, "", sent=False) from exc

        try:  # (room for the transport to stop a server that never answered)
            result: list[Any] = self._run(listing(), self.timeout_s * 2 + 15)
        except TimeoutError as exc:
            raise self._unavailable(exc, "", sent=False) from None
        return result

    async def call(self, tool: str, args: dict[str, Any]) -> Any:
        """Call ``tool`` on the server (from any event loop); returns the CallToolResult."""

        async def calling() -> Any:
            try:
                client = await self._connected()
            except Exception as exc:  # nothing was sent: safe to try again later
                await self._drop()
                raise self._unavailable(exc, tool, sent=False) from exc
            try:
                return await client.call_tool(tool, args)
            except Exception as exc:
                if _is_protocol_error(exc):
                    raise  # the server answered (an error): not a lost connection
                await self._drop()  # the next call connects anew
                raise self._unavailable(exc, tool, sent=True) from exc

        future = asyncio.run_coroutine_threadsafe(calling(), self._ensure_loop())
        return await asyncio.wrap_future(future)

    def _unavailable(self, exc: BaseException, tool: str, *, sent: bool) -> ToolUnavailableError:
        where = " ".join(self.command) if self.command else self.url
        what = f"tool {tool!r} of " if tool else ""
        when = "during the call (it may have run)" if sent else "(nothing was sent)"
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)) and not str(exc):
            exc = TimeoutError(f"no answer within {self.timeout_s:g} s")
        tail = self.stderr_tail()
        told = f"\nThe server's stderr ends with:\n{tail}" if tail else ""
        return ToolUnavailableError(
            f"{what}MCP server {self.name!r} ({where}) is unavailable {when}: "
            f"{type(exc).__name__}: {exc}. The session stays resumable: resume it once the "
            f"server is back.{told}",
            tool=tool,
            sent=sent,
        )

    def close(self) -> None:
        """Close the connection (stops a stdio server) and its thread."""
        MCPConnection._shutdown(self.__dict__)

    @staticmethod
    def _shutdown(state: dict[str, Any]) -> None:
        MCPConnection._stop_loop(state)
        errfile = state.get("_errfile")
        if errfile is not None:
            state["_errfile"] = None
            errfile.close()

    @staticmethod
    def _stop_loop(state: dict[str, Any]) -> None:
        loop = state.get("_loop")
        if loop is None or loop.is_closed():
            return
        stop, task = state.get("_stop"), state.get("_held")

        async def down() -> None:
            if stop is not None:
                stop.set()
            if task is not None:
                try:
                    await asyncio.wait_for(task, 5)
                except BaseException:
                    pass

        if loop.is_running() and threading.current_thread() is not state.get("_thread"):
            try:
                asyncio.run_coroutine_threadsafe(down(), loop).result(10)
            except Exception:
                pass
            loop.call_soon_threadsafe(loop.stop)
            thread = state.get("_thread")
            if thread is not None:
                thread.join(5)
        if not loop.is_running():
            loop.close()
        state["_client"] = None

    def __enter__(self) -> MCPConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = " ".join(self.command) if self.command else self.url
        return f"<MCPConnection {self.name!r} ({where})>"


def _is_protocol_error(exc: BaseException) -> bool:
    """An error the server sent back (JSON-RPC), as opposed to a connection that closed or
    a request that timed out (the SDK's own codes, never sent by a server)."""
    try:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, MCPError) and exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT)


class MCPTool(Tool):
    """A tool of an MCP server: its schema, description and annotations are the
    server's; calls go through the session's ledger (``mcp/<server>/<tool>/<call UUID>``),
    so an approved call runs once however often the session resumes — except calls of
    tools the server calls read-only or idempotent, which are safe to repeat."""

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
        self.ledgered = not (
            self.annotations.get("readOnlyHint") is True
            or self.annotations.get("idempotentHint") is True
        )
        """Calls go through the ledger unless repeating one is harmless (read-only or
        idempotent by the server's word): those are not worth a ledger entry each."""
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

    async def invoke(
        self, args: dict[str, Any], session: Any = None, call_uuid: str | None = None
    ) -> Any:
        """Validate, then call the server once per call UUID (through the ledger)."""
        values = self.validate(args)
        once = getattr(session, "once_async", None)
        if once is not None and call_uuid and self.ledgered:
            key = f"mcp/{self.connection.name}/{self.mcp_name}/{call_uuid}"
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


class MCPTools(list):  # type: ignore[type-arg]
    """The tools of one MCP server (a list of :class:`MCPTool`), with its ``connection``;
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
    return tools


