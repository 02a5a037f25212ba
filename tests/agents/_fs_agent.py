"""The real reference MCP filesystem server (``@modelcontextprotocol/server-filesystem``,
pinned in tests/js) and a scripted agent that writes with it, shared by the tests of
issue 20 and the worker processes they start and SIGKILL."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from intermission import HITLInterceptor, ReActAgent, ReActInterceptor, ScriptedModel, ToolCall
from intermission.stores import open_store

ROOT = Path(__file__).resolve().parents[2]
SERVER_JS = ROOT / "tests/js/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"


def fs_argv(*allowed: Path) -> list[str]:
    """The server's command line: node, its script, the directories it may touch."""
    return ["node", str(SERVER_JS), *map(str, allowed)]


def fs_agent(tools: Any, tool_name: str, args: dict[str, Any], *extra: Any) -> ReActAgent:
    """One call of ``tool_name`` (asked for by on_destructive), then an answer."""
    model = ScriptedModel([[ToolCall(tool_name, args, "w1")], "Done."])
    hitl = HITLInterceptor().on_destructive()
    return ReActAgent.of(model).tools(*tools).interceptor(hitl, *extra).build()


class CrashAfter(ReActInterceptor):
    """SIGKILL this process right after the server answered ``tool_name`` — before the
    session is saved (the ledger entry is whatever the store already holds)."""

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name

    def on_tool_call_end(self, trace: Any, ex: Any, *rest: Any) -> None:
        if ex.tool_name == self.tool_name:
            os.kill(os.getpid(), signal.SIGKILL)


class AnHourLater:
    """A clock an hour ahead: the claim a killed process left behind has lapsed."""

    def now_ms(self) -> float:
        return time.time() * 1000.0 + 3_600_000.0


def resume(where: str, session_id: str, argv: list[str], tool_name: str, args: str,
           crash: bool) -> None:  # fmt: skip
    """Resume the approved session in this (worker) process, with a freshly started
    server; ``crash``: die by SIGKILL once the server answered."""
    import json

    from intermission import mcp_tools

    # the run after a crash comes "an hour later": the dead process's claim has lapsed
    store = open_store(where) if crash else open_store(where, clock=AnHourLater())
    with mcp_tools(command=argv) as tools:
        extra = [CrashAfter(tool_name)] if crash else []
        agent = fs_agent(tools, tool_name, json.loads(args), *extra)
        with store.resume(session_id) as s:
            print(agent.prompt().session(s).call().content)
    store.close()
