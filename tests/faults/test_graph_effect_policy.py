"""Issue 39 (R60): an effect a graph approval authorised is decided under that approval.

Before: the change graph's node ``session.once("change-001/execute", …)`` ran after a
graph approval (``open_approval`` / ``decide_graph``), but its ledger entry did not say so:
after a process died inside it, anybody — outside the approval's roles — could ``forget``
it (CLI, console ``POST /threads/{id}/effects``) and the next resume ran the change again
with nobody deciding. Now the entry records the graph approval that let the run get
there (minted by intermission from the session: its decision key, policy, requester,
approvers, the node that asked), resolve/forget take a principal that policy allows, and
forget voids that decision, so the approval node asks again and the change runs only after
fresh approvals (two for a two-person rule). What ran is counted by the effect's own file.
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
    END,
    ApprovalKeys,
    ApprovalPolicy,
    EffectNotReopenableError,
    FlowContext,
    FlowEngine,
    GraphSpec,
    InMemoryAgentSession,
    Node,
    Principal,
    ReviewerNotAllowedError,
    UsageError,
    decide_graph,
)
from intermission.agui.auth import hash_token
from intermission.examples import build_change_graph, change_approval_task
from intermission.stores import open_store, resolve_unknown_effect

ROOT = Path(__file__).resolve().parents[2]
ROLE = "ledger_change"  # (no OS group is called that: the CLI's user does not hold it)
ANN = Principal("ann", {ROLE})
BOB = Principal("bob", {ROLE})
MALLORY = Principal("mallory", {"sre"})
KEY = "change-001/execute"


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 's.sqlite'}"
    fresh_pg().close()
    return pg_dsn()


def team(world: str, approvals: int, *, die_inside: bool = False) -> Any:
    """The README's change graph; its effect appends to ``world`` (what really happened).
    ``approvals``: 0 for the demo's approval (no policy), else ROLE with that quorum."""

    def effect(change_id: str) -> str:
        with open(world, "a") as f:
            f.write(f"applied {change_id}\n")
        if die_inside:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"applied {change_id}"

    policy = ApprovalPolicy(roles={ROLE}, approvals=approvals) if approvals else None
    return build_change_graph(effect, policy=policy)


def worker(where: str, world: str, approvals: int, how: str) -> None:
    """In a subprocess: resume ``g`` — dying inside the effect, or an hour later (the dead
    process's claim has lapsed by then)."""
    store = open_store(where, clock=AnHourLater()) if how == "again" else open_store(where)
    with store.resume("g") as s:
        print(team(world, approvals, die_inside=how == "inside").prompt().session(s).call().content)


def _run(where: str, world: Path, approvals: int, how: str) -> subprocess.CompletedProcess[str]:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.faults.test_graph_effect_policy import worker\n"
        f"worker({where!r}, {str(world)!r}, {approvals}, {how!r})\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=ROOT
    )


def applied(world: Path) -> int:
    return len(world.read_text().splitlines()) if world.exists() else 0


def decide(where: str, *who: Principal | None) -> None:
    """Approve the graph approval of ``g`` under the claim (None: as asserted, no policy)."""
    store = open_store(where)
    try:
        for principal in who:
            with store.claim("g") as s:
                if principal is None:
                    decide_graph(s, "APPROVE", reviewer="alice")
                else:
                    decide_graph(s, "APPROVE", principal=principal)
    finally:
        store.close()


def crashed_inside_approved_change(where: str, world: Path, approvals: int) -> None:
    """Pause ``g`` on the review, approve it (``approvals`` principals of ROLE; the demo's
    approval without policy for 0), kill the process inside the change, and let a later
    resume find the outcome unknown (its claim is released then)."""
    store = open_store(where)
    try:
        s = InMemoryAgentSession.of("g")
        team(str(world), approvals).prompt("Upgrade the order service").session(s).principal(
            Principal("rita")
        ).call()
        assert s.is_pending
        store.save(s)
    finally:
        store.close()
    decide(where, *((ANN, BOB)[:approvals] or (None,)))
    killed = _run(where, world, approvals, "inside")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    again = _run(where, world, approvals, "again")
    assert again.returncode != 0 and "EffectOutcomeUnknownError" in again.stderr
    assert applied(world) == 1


def stored(where: str) -> Any:
    store = open_store(where)
    try:
        return store.load("g")
    finally:
        store.close()


def audit(where: str) -> list[Any]:
    store = open_store(where)
    try:
        return list(store.audit("g"))
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


def test_a_two_person_change_killed_inside_its_effect_reruns_only_after_two_fresh_approvals(
    where: str, tmp_path: Path
) -> None:
    import httpx  # (the server extra)
    from tests.agui._server import Server

    world = tmp_path / "world"
    crashed_inside_approved_change(where, world, approvals=2)
    # the CLI's OS user is outside the approval's roles: neither forget nor resolve
    before = stored(where).to_json()
    for args in (["forget", "g", KEY], ["resolve", "g", KEY, "--result", '"applied"']):
        refused = cli(where, *args)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        (line,) = refused.stderr.splitlines()
        assert line.startswith("error: ") and ROLE in line and "nothing was changed" in line
        assert stored(where).to_json() == before  # byte-identical
        assert audit(where)[-1].action == "decision.refused"
    entry = stored(where).ledger[KEY]
    assert entry.status == "started"
    link = entry.approval  # recorded by intermission with the effect's start
    assert link is not None and link.call_uuid == "approval.decision"
    assert link.policy == ApprovalPolicy(roles={ROLE}, approvals=2) and link.node == "approval"
    assert link.approved_by == ["ann", "bob"] and link.requester is not None
    assert link.requester.name == "rita"
    # over HTTP: mallory (sre) is refused, ann (the role) forgets: the approval reopens
    auth = tmp_path / "auth.yaml"
    auth.write_text(
        "tokens:\n"
        f"  - hash: {hash_token('mallory-token')}\n    name: mallory\n    roles: [sre]\n"
        f"  - hash: {hash_token('ann-token')}\n    name: ann\n    roles: [{ROLE}]\n"
    )
    server = Server(where, tmp_path / "effects.log", auth=auth)
    try:
        url = f"{server.url}/threads/g/effects"
        for body in ({"key": KEY, "action": "forget"},
                     {"key": KEY, "action": "resolve", "result": "applied, trust me"}):  # fmt: skip
            r = httpx.post(url, json=body, timeout=60,
                           headers={"Authorization": "Bearer mallory-token"})  # fmt: skip
            assert r.status_code == 403, r.text
            assert ROLE in r.json()["error"] and "nothing was changed" in r.json()["error"]
            assert stored(where).to_json() == before
        r = httpx.post(url, json={"key": KEY, "action": "forget"}, timeout=60,
                       headers={"Authorization": "Bearer ann-token"})  # fmt: skip
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "failed" and r.json()["threadStatus"] == "pending"
        assert r.json()["reopened"] == "approval.decision"
    finally:
        server.stop()
    s = stored(where)
    assert s.is_pending and s.context.get("approval.decision") is None
    assert s.context.get("approval.votes") is None  # the quorum starts again
    assert s.context.get("approval.policy") is not None  # under the same policy
    records = audit(where)
    reopened = next(r for r in records if r.action == "approval.reopened")
    assert (reopened.actor, reopened.via, reopened.target) == ("ann", "console",
                                                               "approval.decision")  # fmt: skip
    voided = reopened.detail["voided_decision"]  # kept on the trail, as voided
    assert voided["approval.decision"] == "APPROVE"
    assert [v["name"] for v in voided["approval.votes"]] == ["ann", "bob"]
    assert [r.detail.get("verdict") for r in records if r.action == "decision.refused"] == [
        "forget", "resolve", "forget", "resolve",
    ]  # fmt: skip
    # the next resume does not apply the change again: the review asks again
    again = _run(where, world, 2, "again")
    assert again.returncode == 0, again.stderr[-2000:]
    assert applied(world) == 1 and stored(where).is_pending
    decide(where, ANN)  # one of two: still waiting
    assert _run(where, world, 2, "again").returncode == 0
    assert applied(world) == 1 and stored(where).is_pending
    decide(where, BOB)
    done = _run(where, world, 2, "again")
    assert done.returncode == 0, done.stderr[-2000:]
    assert applied(world) == 2 and stored(where).status == "done"  # once more, approved


def test_the_demo_graph_forgotten_on_the_cli_waits_for_a_fresh_decision(
    where: str, tmp_path: Path
) -> None:
    """The demo's review has no policy (anyone decides): the CLI's user may forget, and
    that reopens the review — the change does not run again until someone approves."""
    world = tmp_path / "world"
    crashed_inside_approved_change(where, world, approvals=0)
    link = stored(where).ledger[KEY].approval
    forgot = cli(where, "forget", "g", KEY)
    assert forgot.returncode == 0, forgot.stderr
    again = _run(where, world, 0, "again")
    assert again.returncode == 0, again.stderr[-2000:]
    assert applied(world) == 1 and stored(where).is_pending  # not applied again
    assert "approval is open again" in forgot.stdout
    assert stored(where).context.get("approval.decision") is None
    assert link is not None and link.policy is None and link.approved_by == ["alice"]
    decide(where, None)
    assert _run(where, world, 0, "again").returncode == 0
    assert applied(world) == 2 and stored(where).status == "done"


def test_an_allowed_resolve_feeds_the_recorded_result_and_runs_nothing(
    where: str, tmp_path: Path
) -> None:
    world = tmp_path / "world"
    crashed_inside_approved_change(where, world, approvals=2)
    store = open_store(where)
    try:
        with pytest.raises(ReviewerNotAllowedError):
            resolve_unknown_effect(store, "g", KEY, result="made up", principal=MALLORY)
        assert store.load("g").ledger[KEY].status == "started"
        resolve_unknown_effect(store, "g", KEY, result="applied by hand", principal=BOB)
        (record,) = [r for r in store.audit("g") if r.action == "effect.resolved"]
        assert (record.actor, record.detail["approval"]) == ("bob", "approval.decision")
    finally:
        store.close()
    assert _run(where, world, 2, "again").returncode == 0
    assert applied(world) == 1 and stored(where).context.get("change.result") == "applied by hand"


def test_a_forget_that_cannot_reopen_the_approval_is_refused() -> None:
    """The stored run had gone past the node that asked (it waits at a later node): voiding
    the decision would not stop the rerun, so forget is refused and nothing changes."""
    spec = GraphSpec("g")
    spec.add_start().link_add("approval")
    spec.add_activity("approval").task(change_approval_task).link_add("hold")
    spec.add_activity("hold").task(_hold).link_add("execute")
    spec.add_activity("execute").task(_execute).link_add(END)
    spec.add_end()
    s = InMemoryAgentSession.of("g")
    FlowEngine().eval(spec, s.context)
    decide_graph(s, "APPROVE", reviewer="alice")
    FlowEngine().eval(spec, s.context)
    assert s.is_pending and s.context.trace.graphs["g"].tokens == ["hold"]
    at_hold = InMemoryAgentSession.restore(s.to_json())  # what the store holds
    s.context.put("go", True)
    FlowEngine().eval(spec, s.context)
    link = s.ledger[KEY].approval
    assert link is not None and link.node == "approval"
    at_hold.ledger[KEY] = s.ledger[KEY].model_copy(update={"status": "started", "result": None})
    before = at_hold.to_json()
    with pytest.raises(EffectNotReopenableError, match="resolve"):
        at_hold.forget_effect(KEY, principal=ANN)
    assert at_hold.to_json() == before


def _hold(ctx: FlowContext, node: Node) -> None:
    assert ctx.session is not None
    if not ctx.get("go"):
        ctx.session.pending(True, "a second step")


def _execute(ctx: FlowContext, node: Node) -> None:
    assert ctx.session is not None
    ctx.put("change.result", ctx.session.once(KEY, lambda: "applied"))


def test_a_node_may_name_the_graph_approval_that_authorises_its_effect() -> None:
    """``session.once(key, fn, approval=ApprovalKeys(...))``: linked to that approval, and
    without an APPROVE there the effect does not run."""
    s = InMemoryAgentSession.of("g")
    keys = ApprovalKeys(decision="deploy.decision", time="deploy.time", operator="deploy.by")
    with pytest.raises(UsageError, match="holds no approval"):
        s.once("deploy", lambda: "deployed", approval=keys)
    assert "deploy" not in s.ledger
    s.pending(True, "deploy review")
    decide_graph(s, "APPROVE", reviewer="alice", keys=keys)
    assert s.once("deploy", lambda: "deployed", approval=keys) == "deployed"
    link = s.ledger["deploy"].approval
    assert link is not None and link.call_uuid == "deploy.decision"
    assert link.approved_by == ["alice"] and link.graph_keys is not None
    assert link.graph_keys["decision"] == "deploy.decision"
