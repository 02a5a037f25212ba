"""HITL tool approval by call UUID (R18–R23c, R25)."""

from __future__ import annotations

import pytest
from tests._helpers import TRANSFERS, transfer

from intermission import (
    HITL,
    AmbiguousTaskError,
    DecisionConflictError,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    InvalidDecisionError,
    ReActAgent,
    ReviewerNotAllowedError,
    ScriptedModel,
    ToolCall,
    UnknownTaskError,
)

RAN = TRANSFERS  # every call of the shared transfer tool


def two_calls_model() -> ScriptedModel:
    return ScriptedModel(
        [
            [
                ToolCall("transfer", {"account": "alice", "amount": 10}, id="c-1"),
                ToolCall("transfer", {"account": "bob", "amount": 20}, id="c-2"),
            ],
            "all done",
        ]
    )


def build(model: ScriptedModel, interceptor: HITLInterceptor | None = None) -> ReActAgent:
    hitl = interceptor or HITLInterceptor().on_tool("transfer")
    return ReActAgent.of(model).name("bank").tools(transfer).interceptor(hitl).build()


def paused(model: ScriptedModel | None = None, interceptor=None):  # type: ignore[no-untyped-def]
    RAN.clear()
    model = model or two_calls_model()
    agent = build(model, interceptor)
    s = InMemoryAgentSession.of("h")
    resp = agent.prompt("pay alice and bob").session(s).call()
    return agent, s, resp, model


def test_r19_whole_batch_suspends_and_r25_first_request_order() -> None:
    _agent, s, resp, _model = paused()
    assert resp.is_abnormal and resp.content == "2 operations await human confirmation"
    assert s.pending_reason == resp.content and RAN == []
    assert s.events.kinds()[-4:] == ["reason_end", "hitl_pending", "reason_delta", "run_end"]
    assert "action_start" not in s.events.kinds() and "tool_call_start" not in s.events.kinds()
    assert [t.call_uuid for t in HITL.pending_tasks(s)] == ["c-1", "c-2"]


def test_r20_same_tool_two_calls_decided_by_uuid() -> None:
    agent, s, _, model = paused()
    with pytest.raises(AmbiguousTaskError):
        HITL.get_pending_task_by_tool_name(s, "transfer")
    t2 = HITL.get_pending_task_by_call_uuid(s, "c-2")
    assert t2 is not None and t2.args == {"account": "bob", "amount": 20}
    HITL.submit(s, "c-1", HITLDecision.approve().comment("checked"))
    HITL.submit(s, t2, HITLDecision.reject("bob is blocked"))
    assert HITL.get_pending_task_by_call_uuid(s, "c-1") is None
    resp = agent.prompt().session(s).call()
    assert resp.content == "all done" and RAN == [("alice", 10)]
    observations = [m.content for m in model.calls[-1] if m.role == "tool"]
    assert observations == [
        "sent 10 to alice (Note: checked)",
        "Rejected by the reviewer: bob is blocked",
    ]
    kinds = s.events.kinds()
    resume = kinds[kinds.index("run_start", kinds.index("run_end")) :]
    assert resume[:7] == [
        "run_start",
        "hitl_decided",
        "hitl_decided",
        "action_start",
        "tool_call_start",
        "tool_call_end",
        "tool_call_start",
    ]  # R25


def test_r21_skip_text_reaches_the_model() -> None:
    model = ScriptedModel([[ToolCall("transfer", {"account": "a", "amount": 1}, id="c")], "ok"])
    agent, s, _, _ = paused(model)
    HITL.submit(s, "c", HITLDecision.skip("not today"))
    agent.prompt().session(s).call()
    assert RAN == [] and [m.content for m in model.calls[-1] if m.role == "tool"] == ["not today"]


def test_r21_single_reject_ends_the_run_abnormally_without_the_model() -> None:
    model = ScriptedModel([[ToolCall("transfer", {"account": "a", "amount": 1}, id="c")]])
    agent, s, _, _ = paused(model)
    HITL.submit(s, "c", HITLDecision.reject("too risky"))
    resp = agent.prompt().session(s).call()
    assert resp.is_abnormal and resp.content == "too risky" and RAN == [] and model.turn == 1
    assert s.events.kinds()[-4:] == ["hitl_decided", "action_end", "reason_delta", "run_end"]
    assert not s.is_pending and s.status == "done"


def test_r22_undecided_resume_resuspends_without_a_model_call() -> None:
    agent, s, _, model = paused()
    HITL.submit(s, "c-1", HITLDecision.approve())
    resp = agent.prompt().session(s).call()
    assert s.is_pending and model.turn == 1 and RAN == []
    assert resp.content == "Sensitive operation: human confirmation required"
    assert [t.call_uuid for t in HITL.pending_tasks(s)] == ["c-2"]
    HITL.submit(s, "c-2", HITLDecision.approve())
    assert agent.prompt().session(s).call().content == "all done"
    assert RAN == [("alice", 10), ("bob", 20)]


def test_r23_edited_arguments_are_validated_and_applied() -> None:
    agent, s, _, _ = paused()
    before = s.to_json()
    with pytest.raises(InvalidDecisionError, match="amount"):
        HITL.submit(s, "c-1", HITLDecision.approve().modified_args({"amount": "lots"}))
    assert s.to_json() == before
    HITL.submit(s, "c-1", HITLDecision.approve().modified_args({"amount": "5"}))
    HITL.submit(s, "c-2", HITLDecision.approve())
    agent.prompt().session(s).call()
    assert RAN == [("alice", 5), ("bob", 20)]


def test_r23a_changed_arguments_void_the_approval() -> None:
    agent, s, _, model = paused()
    HITL.approve_all(s)
    # what would run is no longer what the reviewer saw
    s.traces["bank"].last_reason.tool_calls[0].args["amount"] = 9999  # type: ignore[union-attr]
    resp = agent.prompt().session(s).call()
    assert s.is_pending and RAN == [] and model.turn == 1
    assert [t.args for t in HITL.pending_tasks(s)] == [{"account": "alice", "amount": 9999}]
    assert resp.content == "Sensitive operation: human confirmation required"


@pytest.mark.parametrize(
    "second",
    [
        HITLDecision.reject("changed my mind"),
        HITLDecision.skip(),
        HITLDecision.approve().modified_args({"amount": 1}),
    ],
    ids=["reject", "skip", "edited"],
)
def test_r23_r39_conflicting_decision_leaves_session_byte_identical(second) -> None:  # type: ignore[no-untyped-def]
    _agent, s, _, _ = paused()
    first = HITL.submit(s, "c-1", HITLDecision.approve().reviewer("alice"))
    before = s.to_json()
    with pytest.raises(DecisionConflictError, match="approve by alice") as info:
        HITL.submit(s, "c-1", second.reviewer("bob"))
    assert (info.value.verdict, info.value.reviewer) == ("approve", "alice")
    assert isinstance(info.value, InvalidDecisionError) and s.to_json() == before
    # the same decision again (a retry, a second reviewer agreeing) changes nothing
    assert HITL.submit(s, "c-1", HITLDecision.approve().reviewer("bob")) == first
    assert s.to_json() == before
    with pytest.raises(DecisionConflictError):
        HITL.reject_all(s, "no")  # the decided task is part of the batch: not skipped over
    with pytest.raises(UnknownTaskError):
        HITL.submit(s, "c-404", HITLDecision.approve())
    with pytest.raises(InvalidDecisionError):
        HITL.submit_all(s, {"c-2": HITLDecision.approve(), "c-1": HITLDecision.skip()})
    assert s.to_json() == before


def test_r23c_reviewer_policy_refuses_and_changes_nothing() -> None:
    interceptor = HITLInterceptor().on_tool("transfer").approvers({"lead"})
    agent, s, _, _ = paused(interceptor=interceptor)
    before = s.to_json()
    with pytest.raises(ReviewerNotAllowedError):
        HITL.submit(s, "c-1", HITLDecision.approve().reviewer("intern"))
    with pytest.raises(ReviewerNotAllowedError):
        HITL.submit(s, "c-1", HITLDecision.approve())
    assert s.to_json() == before
    HITL.approve_all(s, reviewer="lead")
    assert agent.prompt().session(s).call().content == "all done"
    decided = [e for e in s.events if e.kind == "hitl_decided"]
    assert [e.decision.reviewer for e in decided] == ["lead", "lead"]  # type: ignore[union-attr]


def test_r18_policy_decides_per_arguments() -> None:
    big = HITLInterceptor().on_tool(
        "transfer", lambda trace, args: "large amount" if args["amount"] > 15 else None
    )
    _agent, s, resp, _ = paused(interceptor=big)
    assert resp.content == "large amount"
    assert [t.call_uuid for t in HITL.pending_tasks(s)] == ["c-2"]


def test_r23b_expired_task_is_visible_and_resolved_by_default() -> None:
    from intermission import FakeClock

    hitl = HITLInterceptor(on_expire="reject").on_tool("transfer", deadline_ms=1000)
    model = ScriptedModel([[ToolCall("transfer", {"account": "a", "amount": 1}, id="c")]])
    clock = FakeClock(start_ms=0, step_ms=1)
    agent = ReActAgent.of(model).name("bank").tools(transfer).interceptor(hitl).build()
    s = InMemoryAgentSession("d", clock=clock)  # the session's clock stamps the deadline
    agent.prompt("pay").session(s).call()
    (task,) = HITL.pending_tasks(s)
    assert task.deadline_ms is not None and HITL.expired_tasks(s, now_ms=task.deadline_ms - 1) == []
    clock.advance(5000)
    assert HITL.expired_tasks(s, now_ms=clock.now_ms()) == [task]  # visible before a resume
    resp = agent.prompt().session(s).call()
    assert "hitl_expired" in s.events.kinds() and resp.is_abnormal
    assert resp.content == "Rejected: the approval deadline passed."
