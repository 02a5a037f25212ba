"""Issue 20, cases 1, 2 and 3, against the real reference MCP filesystem server
(``@modelcontextprotocol/server-filesystem``, pinned in tests/js; CI runs ``npm ci
--prefix tests/js``): an approved call runs once, whatever the server says of idempotence
and however its command line changes; approval follows the tools the agent instance holds
(R48, R49).

Cases 1 and 2 kill the resuming process for real (SIGKILL right after the server answered,
before the session is saved), then a person edits the file, then the session resumes in
another process: the approved write is not sent again. A process that dies holds no
memory store, so these run on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need, need_module, pg_dsn
from tests.agents._fs_agent import ROOT, SERVER_JS, fs_agent, fs_argv

from intermission import (
    HITL,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    InvalidDecisionError,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    mcp_tools,
    tool,
)
from intermission.stores import open_store


@pytest.fixture(autouse=True)
def _server_installed() -> None:
    need_module("mcp", "the mcp extra (pip install intermission[mcp])")
    need(SERVER_JS.exists(), "@modelcontextprotocol/server-filesystem (npm ci --prefix tests/js)")


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store both this process and the workers open (emptied first)."""
    if request.param == "sqlite":
        return str(tmp_path / "s.sqlite")
    from tests._helpers import fresh_pg

    fresh_pg().close()
    return pg_dsn()


def _pause_and_approve(where: str, sid: str, argv: list[str], name: str, args: Any) -> None:
    store = open_store(where)
    with mcp_tools(command=argv) as tools:
        s = InMemoryAgentSession.of(sid)
        fs_agent(tools, name, args).prompt("change the notes").session(s).call()
        (task,) = HITL.pending_tasks(s)  # destructive: it asks
        assert task.tool_name == name and s.is_pending
        HITL.submit(s, task, HITLDecision.approve().reviewer("lead"))
        store.save(s)
    store.close()


def _resume(where: str, sid: str, argv: list[str], name: str, args: Any, *, crash: bool) -> Any:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.agents._fs_agent import resume\n"
        f"resume({where!r}, {sid!r}, {argv!r}, {name!r}, {json.dumps(args)!r}, {crash!r})\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=ROOT
    )


def test_an_approved_idempotent_hinted_write_is_not_sent_again_after_a_sigkill(
    where: str, tmp_path: Path
) -> None:
    """Case 1: ``write_file`` says ``idempotentHint: true``; it still goes through the
    ledger, so the resume after the crash does not overwrite the person's edit."""
    files = tmp_path / "files"
    files.mkdir()
    notes = files / "notes.txt"
    notes.write_text("v0\n")
    argv = fs_argv(files)
    args = {"path": str(notes), "content": "approved\n"}
    _pause_and_approve(where, "fs-1", argv, "write_file", args)

    crashed = _resume(where, "fs-1", argv, "write_file", args, crash=True)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert notes.read_text() == "approved\n"  # the server answered before the kill

    notes.write_text("a person's edit\n")  # the world moves on meanwhile
    again = _resume(where, "fs-1", argv, "write_file", args, crash=False)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.strip() == "Done."
    assert notes.read_text() == "a person's edit\n"  # the approved write was not sent again

    store = open_store(where)
    done = store.load("fs-1")
    assert done.status == "done"
    (key,) = done.ledger  # ours: the server's own name, an effect id, the args' fingerprint
    assert key.startswith("mcp/secure-filesystem-server/write_file/")
    assert done.ledger[key].status == "completed"
    store.close()


def test_the_same_server_with_one_more_allowed_directory_is_the_same_server(
    where: str, tmp_path: Path
) -> None:
    """Case 2: the connection's identity is the server's ``serverInfo`` name, not its
    argv: resuming with one more directory at the end of the command line does not send
    the approved ``edit_file`` again (``vv``, not ``vvv``)."""
    files, more = tmp_path / "files", tmp_path / "more"
    files.mkdir()
    more.mkdir()
    notes = files / "notes.txt"
    notes.write_text("v\n")
    args = {"path": str(notes), "edits": [{"oldText": "v", "newText": "vv"}]}
    _pause_and_approve(where, "fs-2", fs_argv(files), "edit_file", args)

    crashed = _resume(where, "fs-2", fs_argv(files), "edit_file", args, crash=True)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert notes.read_text() == "vv\n"

    notes.write_text("vv\nand a person's line\n")
    again = _resume(where, "fs-2", fs_argv(files, more), "edit_file", args, crash=False)
    assert again.returncode == 0, again.stderr[-2000:]
    assert notes.read_text() == "vv\nand a person's line\n"


def test_another_agent_with_the_same_name_changes_nothing_about_what_asks(
    tmp_path: Path,
) -> None:
    """Case 3: agent A (default name) holds the real filesystem tools under
    on_destructive; building agent B with the same name and a harmless local
    ``write_file`` does not make A's real write run without approval — nor does it
    change how A's edited arguments are checked, or what A's reviewers are shown."""
    files = tmp_path / "files"
    files.mkdir()
    notes = files / "notes.txt"
    notes.write_text("v0\n")
    with mcp_tools(command=fs_argv(files)) as tools:
        a = fs_agent(tools, "write_file", {"path": str(notes), "content": "A wrote\n"})

        @tool
        def write_file(text: str) -> str:
            """Write to a scratch buffer (harmless)."""
            return f"buffered {text}"

        b = ReActAgent.of(ScriptedModel(["hi"])).tools(write_file).build()
        assert b.name == a.name
        b2 = (
            ReActAgent.of(ScriptedModel(["hi"]))
            .tools(write_file)
            .interceptor(HITLInterceptor().on_destructive())
            .build()
        )  # built last, with an interceptor like A's
        assert b2.name == a.name

        s = InMemoryAgentSession.of("fs-3")
        a.prompt("write").session(s).call()
        assert s.is_pending and notes.read_text() == "v0\n"  # A's write still waits
        (task,) = HITL.pending_tasks(s)

        # edited arguments are checked by A's tool (the server's schema), not B's
        with pytest.raises(InvalidDecisionError):
            HITL.submit(s, task, HITLDecision.approve().modified_args({"content": 5}))
        HITL.submit(s, task, HITLDecision.approve().modified_args({"content": "edited\n"}))
        assert a.prompt().session(s).call().content == "Done."
        assert notes.read_text() == "edited\n"

        # B's harmless tool never asks: the policy reads each instance's own tools
        s_b = InMemoryAgentSession.of("fs-3b")
        b_script = ReActAgent.of(
            ScriptedModel([[ToolCall("write_file", {"text": "x"})], "ok"])
        ).tools(write_file).interceptor(HITLInterceptor().on_destructive()).build()
        assert b_script.prompt("go").session(s_b).call().content == "ok"


def test_the_hitl_panel_badges_come_from_the_panels_agent(tmp_path: Path) -> None:
    """Case 3, the reviewer's view: the badges of A's pending call say what A's tool is
    (an MCP server's destructive tool), whatever agent was built last with that name."""
    need_module("ipywidgets", "the notebook extra")
    from intermission.notebook.hitl_panel import HITLPanel

    files = tmp_path / "files"
    files.mkdir()
    with mcp_tools(command=fs_argv(files)) as tools:
        a = fs_agent(tools, "write_file", {"path": str(files / "n.txt"), "content": "x"})

        @tool
        def write_file(text: str) -> str:
            """Harmless."""
            return text

        ReActAgent.of(ScriptedModel(["hi"])).tools(write_file).build()
        s = InMemoryAgentSession.of("fs-3p")
        a.prompt("write").session(s).call()
        panel = HITLPanel(a, s)
        head = next(iter(panel.rows.values())).head
        assert "MCP · secure-filesystem-server" in head and "destructive" in head
        assert "idempotent" in head
