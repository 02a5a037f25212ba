"""Effect ids are numbered within the session's own generation (R48; adversary repros on the
issue-20 work): a request that crashed after an *unapproved* ledgered MCP write ran proposes
it again under the same effect id, so the write is not sent twice; and two forks of one
checkpoint, each run by a fresh process with a deterministic id factory, never share an
effect id, so each one's approved call reaches the server. Real MCP server
(tests/mcp_ops_server.py, counting what it received), real SIGKILL, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, need_module, pg_dsn

from intermission import (
    HITL,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    SequentialIds,
    ToolCall,
    mcp_tools,
)
from intermission.stores import open_store

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "mcp_ops_server.py"


@pytest.fixture(autouse=True)
def _mcp() -> None:
    need_module("mcp", "the mcp extra (pip install intermission[mcp])")


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 's.sqlite'}"
    fresh_pg().close()
    return pg_dsn()


def ops_agent(tools: Any, *extra: Any, ids: Any = None) -> Any:
    """delete_user (destructive: asks), then add_note (not destructive: no approval, but a
    write, so ledgered), then an answer."""

    def script(messages: Any, _tools: Any) -> Any:
        last = max(i for i, m in enumerate(messages) if m.role == "user")
        if "hello" in messages[last].content:
            return "Hello."
        done = sum(1 for m in messages[last:] if m.role == "tool")
        if done == 0:
            return [ToolCall("delete_user", {"user_id": 7})]
        if done == 1 and "note" in messages[last].content:
            return [ToolCall("add_note", {"user_id": 7, "note": "deleted on request"})]
        return "Done."

    builder = ReActAgent.of(ScriptedModel(script)).name("ops").tools(*tools)
    if ids is not None:
        builder = builder.ids(ids)
    return builder.interceptor(HITLInterceptor().on_destructive(), *extra).build()


class CrashAfter:
    """Kills this process right after the server answered ``name`` (before any save)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def on_tool_call_end(self, trace: Any, ex: Any, *rest: Any) -> None:
        if ex.tool_name == self.name:
            os.kill(os.getpid(), signal.SIGKILL)


class AnHourLater:
    """The second worker's clock: the killed worker's claim has lapsed by then."""

    def now_ms(self) -> float:
        import time

        return time.time() * 1000.0 + 3_600_000.0


def resume_worker(where: str, count: str, crash: bool) -> None:
    """Run in a subprocess: resume session ``s`` (and die after add_note when ``crash``)."""
    store = open_store(where) if crash else open_store(where, clock=AnHourLater())
    with mcp_tools(command=[sys.executable, str(SERVER)], env={"MCP_COUNT_FILE": count}) as tools:
        agent = ops_agent(tools, *([CrashAfter("add_note")] if crash else []))
        with store.resume("s") as s:
            print(agent.prompt().session(s).call().content)


def _seen(count: Path) -> list[str]:
    if not count.exists():
        return []
    return [json.loads(line)["tool"] for line in count.read_text().splitlines()]


def test_an_unapproved_ledgered_write_is_not_sent_again_after_a_sigkill(
    where: str, tmp_path: Path
) -> None:
    count = tmp_path / "count"
    store = open_store(where)
    with mcp_tools(command=[sys.executable, str(SERVER)], env={"MCP_COUNT_FILE": str(count)}) as t:
        agent = ops_agent(t)
        s = InMemoryAgentSession.of("s")
        agent.prompt("delete user 7 and note it").session(s).call()
        (task,) = HITL.pending_tasks(s)
        HITL.submit(s, task, HITLDecision.approve().reviewer("alice"), agent=agent)
        store.save(s)
    store.close()
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.agents.test_effect_ids_are_generational import resume_worker\n"
        "resume_worker({!r}, {!r}, {{}})\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", code.format(where, str(count)).replace("{}", "True")],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert _seen(count) == ["delete_user", "add_note"]  # the server answered, then the kill
    again = subprocess.run(
        [sys.executable, "-c", code.format(where, str(count)).replace("{}", "False")],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.strip().endswith("Done.")
    assert _seen(count) == ["delete_user", "add_note"]  # neither write was sent again


def test_forks_run_by_fresh_processes_with_sequential_ids_never_share_an_effect(
    where: str, tmp_path: Path
) -> None:
    count = tmp_path / "count"
    store = open_store(where)

    def approve_and_resume(sid: str, agent: Any) -> str:
        with store.resume(sid) as s:
            approve = HITLDecision.approve().reviewer("alice")
            decisions = {t.call_uuid: approve for t in s.hitl.tasks}
            HITL.submit_all(s, decisions, agent=agent)
            return str(agent.prompt().session(s).call().content)

    with mcp_tools(command=[sys.executable, str(SERVER)], env={"MCP_COUNT_FILE": str(count)}) as t:
        s = InMemoryAgentSession.of("R")
        ops_agent(t, ids=SequentialIds()).prompt("hello").session(s).call()  # checkpoint 0
        store.save(s)
        store.fork("R", "F", at=0)  # one family, both at the same proposal count
        for sid in ("R", "F"):  # each worked on by a "new process": a fresh SequentialIds
            agent = ops_agent(t, ids=SequentialIds())
            session = store.load(sid)
            agent.prompt("delete user 7").session(session).call()
            store.save(session)
            assert approve_and_resume(sid, agent) == "Done."
        # the fork saved under a deleted fork's id, forked again at the same checkpoint
        store.delete("F")
        store.fork("R", "F", at=0)
        agent = ops_agent(t, ids=SequentialIds())
        session = store.load("F")
        agent.prompt("delete user 7").session(session).call()
        store.save(session)
        assert approve_and_resume("F", agent) == "Done."
    store.close()
    assert _seen(count) == ["delete_user"] * 3  # three approvals of three proposals
