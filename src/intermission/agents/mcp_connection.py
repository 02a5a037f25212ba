"""One MCP server connection (extra ``mcp``, R46, R48): a stdio subprocess or a
streamable-HTTP URL, on a thread and event loop of its own, reconnecting when the server
went away.

A connection's identity — what ledger keys of its calls are named by — is the ``name=``
it was given, else the name the server gives itself in its initialize result
(``serverInfo.name``), never its command line or URL: the same server started with other
arguments (one more allowed directory) is the same server, and its approved calls are not
sent again (R48).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import tempfile
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from .. import _check
from .._check import shown
from .._compat import require
from ..errors import ToolDefinitionError, ToolUnavailableError, UsageError

__all__ = ["MCPConnection"]


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
        self.explicit_name = name
        self.name: str = name or ""
        """The connection's identity (R48): ``name=``, else the server's ``serverInfo``
        name once connected (empty before). Ledger keys of its calls start with it."""
        self.server_info: dict[str, Any] | None = None
        """What the server said of itself at the first connection (name, version…)."""
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
                )  # (the thread's name is for people reading a stack dump only)
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
        if self.server_info is None:
            self._identify(client)

    def _identify(self, client: Any) -> None:
        """Take the server's own name (``serverInfo``) as the identity when no ``name=``
        was given. Only at the first connection: a server that renames itself later does
        not rename the effects already ledgered under the first name."""
        info = getattr(client, "server_info", None)
        told = {
            k: v
            for k in ("name", "version", "title")
            if isinstance(v := getattr(info, k, None), str) and v
        }
        self.server_info = told
        if not self.name:
            self.name = told.get("name", "")

    def identity(self) -> str:
        """The name ledger keys of this server's calls use (R48); a typed error when the
        server did not name itself and no ``name=`` was given (never the argv)."""
        if not self.name:
            where = " ".join(self.command) if self.command else self.url
            raise ToolDefinitionError(
                f"the MCP server at {where} does not name itself (no serverInfo name): "
                "give the connection a name, mcp_tools(..., name='...'), so its approved "
                "calls are recognised when the session resumes"
            )
        return self.name

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
            f"{what}MCP server {self.name or '(unnamed)'!r} ({where}) is unavailable {when}: "
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
