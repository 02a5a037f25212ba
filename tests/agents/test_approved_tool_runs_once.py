"""An approved call of a plain Python tool runs once (R32, R48): it goes through the ledger
under the effect id minted when it was proposed and the arguments that run, so a process
SIGKILLed after the tool did its work and before the session was saved does not run it
again on the next resume (adversary repro on the AG-UI server: the tool ran twice). Killed
inside the tool, the effect is of unknown outcome — a human resolves it — never re-run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, pg_dsn

from intermission import (
    HITL,
    EffectOutcomeUnknownError,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    tool,
)
from intermission.stores import open_store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 's.sqlite'}"
    fresh_pg().close()
    return pg_dsn()


def agent(world: str, *extra: Any, die_inside: bool = False) -> Any:
    @tool
    def delete_user(user_id: int) -> str:
        """Delete a user (appends to the world file: what really happened)."""
        with open(world, "a") as f:
            f.write(f"deleted {user_id}\n")
        if die_inside:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"user {user_id} deleted"

    model = ScriptedModel([[ToolCall("delete_user", {"user_id": 7})], "Done."])
    return (ReActAgent.of(model).name("ops").tools(delete_user)
            .interceptor(HITLInterceptor().on_tool("delete_user"), *extra).build())  # fmt: skip


class CrashAfterTheTool:
    def on_tool_call_end(self, trace: Any, ex: Any, *rest: Any) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


class AnHourLater:
    def now_ms(self) -> float:
        return time.time() * 1000.0 + 3_600_000.0


def worker(where: str, world: str, how: str) -> None:
    """In a subprocess: resume ``s`` — dying after the tool, inside it, or not at all."""
    extra = [CrashAfterTheTool()] if how == "after" else []
    store = open_store(where, clock=AnHourLater()) if how == "again" else open_store(where)
    a = agent(world, *extra, die_inside=how == "inside")
    with store.resume("s") as s:
        print(a.prompt().session(s).call().content)


def _run(where: str, world: Path, how: str) -> subprocess.CompletedProcess[str]:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.agents.test_approved_tool_runs_once import worker\n"
        f"worker({where!r}, {str(world)!r}, {how!r})\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def _paused_and_approved(where: str, world: Path) -> None:
    store = open_store(where)
    s = InMemoryAgentSession.of("s")
    a = agent(str(world))
    a.prompt("delete user 7").session(s).call()
    (task,) = HITL.pending_tasks(s)
    HITL.submit(s, task, HITLDecision.approve().reviewer("alice"), agent=a)
    store.save(s)
    store.close()


def test_a_sigkill_after_an_approved_tool_ran_does_not_run_it_again(
    where: str, tmp_path: Path
) -> None:
    world = tmp_path / "world"
    _paused_and_approved(where, world)
    killed = _run(where, world, "after")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert world.read_text() == "deleted 7\n"
    again = _run(where, world, "again")
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.strip() == "Done."
    assert world.read_text() == "deleted 7\n"  # not a second time


def test_a_sigkill_inside_an_approved_tool_leaves_it_of_unknown_outcome(
    where: str, tmp_path: Path
) -> None:
    world = tmp_path / "world"
    _paused_and_approved(where, world)
    killed = _run(where, world, "inside")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    again = _run(where, world, "again")
    assert again.returncode != 0 and EffectOutcomeUnknownError.__name__ in again.stderr
    assert world.read_text() == "deleted 7\n"  # never sent twice blindly
    store = open_store(where)
    assert store.load("s").is_pending  # still waiting: a human looks and resolves it
    store.close()
