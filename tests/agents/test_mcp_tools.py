"""MCP tools (R46) against a real MCP server built with the official SDK
(tests/mcp_ops_server.py), run as a stdio subprocess and as a streamable-HTTP server on
127.0.0.1, started and stopped here. The server counts its calls in a file: "ran once"
means the server saw one call."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module

from intermission import (
    HITL,
    EffectOutcomeUnknownError,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    NothingToResumeError,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    ToolUnavailableError,
    UsageError,
    mcp_tools,
    tool,
)
from intermission.agents.tools import ToolArgumentError
from intermission.stores import SQLiteStore

SERVER = Path(__file__).resolve().parents[1] / "mcp_ops_server.py"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _mcp_installed() -> None:
    need_module("mcp", "the mcp extra (pip install intermission[mcp])")


@pytest.fixture
def counts(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


def calls(path: Path, tool_name: str | None = None) -> int:
    if not path.exists():
        return 0
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sum(1 for r in rows if tool_name is None or r["tool"] == tool_name)


def stdio(counts: Path) -> Any:
    return mcp_tools(
        command=[sys.executable, str(SERVER)], env={"MCP_COUNT_FILE": str(counts)}, name="ops"
    )


def _running(marker: str) -> bool:
    """Is a process whose command line holds ``marker`` running? (/proc, no procps)"""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpServer:
    """The test server over streamable HTTP, as a process this test starts and stops."""

    def __init__(self, counts: Path, port: int | None = None) -> None:
        self.counts = counts
        self.port = port or _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> HttpServer:
        env = {**os.environ, "MCP_COUNT_FILE": str(self.counts)}
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), "http", str(self.port)], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("the MCP HTTP server exited at start") from None
                time.sleep(0.1)
        raise RuntimeError("the MCP HTTP server did not start in 30 s")

    def kill(self) -> None:
        """A crash: SIGKILL, no graceful shutdown (which would finish calls in flight)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


@pytest.fixture
def http(counts: Path) -> Iterator[HttpServer]:
    server = HttpServer(counts).start()
    yield server
    server.stop()


def ops_agent(tools: Any, *, hitl: HITLInterceptor | None = None, user: int = 7) -> Any:
    """A scripted agent that looks a user up, deletes it, then answers."""
    model = ScriptedModel(
        [
            [ToolCall("get_user", {"user_id": user}), ToolCall("delete_user", {"user_id": user})],
            "User deleted.",
        ]
    )
    return (
        ReActAgent.of(model)
        .name("ops")
        .tools(*tools)
        .interceptor(hitl or HITLInterceptor().on_destructive())
        .build()
    )


def test_tools_come_with_the_servers_names_schemas_and_annotations(counts: Path) -> None:
    with stdio(counts) as tools:
        by_name = {t.name: t for t in tools}
        assert set(by_name) == {
            "get_user", "delete_user", "rename_user", "add_note", "failing_lookup", "slow_delete",
        }  # fmt: skip
        get = by_name["get_user"]
        assert get.description == "Look up a user account by id."
        assert get.schema["parameters"]["properties"]["user_id"]["type"] == "integer"
        assert get.annotations == {"title": "Look up a user", "readOnlyHint": True}
        # destructive: true, or unset (fail closed); not: read-only, or destructiveHint false
        assert {n for n, t in by_name.items() if t.destructive} == {
            "delete_user", "rename_user", "slow_delete",
        }  # fmt: skip
        assert get(user_id=3) == "user 3: alice (active)"  # callable directly too
        assert calls(counts, "get_user") == 1
    prefixed = mcp_tools(
        command=[sys.executable, str(SERVER)], prefix="crm_", include=["get_user"]
    )
    try:
        assert [t.name for t in prefixed] == ["crm_get_user"]
        assert prefixed[0](user_id=5) == "user 5: alice (active)"  # called by the server's name
    finally:
        prefixed.close()


def test_on_destructive_asks_for_destructive_tools_only_and_the_call_runs_once(
    counts: Path,
) -> None:
    with stdio(counts) as tools:
        agent = ops_agent(tools)
        s = InMemoryAgentSession.of("mcp-1")
        r = agent.prompt("delete user 7").session(s).call()
        assert r.is_abnormal and s.is_pending
        task, = HITL.pending_tasks(s)  # the read-only lookup does not ask
        assert task.tool_name == "delete_user" and "destructive" in task.reason
        assert calls(counts) == 0  # the whole batch waits before anything runs
        HITL.submit(s, task, HITLDecision.approve().comment("ok"))
        assert agent.prompt().session(s).call().content == "User deleted."
        assert calls(counts, "delete_user") == 1 and calls(counts, "get_user") == 1
        ends = [e for e in s.events if e.kind == "tool_call_end"]
        assert [(e.tool_name, e.observation, e.error) for e in ends] == [
            ("get_user", "user 7: alice (active)", None),
            ("delete_user", "user 7 deleted (Note: ok)", None),  # the comment goes along
        ]
        with pytest.raises(NothingToResumeError):  # a second resume runs nothing
            agent.prompt().session(s).call()
        assert calls(counts, "delete_user") == 1
        keys = list(s.ledger)  # the destructive call went through the ledger, the lookup not
        assert len(keys) == 1 and keys[0].startswith("mcp/ops/delete_user/")


def test_python_tools_marked_destructive_and_named_policies_work_alongside(counts: Path) -> None:
    @tool(destructive=True)
    def wipe_disk(disk: str) -> str:
        """Erase a disk."""
        return f"{disk} wiped"

    @tool
    def ping(host: str) -> str:
        """Ping a host."""
        return f"{host} is up"

    assert wipe_disk.destructive and not ping.destructive
    with stdio(counts) as tools:
        model = ScriptedModel(
            [
                [
                    ToolCall("wipe_disk", {"disk": "sda"}), ToolCall("ping", {"host": "db"}),
                    ToolCall("add_note", {"user_id": 1, "note": "hi"}),
                ],
                "ok",
            ]
        )  # fmt: skip
        hitl = HITLInterceptor().on_destructive().on_tool("add_note")  # add_note: by name
        agent = ReActAgent.of(model).name("ops2").tools(*tools, wipe_disk, ping)
        agent = agent.interceptor(hitl).build()
        s = InMemoryAgentSession.of("mcp-2")
        agent.prompt("go").session(s).call()
        assert sorted(t.tool_name for t in HITL.pending_tasks(s)) == ["add_note", "wipe_disk"]
        for t in HITL.pending_tasks(s):
            HITL.submit(s, t, HITLDecision.reject("not today"))
        assert agent.prompt().session(s).call().content == "ok"
        assert calls(counts) == 0  # both rejected: the server saw nothing


def test_tool_errors_and_bad_arguments_become_observations(counts: Path) -> None:
    with stdio(counts) as tools:
        model = ScriptedModel(
            [
                [
                    ToolCall("failing_lookup", {"user_id": 5}),
                    ToolCall("get_user", {"user_id": "not a number"}),
                ],
                "handled",
            ]
        )
        agent = ReActAgent.of(model).name("ops3").tools(*tools).build()
        s = InMemoryAgentSession.of("mcp-3")
        assert agent.prompt("look").session(s).call().content == "handled"
        fail, bad = [e for e in s.events if e.kind == "tool_call_end"]
        assert fail.error == "error" and "MCPToolError" in fail.observation
        assert bad.error == "invalid_arguments" and "user_id" in bad.observation
        assert calls(counts, "failing_lookup") == 1 and calls(counts, "get_user") == 0


def test_a_non_finite_number_is_no_mcp_tool_argument(counts: Path) -> None:
    """JSON Schema's ``number`` takes a float that is not finite; the tool's validation
    refuses it, as a Python tool's does (before: inf passed and the call went out)."""
    with stdio(counts) as tools:
        slow = {t.name: t for t in tools}["slow_delete"]
        for bad in (math.inf, -math.inf, math.nan):
            with pytest.raises(ToolArgumentError, match="seconds: must be a finite number"):
                slow.validate({"user_id": 1, "seconds": bad})
        assert slow.validate({"user_id": 1, "seconds": 0.5}) == {"user_id": 1, "seconds": 0.5}
        assert calls(counts) == 0


WORKER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from tests.agents.test_mcp_tools import ops_agent, stdio
    from intermission import HITL
    from intermission.stores import SQLiteStore
    from pathlib import Path
    store = SQLiteStore({db!r})
    tools = stdio(Path({counts!r}))
    agent = ops_agent(tools)
    with store.resume("mcp-x") as s:
        HITL.approve_all(s, reviewer="bob")
    with store.resume("mcp-x") as s:
        print(agent.prompt().session(s).call().content)
    tools.close()
    """
)


def test_a_session_paused_on_an_mcp_call_is_approved_in_another_process(
    counts: Path, tmp_path: Path
) -> None:
    db = str(tmp_path / "s.sqlite")
    store = SQLiteStore(db)
    with stdio(counts) as tools:
        s = InMemoryAgentSession.of("mcp-x")
        ops_agent(tools).prompt("delete user 7").session(s).call()
        store.save(s)
    code = WORKER.format(root=str(ROOT), db=db, counts=str(counts))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "User deleted."
    assert calls(counts, "delete_user") == 1  # the new process reconnected and ran it once
    done = store.load("mcp-x")
    assert done.status == "done" and len(done.ledger) == 1
    store.close()


def test_over_http_call_async_and_stream_keep_the_hitl_event_order(
    http: HttpServer, counts: Path
) -> None:
    import asyncio

    tools = mcp_tools(url=http.url, name="ops-http")
    try:
        agent = ops_agent(tools)
        s = InMemoryAgentSession.of("mcp-h")
        kinds = [e.kind for e in agent.prompt("delete user 7").session(s).stream()]
        structural = [k for k in kinds if k != "reason_delta"]  # (text chunks left out)
        assert structural[-3:] == ["reason_end", "hitl_pending", "run_end"]  # R25
        HITL.approve_all(s)
        r = asyncio.run(agent.prompt().session(s).call_async())
        assert r.content == "User deleted." and calls(counts, "delete_user") == 1
    finally:
        tools.close()


def test_a_server_that_is_down_is_a_typed_error_and_the_session_stays_resumable(
    counts: Path, tmp_path: Path
) -> None:
    with pytest.raises(ToolUnavailableError, match="nothing was sent"):
        mcp_tools(command=[sys.executable, "-c", "import sys; sys.exit(3)"], timeout_s=10)
    with pytest.raises(ToolUnavailableError):
        mcp_tools(url=f"http://127.0.0.1:{_free_port()}/mcp", timeout_s=5)
    marker = f"never-answers-{os.getpid()}"
    with pytest.raises(ToolUnavailableError, match="no answer within 2 s"):
        mcp_tools(command=[sys.executable, "-c", "import time; time.sleep(60)", marker],
                  timeout_s=2)  # fmt: skip
    assert not _running(marker)  # the server that never answered was stopped, not left running

    server = HttpServer(counts).start()
    store = SQLiteStore(str(tmp_path / "down.sqlite"))
    tools = mcp_tools(url=server.url, name="ops-http", timeout_s=10)
    try:
        agent = ops_agent(tools)
        s = InMemoryAgentSession.of("mcp-down")
        agent.prompt("delete user 7").session(s).call()
        store.save(s)
        with store.resume("mcp-down") as s:
            HITL.approve_all(s, reviewer="alice")
        server.stop()  # the server goes away after the approval
        with pytest.raises(ToolUnavailableError), store.resume("mcp-down") as s:
            agent.prompt().session(s).call()
        kept = store.load("mcp-down")
        assert kept.is_pending and kept.hitl.decisions  # the approval is not lost
        assert calls(counts, "delete_user") == 0
        server.start()  # back on the same port: the tools reconnect
        with store.resume("mcp-down") as s:
            assert agent.prompt().session(s).call().content == "User deleted."
        assert calls(counts, "delete_user") == 1
        assert tools.connection.connects >= 2
    finally:
        tools.close()
        server.stop()
        store.close()


def test_a_connection_lost_during_a_call_leaves_its_outcome_unknown(
    counts: Path, tmp_path: Path
) -> None:
    """The server got the call and died before answering: whether it ran is unknown, so
    the ledger keeps it started and the next attempt asks a human (R39), never runs it
    blindly again."""
    server = HttpServer(counts).start()
    tools = mcp_tools(url=server.url, name="ops-http", timeout_s=10)
    try:
        model = ScriptedModel([[ToolCall("slow_delete", {"user_id": 9, "seconds": 5})], "ok"])
        agent = ReActAgent.of(model).name("ops4").tools(*tools).build()
        s = InMemoryAgentSession.of("mcp-lost")
        import threading

        def kill_soon() -> None:
            deadline = time.monotonic() + 20
            while calls(counts, "slow_delete") == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            server.kill()  # mid-call

        killer = threading.Thread(target=kill_soon)
        killer.start()
        with pytest.raises(ToolUnavailableError) as caught:
            agent.prompt("delete slowly").session(s).call()
        killer.join()
        assert caught.value.sent
        (key, entry), = s.ledger.items()
        assert entry.status == "started"
        server.start()
        with pytest.raises(EffectOutcomeUnknownError):
            agent.prompt().session(s).call()
        s.resolve_effect(key, {"text": "user 9 deleted slowly", "is_error": False})
        assert agent.prompt().session(s).call().content == "ok"
        assert calls(counts, "slow_delete") == 1  # never sent twice
    finally:
        tools.close()
        server.stop()


def test_bad_mcp_tools_arguments_are_usage_errors() -> None:
    with pytest.raises(UsageError):
        mcp_tools()
    with pytest.raises(UsageError):
        mcp_tools(command=["x"], url="http://127.0.0.1:1/mcp")
    with pytest.raises(UsageError):
        mcp_tools(command="python server.py")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        mcp_tools(url="ftp://example")
    with pytest.raises(UsageError):
        mcp_tools(command=[sys.executable, str(SERVER)], prefix="bad prefix!")


def test_tool_names_that_collide_once_made_safe_are_refused(monkeypatch: Any) -> None:
    """Chat APIs take [A-Za-z0-9_-] names: an MCP server's "get.user" becomes "get_user";
    two tools that end up with one name would shadow each other, so that is an error."""
    from types import SimpleNamespace

    from intermission import ToolDefinitionError
    from intermission.agents.mcp_client import MCPConnection

    def spec(name: str) -> Any:
        schema = {"type": "object", "properties": {}}
        return SimpleNamespace(name=name, description="", annotations=None, input_schema=schema)

    both = [spec("get.user"), spec("get_user")]
    monkeypatch.setattr(MCPConnection, "list_tools", lambda self: both)
    with pytest.raises(ToolDefinitionError, match="both become 'get_user'"):
        mcp_tools(url="http://127.0.0.1:9/mcp")
    monkeypatch.setattr(MCPConnection, "list_tools", lambda self: [spec("get.user")])
    tools = mcp_tools(url="http://127.0.0.1:9/mcp", name="fake")  # (never connects)
    assert [(t.name, t.mcp_name, t.destructive) for t in tools] == [("get_user", "get.user", True)]
    tools.close()


def test_calls_that_find_no_connection_at_once_share_one(counts: Path) -> None:
    """Two calls at the same moment on a connection not yet open start one server, not
    two (a second caller waits for the first's connection)."""
    import asyncio

    from intermission import MCPConnection

    connection = MCPConnection(
        command=[sys.executable, str(SERVER)], env={"MCP_COUNT_FILE": str(counts)}, name="ops"
    )
    try:

        async def both() -> list[Any]:
            return list(await asyncio.gather(
                connection.call("get_user", {"user_id": 1}),
                connection.call("get_user", {"user_id": 2}),
            ))  # fmt: skip

        first, second = asyncio.run(both())
        assert first.content[0].text == "user 1: alice (active)"
        assert second.content[0].text == "user 2: alice (active)"
        assert connection.connects == 1
        pids = {json.loads(line)["pid"] for line in counts.read_text().splitlines()}
        assert len(pids) == 1  # one server process answered both
    finally:
        connection.close()
