"""Deadlines of approvals with a policy: a warning before the deadline, then ``on_expire``
— reject, approve (timed out, no responder), or escalate to other roles with a new
deadline — recorded when they fall due, by the deadline sweeper (every store) or by
whoever meets the session first (a decision, a resume). Nothing runs when a deadline
passes; the sweeper claims each session whose ``due_ms`` passed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from intermission import (
    HITL,
    ApprovalPolicy,
    DeadlinePassedError,
    DecisionConflictError,
    Escalate,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    Principal,
    ReActAgent,
    ReviewerNotAllowedError,
    ScriptedModel,
    ToolCall,
    decide_graph,
    tool,
)
from intermission.examples import build_change_graph
from intermission.stores import SQLiteStore, sweep_deadlines

T0 = 1_800_000_000_000.0
ALICE, BOB, LEAD = (
    Principal("alice", {"sre"}),
    Principal("bob", {"sre"}),
    Principal("lea", {"lead"}),
)
RAN: list[str] = []


class Clock:
    """A clock that says what the test sets (a FakeClock moves on every reading)."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def now_ms(self) -> float:
        return self.t


def agent(policy: ApprovalPolicy) -> Any:
    @tool
    def deploy(env: str) -> str:
        """Deploy."""
        RAN.append(env)
        return f"deployed {env}"

    def script(messages: list[Any], tools: Any) -> Any:
        last = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m.content for m in messages[last:] if m.role == "tool"]
        return f"Done: {seen[-1]}." if seen else [ToolCall("deploy", {"env": "prod"})]

    hitl = HITLInterceptor().on_tool("deploy", policy=policy)
    return (
        ReActAgent.of(ScriptedModel(script)).name("deploy").tools(deploy).interceptor(hitl).build()
    )


def kinds(session: Any) -> list[str]:
    return [e.kind for e in session.events if e.kind.startswith("approval_")]


def paused(store: Any, clock: Clock, policy: ApprovalPolicy, sid: str = "s") -> None:
    RAN.clear()
    s = InMemoryAgentSession(sid, clock=clock)
    agent(policy).prompt("deploy").session(s).principal(Principal("carol", {"sre"})).call()
    assert s.is_pending
    store.save(s)


def loaded(store: Any, sid: str, clock: Clock) -> Any:
    s = store.load(sid)
    s.clock = clock  # (the session judges by its clock; a stored one gets the wall clock)
    return s


WARN = ApprovalPolicy(roles={"sre"}, expires_after_ms=1000, warn_before_ms=300)


def test_a_warning_then_the_rejection_are_recorded_by_the_sweeper(make_store: Any) -> None:
    clock = Clock()
    store = make_store(clock=clock)
    paused(store, clock, WARN)
    assert store.due(T0 + 699) == [] and store.due(T0 + 700) == ["s"]
    clock.t = T0 + 600
    assert sweep_deadlines(store) == []  # nothing fell due yet
    clock.t = T0 + 750
    assert sweep_deadlines(store) == ["s"]
    s = store.load("s")
    (warned,) = [e for e in s.events if e.kind == "approval_warned"]
    assert warned.deadline_ms == T0 + 1000 and warned.roles == ["sre"]
    assert s.is_pending and not s.hitl.decisions
    assert sweep_deadlines(store) == [] and store.due(T0 + 999) == []  # warned once
    assert store.due(T0 + 1000) == ["s"]
    clock.t = T0 + 1000
    assert sweep_deadlines(store) == ["s"]
    s = loaded(store, "s", clock)
    assert kinds(s) == ["approval_warned", "approval_expired"]
    (record,) = s.hitl.decisions.values()
    assert (record.verdict, record.reviewer, record.timed_out) == ("reject", None, True)
    assert store.due(T0 + 10**9) == []  # nothing more to sweep
    with pytest.raises(DecisionConflictError, match="by the deadline"):
        HITL.submit(s, s.hitl.tasks[0].call_uuid, HITLDecision.approve(), principal=ALICE)
    with store.resume("s") as s:
        s.clock = clock
        r = agent(WARN).prompt().session(s).call()
    assert r.is_abnormal and "nobody decided before the deadline" in r.content and RAN == []


def test_on_expire_approve_runs_the_call_as_timed_out(make_store: Any) -> None:
    clock = Clock()
    store = make_store(clock=clock)
    policy = ApprovalPolicy(expires_after_ms=1000, on_expire="approve")
    paused(store, clock, policy)
    clock.t = T0 + 5000  # a late sweep: the deadline passed long ago
    assert sweep_deadlines(store) == ["s"]
    s = store.load("s")
    (record,) = s.hitl.decisions.values()
    assert (record.verdict, record.reviewer, record.timed_out) == ("approve", None, True)
    (expired,) = [e for e in s.events if e.kind == "approval_expired"]
    assert expired.resolution == "approve"
    with store.resume("s") as s:
        r = agent(policy).prompt().session(s).call()
    # the model is told how it was approved
    assert (
        r.content
        == "Done: deployed prod (Note: Approved by default: nobody decided before the deadline.)."
    )
    assert RAN == ["prod"]
    (decided,) = [e for e in s.events if e.kind == "hitl_decided"]
    assert decided.decision.timed_out and decided.decision.reviewer is None


ESCALATE = ApprovalPolicy(
    roles={"sre"}, expires_after_ms=1000, on_expire=Escalate(roles={"lead"}, after_ms=500),
    warn_before_ms=100,
)  # fmt: skip


def test_an_escalation_lets_the_lead_decide_until_its_own_deadline(make_store: Any) -> None:
    clock = Clock()
    store = make_store(clock=clock)
    paused(store, clock, ESCALATE)
    s = loaded(store, "s", clock)
    uuid = s.hitl.tasks[0].call_uuid
    before = s.to_json()
    with pytest.raises(ReviewerNotAllowedError, match="roles sre"):  # not yet the lead's
        HITL.submit(s, uuid, HITLDecision.approve(), principal=LEAD)
    assert s.to_json() == before
    clock.t = T0 + 1000
    assert sweep_deadlines(store) == ["s"]
    s = loaded(store, "s", clock)
    assert kinds(s) == ["approval_escalated"]  # (its warning's time passed unswept)
    (escalated,) = [e for e in s.events if e.kind == "approval_escalated"]
    assert escalated.roles == ["lead"] and escalated.deadline_ms == T0 + 1500
    assert s.hitl.tasks[0].deadline_ms == T0 + 1500
    assert "escalated" in HITL.progress(s, uuid).text  # type: ignore[union-attr]
    clock.t = T0 + 1450
    assert sweep_deadlines(store) == ["s"]  # the warning before the new deadline
    s = loaded(store, "s", clock)
    assert kinds(s) == ["approval_escalated", "approval_warned"]
    record = HITL.submit(s, uuid, HITLDecision.approve(), principal=LEAD)
    assert record.reviewer == "lea" and record.roles == ["lead"]  # type: ignore[union-attr]


def test_an_escalation_met_by_a_decision_is_recorded_then_and_the_last_deadline_rejects(
    make_store: Any,
) -> None:
    clock = Clock()
    store = make_store(clock=clock)
    paused(store, clock, ESCALATE)
    clock.t = T0 + 1100  # nobody swept: the lead's decision meets the escalation
    s = loaded(store, "s", clock)
    uuid = s.hitl.tasks[0].call_uuid
    before = s.to_json()
    with pytest.raises(ReviewerNotAllowedError):
        HITL.submit(s, uuid, HITLDecision.approve(), principal=Principal("dan", {"dev"}))
    assert s.to_json() == before  # refused: the escalation is not recorded by it either
    HITL.submit(s, uuid, HITLDecision.reject("not now"), principal=LEAD)
    assert kinds(s) == ["approval_escalated"]
    # another session, nobody decides: the escalation's deadline rejects it
    paused(store, clock, ESCALATE, "t")
    clock.t = T0 + 1100 + 1500
    s = loaded(store, "t", clock)
    with pytest.raises(DeadlinePassedError):
        HITL.submit(s, s.hitl.tasks[0].call_uuid, HITLDecision.approve(), principal=LEAD)
    with store.resume("t") as s:  # a resume meets both deadlines and records them
        s.clock = clock
        r = agent(ESCALATE).prompt().session(s).call()
    assert r.is_abnormal and RAN == []
    assert kinds(s) == ["approval_escalated", "approval_expired"]


def test_a_graph_approval_escalates_and_expires_too(tmp_path: Path) -> None:
    clock = Clock()
    store = SQLiteStore(tmp_path / "g.db", clock=clock)
    policy = ApprovalPolicy(
        roles={"sre"}, approvals=2, expires_after_ms=1000,
        on_expire=Escalate(roles={"lead"}, after_ms=1000),
    )  # fmt: skip
    graph = build_change_graph(change_id="g-1", policy=policy)
    s = InMemoryAgentSession("g", clock=clock)
    graph.prompt("change it").session(s).principal(Principal("carol", {"sre"})).call()
    assert s.context.get("approval.requester")["name"] == "carol"
    store.save(s)
    assert store.due(T0 + 1000) == ["g"]
    decide_graph(s, "APPROVE", principal=ALICE)  # a vote: 1 of 2
    assert s.context.get("approval.decision") is None and kinds(s) == ["approval_voted"]
    store.save(s)
    assert "1 of 2 approvals (alice, sre)" in store.pending()[0].progress  # type: ignore[operator]
    clock.t = T0 + 1000
    assert sweep_deadlines(store) == ["g"]
    s = loaded(store, "g", clock)
    assert kinds(s) == ["approval_voted", "approval_escalated"]
    decide_graph(s, "APPROVE", principal=LEAD)  # the escalation's role counts now
    assert s.context.get("approval.decision") == "APPROVE"
    assert [v["name"] for v in s.context.get("approval.votes")] == ["alice", "lea"]
    store.save(s)
    assert store.due(T0 + 10**9) == []  # decided: nothing left to sweep
    # and a second graph nobody decides: rejected at the escalation's deadline
    t = InMemoryAgentSession("h", clock=clock)
    graph.prompt("change it").session(t).call()
    store.save(t)
    clock.t = T0 + 1000 + 2000
    assert sweep_deadlines(store) == ["h"]
    t = loaded(store, "h", clock)
    # (the expiry writes the decision, as any decision of a graph approval, timed out)
    assert kinds(t) == ["approval_escalated", "approval_expired", "approval_decided"]
    assert t.context.get("approval.decision") == "REJECT" and t.context.get("approval.by") == {
        "timed_out": True
    }
    with store.resume("h") as t:
        t.clock = clock
        r = graph.prompt().session(t).call()
    assert "nobody decided before the deadline" in r.content
    store.close()


def test_a_decision_after_an_expiry_is_refused_even_when_it_says_what_the_timeout_did(
    make_store: Any,
) -> None:
    """A timeout is nobody's decision: a person's late rejection (whoever they are) is not
    a retry of it, so it is refused and audited, not answered as a no-op success."""
    from intermission.stores import decide_and_resume

    clock = Clock()
    store = make_store(clock=clock)
    paused(store, clock, WARN)
    clock.t = T0 + 1000
    assert sweep_deadlines(store) == ["s"]  # rejected by the deadline, not yet applied
    s = loaded(store, "s", clock)
    uuid, before = s.hitl.tasks[0].call_uuid, s.to_json()
    for who in (ALICE, Principal("dan", {"dev"}), Principal("carol", {"sre"}), None):
        with pytest.raises(DecisionConflictError, match="by the deadline"):
            HITL.submit(s, uuid, HITLDecision.reject("too late"), principal=who)
        assert s.to_json() == before
    late = lambda s: HITL.submit(s, uuid, HITLDecision.reject("too late"))  # noqa: E731
    with pytest.raises(DecisionConflictError, match="by the deadline"):
        decide_and_resume(store, "s", late, agent(WARN), principal=Principal("dan", {"dev"}))
    refused = [r for r in store.audit("s") if r.action == "decision.refused"]
    assert [(r.actor, r.detail["error"]) for r in refused] == [("dan", "DecisionConflictError")]
    # a graph approval alike: its timed-out rejection is not the late reviewer's
    graph = build_change_graph(change_id="g-2", policy=WARN)
    g = InMemoryAgentSession("g", clock=clock)
    graph.prompt("change it").session(g).principal(Principal("carol", {"sre"})).call()
    store.save(g)
    clock.t += 1000
    assert sweep_deadlines(store) == ["g"]
    g = loaded(store, "g", clock)
    before = g.to_json()
    with pytest.raises(DecisionConflictError, match="by the deadline"):
        decide_graph(g, "REJECT", reason="too late", principal=ALICE)
    assert g.to_json() == before


def test_the_sweeper_leaves_a_held_session_for_its_holder(make_store: Any) -> None:
    clock = Clock()
    store = make_store(clock=clock)
    paused(store, clock, WARN)
    clock.t = T0 + 2000
    with store.resume("s") as held:
        assert sweep_deadlines(store) == []  # busy: not waited for, not failed
        held.clock = clock
        agent(WARN).prompt().session(held).call()  # the holder meets the deadline itself
    assert kinds(store.load("s")) == ["approval_expired"]
    assert sweep_deadlines(store) == []


def test_sessions_without_a_policy_are_never_due(make_store: Any) -> None:
    clock = Clock()
    store = make_store(clock=clock)
    s = InMemoryAgentSession("plain", clock=clock)
    legacy = HITLInterceptor().on_tool("deploy", deadline_ms=10)
    ReActAgent.of(ScriptedModel([[ToolCall("deploy", {"env": "x"})], "ok"])).name("a").tools(
        agent(WARN).tools["deploy"]
    ).interceptor(legacy).build().prompt("go").session(s).call()
    store.save(s)
    assert store.due(T0 + 10**9) == [] and store.pending()[0].progress is None


def test_the_sweep_command(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    store = SQLiteStore(db)
    # Asked on a clock a year back, so the deadline has passed by the sweep's (the store's wall
    # clock) and not before the run paused, however slow the machine.
    s = InMemoryAgentSession("c", clock=Clock(T0 - 365 * 86_400_000))
    agent(ApprovalPolicy(expires_after_ms=1)).prompt("deploy").session(s).call()
    assert s.is_pending
    store.save(s)
    store.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-m", "intermission", "sweep", "--store", str(db)],
                         capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "swept 1 session(s): c"
    again = subprocess.run([sys.executable, "-m", "intermission", "sweep", "--store", str(db)],
                           capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert again.stdout.strip() == "swept 0 session(s)"
    bad = subprocess.run([sys.executable, "-m", "intermission", "sweep", "--every", "0",
                          "--store", str(db)], capture_output=True, text=True, env=env,
                         timeout=60)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("error: --every")


def test_the_sweeper_thread_serve_runs_sweeps_until_stopped(tmp_path: Path) -> None:
    import threading

    from intermission.stores import DeadlineSweeper

    clock = Clock()
    store = SQLiteStore(tmp_path / "t.db", clock=clock)
    paused(store, clock, WARN)
    clock.t = T0 + 5000
    seen: list[list[str]] = []
    done = threading.Event()
    sweeper = DeadlineSweeper(store, every_s=0.05, on_sweep=lambda ids: (seen.append(ids),
                                                                          done.set()))  # fmt: skip
    sweeper.start()
    try:
        assert done.wait(60)
    finally:
        sweeper.stop()
    assert seen == [["s"]] and kinds(store.load("s")) == ["approval_expired"]
    store.close()
