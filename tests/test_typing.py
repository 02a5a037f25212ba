"""A user's project type-checks against the public API (issue 29): ``mypy --strict`` on a
small project outside the repository, with ``reveal_type`` checks of what the API returns
(``@tool`` keeps the function's signature), and a file of mistakes mypy must catch — a tool
called with the wrong arguments, a name ``intermission`` does not export."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests._helpers import need_module

APP = '''
from __future__ import annotations

from intermission import (HITL, HITLDecision, HITLInterceptor, InMemoryAgentSession,
                          ReActAgent, ScriptedModel, Tool, ToolCall, tool)
from intermission.stores import SQLiteStore, open_store


@tool
def delete_user(user_id: int) -> str:
    """Delete a user account."""
    return f"user {user_id} deleted"


@tool(name="lookup", destructive=False)
async def lookup(user_id: int, verbose: bool = False) -> dict[str, int]:
    """Look a user up."""
    return {"id": user_id}


reveal_type(delete_user)  # Tool[[user_id: int], str]
reveal_type(delete_user(1001))  # str
reveal_type(lookup)  # Tool[[user_id: int, verbose: bool =], Coroutine[Any, Any, dict[str, int]]]
tools: list[Tool] = [delete_user, lookup]  # a bare Tool is any tool

model = ScriptedModel([[ToolCall("delete_user", {"user_id": 1001})], "User 1001 deleted."])
agent = (ReActAgent.of(model).name("ops").tools(delete_user)
         .interceptor(HITLInterceptor().on_tool("delete_user")).build())
reveal_type(agent)  # ReActAgent
session = InMemoryAgentSession.of("s-1")
response = agent.prompt("delete user 1001").session(session).call()
reveal_type(response)  # AgentResponse
reveal_type(response.content)  # str
(task,) = HITL.pending_tasks(session)
reveal_type(task)  # HITLTask
reveal_type(HITLDecision.approve().comment("confirmed"))  # HITLDecision
reveal_type(agent.prompt().session(session).stream())  # EventStream

store = open_store("app.sqlite")
reveal_type(store)  # SessionStore
reveal_type(SQLiteStore("app.sqlite"))  # SQLiteStore


async def later() -> None:
    reveal_type(await agent.prompt().session(session).call_async())  # AgentResponse
'''

MISTAKES = """
from __future__ import annotations

from intermission import tool
from intermission import open_store  # error: not exported here (intermission.stores has it)


@tool
def delete_user(user_id: int) -> str:
    return f"user {user_id} deleted"


delete_user("1001")  # error: a str for an int
delete_user(user_id=1, force=True)  # error: no such argument
n: int = delete_user(1)  # error: it returns str
"""

REVEALED = re.compile(r'^(\w+)\.py:(\d+): note: Revealed type is "(.*)"$')
FOUND = re.compile(r"^(\w+)\.py:(\d+): error: ")


def _short(name: str) -> str:
    """``intermission.agents.tools.Tool[...]`` → ``Tool[...]``; ``typing.X`` → ``X``."""
    return re.sub(r"\b(?:[a-z_][a-z0-9_]*\.)+(?=[A-Za-z_])", "", name)


def test_a_users_project_passes_mypy_strict_and_sees_the_apis_types(tmp_path: Path) -> None:
    need_module("mypy", "mypy (pip install mypy)")
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "mistakes.py").write_text(MISTAKES)
    (tmp_path / "mypy.ini").write_text("[mypy]\nstrict = True\n")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / ".mypy_cache"),
         "--no-error-summary", "--hide-error-context", "--no-pretty", "app.py", "mistakes.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    sources = {"app": APP.splitlines(), "mistakes": MISTAKES.splitlines()}

    def source(file: str, line: str) -> str:
        return sources[file][int(line) - 1]

    errors = [m for m in map(FOUND.match, lines) if m]
    assert [line for line in lines if line.startswith("app.py") and ": error:" in line] == []
    wanted = {i + 1 for i, text in enumerate(sources["mistakes"]) if "# error" in text}
    caught = {int(m.group(2)) for m in errors if m.group(1) == "mistakes"}
    assert caught == wanted, f"mypy caught lines {caught}, expected {wanted}:\n{done.stdout}"
    revealed = {int(m.group(2)): _short(m.group(3)) for m in map(REVEALED.match, lines) if m}
    expected = {
        i + 1: text.split("  # ", 1)[1]
        for i, text in enumerate(sources["app"])
        if text.lstrip().startswith("reveal_type(")
    }
    assert revealed == expected, done.stdout
    assert all("reveal_type" in source("app", str(n)) for n in revealed)
