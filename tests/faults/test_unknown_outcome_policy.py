"""Issue 39 (R60): an effect of unknown outcome is decided under the policy of the approval
that authorised it.

Before: after a process died inside an approved tool, any principal — outside the
policy's roles — could ``forget`` the effect (CLI, console ``POST /threads/{id}/effects``,
Python) and the next resume ran the approved tool a second time with nobody deciding; and
``resolve`` fed the agent a made-up result in anybody's name. Now the approved call's
ledger entry records its approval (call UUID and policy, as it stood), resolve/forget take
a principal that policy allows, a refusal changes nothing and is audited, and forget
reopens the approval: the tool runs again only after fresh approvals (two for a
two-person rule). What ran is counted by the tool's own world file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import cli_identity, fresh_pg, pg_dsn
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
    ReviewerNotAllowedError,
    ScriptedModel,
    ToolCall,
    UsageError,
    tool,
)
from intermission.agui.auth import hash_token
from intermission.stores import open_store, resolve_unknown_effect

ROOT = Path(__file__).resolve().parents[2]
ROLE = "ledger_finance"  # (no OS group is called that: the CLI's user does not hold it)
ANN = Principal("ann", {ROLE})
BOB = Principal("bob", {ROLE})
MALLORY = Principal("mallory", {"sre"})


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 's.sqlite'}"
    fresh_pg().close()
    return pg_dsn()


def agent(world: str, approvals: int, *, die_inside: bool = False) -> Any:
    @tool
    def pay_invoice(invoice: int) -> str:
        """Pay an invoice (appends to the world file: what really happened)."""
        with open(world, "a") as f:
            f.write(f"paid {invoice}\n")
        if die_inside:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"invoice {invoice} paid"

    model = ScriptedModel([[ToolCall("pay_invoice", {"invoice": 7})], "Done."])
    policy = ApprovalPolicy(roles={ROLE}, approvals=approvals)
    hitl = HITLInterceptor().on_tool("pay_invoice", policy=policy)
    return ReActAgent.of(model).name("ops").tools(pay_invoice).interceptor(hitl).build()


def worker(where: str, world: str, approvals: int, how: str) -> None:
    """In a subprocess: resume ``s`` — dying inside the tool, or an hour later (the dead
    process's claim has lapsed by then)."""
    store = open_store(where, clock=AnHourLater()) if how == "again" else open_store(where)
    a = agent(world, approvals, die_inside=how == "inside")
    with store.resume("s") as s:
        print(a.prompt().session(s).call().content)


def _run(where: str, world: Path, approvals: int, how: str) -> subprocess.CompletedProcess[str]:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.faults.test_unknown_outcome_policy import worker\n"
        f"worker({where!r}, {str(world)!r}, {approvals}, {how!r})\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=ROOT
    )


def paid(world: Path) -> int:
    return len(world.read_text().splitlines()) if world.exists() else 0


def crashed_inside_approved_tool(where: str, world: Path, approvals: int = 1) -> str:
    """Pause ``s`` on pay_invoice, approve it (``approvals`` principals of the role), kill
    the process inside the tool, and let a later resume find the outcome unknown (its
    claim is released then). Returns the effect's ledger key."""
    store = open_store(where)
    s = InMemoryAgentSession.of("s")
    a = agent(str(world), approvals)
    a.prompt("pay invoice 7").session(s).principal(Principal("rita")).call()
    (task,) = HITL.pending_tasks(s)
    for who in (ANN, BOB)[:approvals]:
        HITL.submit(s, task, HITLDecision.approve(), agent=a, principal=who)
    store.save(s)
    store.close()
    killed = _run(where, world, approvals, "inside")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    again = _run(where, world, approvals, "again")
    assert again.returncode != 0 and EffectOutcomeUnknownError.__name__ in again.stderr
    assert paid(world) == 1
    store = open_store(where)
    try:
        (key,) = [k for k, e in store.load("s").ledger.items() if e.status == "started"]
    finally:
        store.close()
    return key


def stored(where: str) -> tuple[str, list[str]]:
    """The stored session's snapshot and the actions of its audit trail."""
    store = open_store(where)
    try:
        return store.load("s").to_json(), [r.action for r in store.audit("s")]
    finally:
        store.close()


def store_task(where: str) -> Any:
    store = open_store(where)
    try:
        (task,) = HITL.pending_tasks(store.load("s"))
        return task
    finally:
        store.close()


def cli(where: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as this OS user, signed in as carol (a person outside the policy's roles)
    by an identity file: refused by the roles rule, not as an unmapped typed name."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args, "--store", where,
         "--auth", cli_identity()],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=180,
    )  # fmt: skip


def test_outside_the_roles_the_cli_may_neither_forget_nor_resolve(
    where: str, tmp_path: Path
) -> None:
    world = tmp_path / "world"
    key = crashed_inside_approved_tool(where, world)
    before, _ = stored(where)
    for args in (["forget", "s", key], ["resolve", "s", key, "--result", '"it paid"']):
        refused = cli(where, *args)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        (line,) = refused.stderr.splitlines()  # one line, saying why
        assert line.startswith("error: ") and ROLE in line and "nothing was changed" in line
        now, actions = stored(where)
        assert now == before  # byte-identical
        assert actions[-1] == "decision.refused"
    store = open_store(where)
    try:
        refusals = [r for r in store.audit("s") if r.action == "decision.refused"][-2:]
        assert [r.detail["verdict"] for r in refusals] == ["forget", "resolve"]
        assert {r.target for r in refusals} == {key}
        assert {r.via for r in refusals} == {"cli"}
        call = store.load("s").hitl.tasks[0].call_uuid  # which approval authorised it
        assert [(r.detail["approval"], r.detail["tool"]) for r in refusals] == [
            (call, "pay_invoice"), (call, "pay_invoice"),
        ]  # fmt: skip
    finally:
        store.close()
    assert paid(world) == 1
    store = open_store(where)
    try:
        s = store.load("s")
        (task,) = s.hitl.tasks  # (approved, its decision not applied: the run died)
        entry = s.ledger[key]
        # the link, recorded by intermission with the effect's start: the approved call
        assert entry.approval is not None and entry.approval.call_uuid == task.call_uuid
        assert entry.approval.policy == ApprovalPolicy(roles={ROLE}, approvals=1)
        assert entry.approval.approved_by == ["ann"]
    finally:
        store.close()


def test_over_http_the_console_refuses_an_outsider_and_an_allowed_forget_reopens_the_approval(
    where: str, tmp_path: Path
) -> None:
    import httpx  # (the server extra)
    from tests.agui._server import Server

    world = tmp_path / "world"
    key = crashed_inside_approved_tool(where, world)
    auth = tmp_path / "auth.yaml"
    auth.write_text(
        "tokens:\n"
        f"  - hash: {hash_token('mallory-token')}\n    name: mallory\n    roles: [sre]\n"
        f"  - hash: {hash_token('ann-token')}\n    name: ann\n    roles: [{ROLE}]\n"
    )
    server = Server(where, tmp_path / "effects.log", auth=auth)
    try:
        url = f"{server.url}/threads/s/effects"
        before, _ = stored(where)
        for body in ({"key": key, "action": "forget"},
                     {"key": key, "action": "resolve", "result": "paid, trust me"}):  # fmt: skip
            r = httpx.post(url, json=body, timeout=60,
                           headers={"Authorization": "Bearer mallory-token"})  # fmt: skip
            assert r.status_code == 403, r.text
            assert ROLE in r.json()["error"] and "nothing was changed" in r.json()["error"]
            assert stored(where)[0] == before  # byte-identical
        r = httpx.post(url, json={"key": key, "action": "forget"}, timeout=60,
                       headers={"Authorization": "Bearer ann-token"})  # fmt: skip
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "failed" and r.json()["threadStatus"] == "pending"
        assert r.json()["reopened"] == store_task(where).call_uuid
    finally:
        server.stop()
    store = open_store(where)
    try:
        s = store.load("s")
        (task,) = HITL.pending_tasks(s)  # the same approval, open again
        assert HITL.get_decision(s, task.call_uuid) is None and task.votes == []
        records = store.audit("s")
        actions = [r.action for r in records]
        assert actions.count("decision.refused") == 2
        reopened = next(r for r in records if r.action == "approval.reopened")
        assert (reopened.actor, reopened.via, reopened.target) == ("ann", "console", task.call_uuid)
        assert reopened.detail["voided_decision"]["reviewer"] == "ann"  # kept, as voided
        forgotten = next(r for r in records if r.action == "effect.forgotten")
        assert (forgotten.actor, forgotten.detail["approval"]) == ("ann", task.call_uuid)
    finally:
        store.close()
    # the next resume does not pay again: the approval waits for a fresh decision
    again = _run(where, world, 1, "again")
    assert again.returncode == 0, again.stderr[-2000:]
    assert paid(world) == 1
    store = open_store(where)
    try:
        assert store.load("s").is_pending
    finally:
        store.close()


def _approve_and_resume(where: str, world: Path, approvals: int, who: Principal) -> str:
    store = open_store(where)
    try:
        with store.claim("s") as s:
            (task,) = HITL.pending_tasks(s)
            HITL.submit(s, task, HITLDecision.approve(), principal=who)
    finally:
        store.close()
    run = _run(where, world, approvals, "again")
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip()


def test_a_forgotten_effect_of_a_two_person_rule_runs_again_after_two_fresh_approvals(
    where: str, tmp_path: Path
) -> None:
    world = tmp_path / "world"
    key = crashed_inside_approved_tool(where, world, approvals=2)
    store = open_store(where)
    try:
        before = store.load("s").to_json()
        with pytest.raises(ReviewerNotAllowedError):
            resolve_unknown_effect(store, "s", key, forget=True, principal=MALLORY)
        assert store.load("s").to_json() == before
        resolve_unknown_effect(store, "s", key, forget=True, principal=BOB)
        reopened = next(r for r in store.audit("s") if r.action == "approval.reopened")
        assert [v["name"] for v in reopened.detail["voided_decision"]["votes"]] == ["ann", "bob"]
    finally:
        store.close()
    assert _approve_and_resume(where, world, 2, ANN) != "Done."  # one of two: still waiting
    assert paid(world) == 1
    assert _approve_and_resume(where, world, 2, BOB) == "Done."
    assert paid(world) == 2  # ran again, after two fresh approvals


def test_an_allowed_resolve_feeds_its_result_and_is_audited(where: str, tmp_path: Path) -> None:
    world = tmp_path / "world"
    key = crashed_inside_approved_tool(where, world)
    store = open_store(where)
    try:
        with pytest.raises(ReviewerNotAllowedError):
            resolve_unknown_effect(store, "s", key, result="made up", reviewer="ann")  # a name
        resolve_unknown_effect(store, "s", key, result="invoice 7 paid (bank statement)",
                               principal=ANN)  # fmt: skip
        (record,) = [r for r in store.audit("s") if r.action == "effect.resolved"]
        assert (record.actor, record.authenticated, record.target) == ("ann", True, key)
        assert record.detail["approval"] == store.load("s").hitl.tasks[0].call_uuid
    finally:
        store.close()
    again = _run(where, world, 1, "again")
    assert again.returncode == 0 and again.stdout.strip() == "Done.", again.stderr[-2000:]
    assert paid(world) == 1  # not run again: the recorded result was fed instead
    store = open_store(where)
    try:
        ends = [e for e in store.load("s").events if e.kind == "tool_call_end"]
        assert [e.observation for e in ends] == ["invoice 7 paid (bank statement)"]  # fed
    finally:
        store.close()


def ungated_worker(where: str, world: str) -> None:
    """In a subprocess: run a plain ``session.once`` (nobody approved it) and die inside."""
    store = open_store(where)
    with store.claim("u") as s:

        def charge() -> str:
            with open(world, "a") as f:
                f.write("charged\n")
            os.kill(os.getpid(), signal.SIGKILL)
            return "charged"

        s.once("charge-1", charge)


def test_an_effect_nobody_approved_is_resolved_by_whoever_the_surface_admits_and_recorded(
    where: str, tmp_path: Path
) -> None:
    world = tmp_path / "world"
    store = open_store(where, clock=AnHourLater())  # (the dead process's claim has lapsed)
    try:
        store.save(InMemoryAgentSession.of("u"))
        code = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
                "from tests.faults.test_unknown_outcome_policy import ungated_worker\n"
                f"ungated_worker({where!r}, {str(world)!r})\n")  # fmt: skip
        killed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                timeout=180, cwd=ROOT)  # fmt: skip
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        assert store.load("u").ledger["charge-1"].approval is None
        resolve_unknown_effect(store, "u", "charge-1", forget=True, principal=MALLORY)
        (record,) = [r for r in store.audit("u") if r.action == "effect.forgotten"]
        assert (record.actor, record.via, record.target) == ("mallory", "api", "charge-1")
        assert "approval" not in record.detail
        with store.claim("u") as s:
            assert s.once("charge-1", lambda: "charged again") == "charged again"
    finally:
        store.close()


def test_the_session_methods_are_no_side_door(where: str, tmp_path: Path) -> None:
    """``session.forget_effect`` / ``resolve_effect`` (what the CLI and console call under
    the claim) judge the same way; a loaded copy, whose ledger writes go to the store at
    once but whose reopened approval nobody saves, may not forget an approved effect."""
    world = tmp_path / "world"
    key = crashed_inside_approved_tool(where, world)
    store = open_store(where)
    try:
        before = store.load("s").to_json()
        for action in (lambda s: s.forget_effect(key, principal=MALLORY),
                       lambda s: s.resolve_effect(key, "made up", principal="ann")):  # fmt: skip
            with pytest.raises(ReviewerNotAllowedError), store.claim("s") as s:
                action(s)
        with pytest.raises(UsageError, match="under the claim"):
            store.load("s").forget_effect(key, principal=ANN)
        assert store.load("s").to_json() == before
        assert store.load("s").ledger[key].status == "started"
        with store.claim("s") as s:
            s.forget_effect(key, principal=ANN, via="api")
        (task,) = HITL.pending_tasks(store.load("s"))  # open again, undecided
        assert task.votes == [] and HITL.get_decision(store.load("s"), task.call_uuid) is None
    finally:
        store.close()
    assert _run(where, world, 1, "again").returncode == 0
    assert paid(world) == 1
