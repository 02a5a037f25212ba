"""The seed's change graph and a team whose member needs tool approval (R16, R17, R32)."""

from __future__ import annotations

import pytest

from intermission import (
    END,
    HITL,
    GraphSpec,
    HITLDecision,
    InMemoryAgentSession,
    NothingToResumeError,
    TeamAgent,
)
from intermission.examples import build_change_graph, build_ops_agent


def run_to_pause():  # type: ignore[no-untyped-def]
    applied: list[str] = []

    def effect(change_id: str) -> str:
        applied.append(change_id)
        return f"applied {change_id}"

    team = build_change_graph(effect)
    s = InMemoryAgentSession.of("change-001")
    first = team.prompt("Upgrade the order service and migrate the DB").session(s).call()
    return team, s, first, applied


def test_first_call_pends_with_reason_and_request() -> None:
    _team, s, first, applied = run_to_pause()
    assert s.is_pending and s.pending_reason == "Change plan awaits human review"
    assert s.context.get("approval.request", "").startswith("Upgrade order-service")
    assert first.content == "" and applied == []
    assert s.context.trace.positions("change") == ["approval"]


def test_approve_runs_executor_once_even_when_resumed_again() -> None:
    team, s, _, applied = run_to_pause()
    s = InMemoryAgentSession.restore(s.to_json())  # the request ended; a new one picks up
    s.context.put("approval.decision", "APPROVE")
    s.context.put("approval.operator", "alice")
    s.context.put("approval.time", 1_764_000_000_000)
    resumed = team.prompt().session(s).call()
    assert applied == ["change-001"] and s.context["change.result"] == "applied change-001"
    assert resumed.content == "Change executed: applied change-001"
    assert s.context.trace.graphs["change"].visited["approval"] == 2  # the gate re-ran
    assert s.ledger["change-001/execute"].status == "completed"
    with pytest.raises(NothingToResumeError):
        team.prompt().session(s).call()
    # even re-running the executor's effect directly is answered from the ledger
    assert s.once("change-001/execute", lambda: "again") == "applied change-001"
    assert applied == ["change-001"]


def test_reject_path_sets_result_and_final_answer() -> None:
    team, s, _, applied = run_to_pause()
    s.context.put("approval.decision", "REJECT")
    s.context.put("approval.reason", "no maintenance window")
    resp = team.prompt().session(s).call()
    assert resp.content == s.context["change.result"] == "Change rejected: no maintenance window"
    assert applied == []


def test_team_member_with_tool_approval_replays_the_same_uuid_once() -> None:  # R17
    ops = build_ops_agent()
    spec = GraphSpec("ops_team")
    spec.add_start().link_add("ops")
    spec.add_agent(ops).link_add(END)
    spec.add_end()
    team = TeamAgent.of().name("ops_team").graph(spec).build()
    s = InMemoryAgentSession.of("t")
    first = team.prompt("delete user 1001").session(s).call()
    assert s.is_pending
    (task,) = HITL.pending_tasks(s)
    # the member's summary is the team's reply, abnormal as in R19 (not an empty string)
    assert (first.content, first.is_abnormal) == (task.reason, True)
    team_end = [e for e in s.events if e.kind == "team_end"][-1]
    assert team_end.is_abnormal and team_end.content == task.reason
    s = InMemoryAgentSession.restore(s.to_json())
    HITL.submit(s, task.call_uuid, HITLDecision.approve().reviewer("lead"))
    resp = team.prompt().session(s).call()
    assert (resp.content, resp.is_abnormal) == ("Done: user 1001 deleted.", False)
    ends = [e for e in s.events if e.kind == "tool_call_end"]
    assert [e.call_uuid for e in ends] == [task.call_uuid]  # same UUID, exactly once


def test_sequential_protocol_passes_outputs_along() -> None:
    from intermission import ReActAgent, ScriptedModel

    a = ReActAgent.of(ScriptedModel(["draft"])).name("writer").build()
    b = (
        ReActAgent.of(ScriptedModel(lambda m, t: "reviewed: " + m[-1].content.split(": ")[-1]))
        .name("reviewer")
        .build()
    )
    resp = (
        TeamAgent.sequential("pipeline", [a, b])
        .prompt("write")
        .session(InMemoryAgentSession.of("q"))
        .call()
    )
    assert resp.content == "reviewed: draft"


def test_supervisor_protocol_routes_members_until_finish() -> None:
    from intermission import ReActAgent, ScriptedModel

    researcher = ReActAgent.of(ScriptedModel(["facts: 42"])).name("researcher").build()
    writer = ReActAgent.of(ScriptedModel(["report about 42"])).name("writer").build()
    boss = ScriptedModel(["researcher", "writer", "FINISH"])
    team = TeamAgent.supervisor("office", boss, [researcher, writer])
    resp = team.prompt("write a report").session(InMemoryAgentSession.of("sup")).call()
    assert resp.content == "report about 42"
    assert [r.agent for r in resp.trace.records] == ["researcher", "writer"]
    assert "researcher: facts: 42" in boss.calls[1][0].content


def test_graph_decisions_are_checked_like_tool_decisions() -> None:  # R23, R23c
    from intermission import (
        DecisionConflictError,
        InvalidDecisionError,
        ReviewerNotAllowedError,
        decide_graph,
    )

    team, s, _, applied = run_to_pause()
    before = s.to_json()
    with pytest.raises(ReviewerNotAllowedError):
        decide_graph(s, "APPROVE", reviewer="intern", approvers={"lead"})
    with pytest.raises(InvalidDecisionError):
        decide_graph(s, "MAYBE", reviewer="lead")  # type: ignore[arg-type]
    assert s.to_json() == before
    decide_graph(s, "APPROVE", reviewer="lead", approvers={"lead"})
    assert s.context["approval.operator"] == "lead" and isinstance(s.context["approval.time"], int)
    decided = s.to_json()
    with pytest.raises(DecisionConflictError, match="already decided: APPROVE by lead") as info:
        decide_graph(s, "REJECT", reviewer="bob", reason="do not")
    assert info.value.verdict == "APPROVE" and info.value.reviewer == "lead"
    decide_graph(s, "APPROVE", reviewer="bob")  # the same verdict again: nothing changes
    assert s.to_json() == decided
    team.prompt().session(s).call()
    assert applied == ["change-001"]
    with pytest.raises(InvalidDecisionError, match="not waiting"):
        decide_graph(s, "APPROVE", reviewer="lead")


@pytest.mark.parametrize("first", ["APPROVE", "REJECT"])
def test_a_decision_belongs_to_the_request_that_asked_for_it(first: str) -> None:
    """A later request on the session reaches the approval node and asks again: the earlier
    request's decision (in the context since) is neither reused nor imposed (adversary
    repro on the AG-UI server: the second change ran, approved by nobody)."""
    from intermission import decide_graph

    runs: list[str] = []

    def effect(change_id: str) -> str:
        runs.append(change_id)
        return f"applied {change_id}"

    team = build_change_graph(effect)
    s = InMemoryAgentSession.of("thread-1")
    team.prompt("change A").session(s).call()
    decide_graph(s, first, reviewer="alice", reason=None if first == "APPROVE" else "no")
    team.prompt().session(s).call()
    assert runs == (["change-001"] if first == "APPROVE" else [])
    second = team.prompt("change B, please").session(s).call()
    assert s.is_pending and s.pending_reason == "Change plan awaits human review"
    assert second.content == "" and s.context.get("approval.decision") is None
    assert s.context.get("approval.operator") is None
    assert len(runs) == (1 if first == "APPROVE" else 0)  # nothing ran for request 2
    decide_graph(s, "REJECT", reviewer="bob", reason="not now")
    assert team.prompt().session(s).call().content.startswith("Change rejected: not now")


def test_a_later_request_gets_a_deadline_of_its_own() -> None:
    from intermission import FakeClock, decide_graph

    clock = FakeClock(1_700_000_000_000)
    team = build_change_graph(deadline_ms=1_000)
    s = InMemoryAgentSession("thread-2", clock=clock)
    team.prompt("change A").session(s).call()
    old = s.context.get("approval.deadline")
    decide_graph(s, "APPROVE", reviewer="alice")
    team.prompt().session(s).call()
    clock.advance(60_000)  # long past request 1's deadline
    team.prompt("change B").session(s).call()
    assert s.is_pending  # asked again, not rejected by the old deadline
    assert s.context.get("approval.deadline") >= old + 60_000
