"""Issue 39 (R60), attacked: forgetting an approved effect after its approval's deadline,
under ``on_expire="approve"``.

Before: ``forget`` reopened the approval with its old deadline, long past; the next resume
found it expired at once and the policy's ``on_expire="approve"`` approved it — the tool
ran a second time with nobody deciding. Now a reopened approval gets a fresh deadline,
counted from the reopening by the store's clock (the policy's ``expires_after_ms``), so
the effect runs again only after a decision, or once that fresh deadline passes.
What ran is counted by the tool's own world file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, pg_dsn
from tests.agents.test_approved_tool_runs_once import AnHourLater

from intermission import (
    HITL,
    ApprovalPolicy,
    EffectOutcomeUnknownError,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    Principal,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    decide_graph,
    tool,
)
from intermission.examples import build_change_graph
from intermission.stores import open_store, resolve_unknown_effect, sweep_deadlines

ROOT = Path(__file__).resolve().parents[2]
ROLE = "ledger_finance"
ANN = Principal("ann", {ROLE})
MINUTE = 60_000


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 's.sqlite'}"
    fresh_pg().close()
    return pg_dsn()


def agent(world: str, *, die_inside: bool = False) -> Any:
    @tool
    def pay_invoice(invoice: int) -> str:
        """Pay an invoice (appends to the world file: what really happened)."""
        with open(world, "a") as f:
            f.write(f"paid {invoice}\n")
        if die_inside:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"invoice {invoice} paid"

    model = ScriptedModel([[ToolCall("pay_invoice", {"invoice": 7})], "Done."])
    policy = ApprovalPolicy(roles={ROLE}, expires_after_ms=MINUTE, on_expire="approve")
    hitl = HITLInterceptor().on_tool("pay_invoice", policy=policy)
    return ReActAgent.of(model).name("ops").tools(pay_invoice).interceptor(hitl).build()


class TwoHoursLater:
    def now_ms(self) -> float:
        return AnHourLater().now_ms() + 3_600_000.0


def change_graph(world: str, *, die_inside: bool = False) -> Any:
    """The README's change graph under the same policy; its effect appends to ``world``."""

    def effect(change_id: str) -> str:
        with open(world, "a") as f:
            f.write(f"paid {change_id}\n")
        if die_inside:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"applied {change_id}"

    policy = ApprovalPolicy(roles={ROLE}, expires_after_ms=MINUTE, on_expire="approve")
    return build_change_graph(effect, policy=policy)


def worker(where: str, world: str, how: str, graph: bool = False) -> None:
    """In a subprocess: resume ``s`` — dying inside the effect, an hour later, or two."""
    clocks = {"again": AnHourLater(), "later": TwoHoursLater()}
    store = open_store(where, clock=clocks[how]) if how in clocks else open_store(where)
    die = how == "inside"
    a = change_graph(world, die_inside=die) if graph else agent(world, die_inside=die)
    with store.resume("s") as s:
        print(a.prompt().session(s).call().content)


def _run(
    where: str, world: Path, how: str, graph: bool = False
) -> subprocess.CompletedProcess[str]:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.hostile.test_i39_reopened_deadline import worker\n"
        f"worker({where!r}, {str(world)!r}, {how!r}, {graph!r})\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=ROOT
    )


def paid(world: Path) -> int:
    return len(world.read_text().splitlines()) if world.exists() else 0


def test_a_forget_after_the_deadline_does_not_let_on_expire_approve_the_rerun(
    where: str, tmp_path: Path
) -> None:
    world = tmp_path / "world"
    store = open_store(where)
    s = InMemoryAgentSession.of("s")
    a = agent(str(world))
    a.prompt("pay invoice 7").session(s).principal(Principal("rita")).call()
    (task,) = HITL.pending_tasks(s)
    HITL.submit(s, task, HITLDecision.approve(), agent=a, principal=ANN)  # in time
    store.save(s)
    store.close()
    killed = _run(where, world, "inside")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    again = _run(where, world, "again")  # an hour later: the deadline is long past
    assert again.returncode != 0 and EffectOutcomeUnknownError.__name__ in again.stderr
    assert paid(world) == 1
    store = open_store(where, clock=AnHourLater())
    try:
        (key,) = [k for k, e in store.load("s").ledger.items() if e.status == "started"]
        resolve_unknown_effect(store, "s", key, forget=True, principal=ANN)
        (reopened,) = store.load("s").hitl.tasks
        fresh = reopened.deadline_ms
        assert fresh is not None and fresh > AnHourLater().now_ms()  # counted from now
    finally:
        store.close()
    # the next resume (still an hour later) must wait for a fresh decision
    run = _run(where, world, "again")
    assert run.returncode == 0, run.stderr[-2000:]
    assert paid(world) == 1, "the forgotten effect ran again with nobody deciding"
    store = open_store(where)
    try:
        assert store.load("s").is_pending
        assert "task.expired" not in [r.action for r in store.audit("s")]
    finally:
        store.close()
    # once the fresh deadline has passed too, the policy's on_expire applies, as promised
    run = _run(where, world, "later")
    assert run.returncode == 0, run.stderr[-2000:]
    assert paid(world) == 2


def test_a_forget_after_the_deadline_does_not_let_a_graph_approval_expire_into_a_rerun(
    where: str, tmp_path: Path
) -> None:
    world = tmp_path / "world"
    store = open_store(where)
    try:
        s = InMemoryAgentSession.of("s")
        change_graph(str(world)).prompt("Upgrade the order service").session(s).principal(
            Principal("rita")
        ).call()
        assert s.is_pending
        store.save(s)
        with store.claim("s") as s:
            decide_graph(s, "APPROVE", principal=ANN)  # in time
    finally:
        store.close()
    killed = _run(where, world, "inside", graph=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    again = _run(where, world, "again", graph=True)
    assert again.returncode != 0 and EffectOutcomeUnknownError.__name__ in again.stderr
    assert paid(world) == 1
    store = open_store(where, clock=AnHourLater())
    try:
        (key,) = [k for k, e in store.load("s").ledger.items() if e.status == "started"]
        resolve_unknown_effect(store, "s", key, forget=True, principal=ANN)
        # the sweeper (a graph approval's deadlines are its job) meets it an hour later
        assert sweep_deadlines(store) == []
    finally:
        store.close()
    run = _run(where, world, "again", graph=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert paid(world) == 1, "the forgotten effect ran again with nobody deciding"
    store = open_store(where)
    try:
        assert store.load("s").is_pending
    finally:
        store.close()
    store = open_store(where, clock=TwoHoursLater())  # the fresh deadline passed too
    try:
        assert sweep_deadlines(store) == ["s"]
    finally:
        store.close()
    run = _run(where, world, "later", graph=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert paid(world) == 2
