"""Decisions on record: an edit, an expiry, a graph approval, and what surfaces note on a
session (recorded, refused, escalated decisions) as span events; the human's wait on the
resume; a listener that fails never breaks a run."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from tests.otel._spans import events, named, one, span_data

from intermission import (
    HITL,
    FakeClock,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    tool,
)
from intermission.audit import AuditEntry, note
from intermission.examples import build_change_graph

SENT: list[dict[str, Any]] = []


@tool
def send(to: str, text: str) -> str:
    """Send a message."""
    SENT.append({"to": to, "text": text})
    return f"sent to {to}"


def mailer(deadline_ms: float | None = None) -> ReActAgent:
    script = [[ToolCall("send", {"to": "bob", "text": "hi"}, "call_m")], "Sent."]
    hitl = HITLInterceptor().on_tool("send", deadline_ms=deadline_ms)
    return ReActAgent.of(ScriptedModel(script)).name("mail").tools(send).interceptor(hitl).build()


def paused(clock: FakeClock | None = None, deadline_ms: float | None = None) -> Any:
    s = InMemoryAgentSession("m", clock=clock)
    agent = mailer(deadline_ms)
    agent.prompt("greet bob").session(s).call()
    assert s.is_pending
    return s, agent


def test_an_edited_approval_runs_the_edit_and_says_so(traced: Any) -> None:
    SENT.clear()
    s, agent = paused()
    traced.clear()
    task = HITL.pending_tasks(s)[0]
    HITL.submit(s, task, HITLDecision.approve().modified_args({"text": "hello"}).reviewer("eve"))
    agent.prompt().session(s).call()
    spans = traced.spans()
    root = one(spans, "invoke_agent mail")
    (decision,) = events(root, "intermission.decision.applied")
    assert decision["intermission.decision.verdict"] == "approve"
    assert decision["intermission.decision.edited"] is True
    assert "intermission.decision.edited_arguments" not in decision  # content: opt-in
    ran = one(spans, "execute_tool send")["attributes"]
    assert ran["intermission.tool.executed"] is True and ran["intermission.decision.edited"]
    assert ran["intermission.decision.principal"] == "eve"
    assert SENT == [{"to": "bob", "text": "hello"}]
    assert "hello" not in json.dumps(spans)


@pytest.mark.otel(capture_content=True)
def test_edited_arguments_with_content_opt_in(traced: Any) -> None:
    s, agent = paused()
    task = HITL.pending_tasks(s)[0]
    HITL.submit(s, task, HITLDecision.approve().modified_args({"text": "hello"}))
    agent.prompt().session(s).call()
    ran = one(traced.spans(), "execute_tool send")["attributes"]
    assert json.loads(ran["intermission.decision.edited_arguments"]) == {"text": "hello"}
    assert json.loads(ran["gen_ai.tool.call.arguments"]) == {"to": "bob", "text": "hello"}


def test_an_expiry_is_recorded_and_the_call_marked_not_run(traced: Any) -> None:
    SENT.clear()
    clock = FakeClock(start_ms=1_000_000, step_ms=0)
    s, agent = paused(clock, deadline_ms=60_000)
    traced.clear()
    clock.advance(3_600_000)  # an hour: nobody decided in time
    agent.prompt().session(s).call()
    spans = traced.spans()
    root = one(spans, "invoke_agent mail")
    (expired,) = events(root, "intermission.task.expired")
    assert expired["intermission.decision.target"] == "call_m"
    assert expired["intermission.task.resolution"] == "reject"
    (decision,) = events(root, "intermission.decision.applied")
    assert decision["intermission.decision.verdict"] == "reject"
    assert decision["intermission.decision.principal"] == "system:deadline"
    not_run = one(spans, "execute_tool send")["attributes"]
    assert not_run["intermission.tool.executed"] is False
    assert not_run["intermission.decision.verdict"] == "reject"
    # the human's wait, by the session's clock: an hour and the minute before it
    assert root["attributes"]["intermission.pause.duration_ms"] == 3_600_000
    assert SENT == []


def test_audit_notes_are_events_inside_a_request_and_spans_of_their_own_outside(
    traced: Any,
) -> None:
    s, _ = paused()
    pause_root = one(traced.spans(), "invoke_agent mail")
    traced.clear()
    # what the policy surfaces note (a refused decision, an escalation), outside any request
    note(s, AuditEntry(action="decision.refused", actor="mallory", roles=["dev"], via="agui",
                       authenticated=True, target="call_m", reason="not an approver",
                       detail={"verdict": "approve", "error": "ReviewerNotAllowedError",
                               "rule": "roles", "progress": "0 of 2 approvals"}))  # fmt: skip
    note(s, AuditEntry(action="task.escalated", via="system", target="call_m",
                       detail={"roles": ["lead"], "deadline_ms": 5.0, "tool": "send"}))  # fmt: skip
    note(s, AuditEntry(action="effect.started", target="tool/send/effect-x/abcdef0123456789"))
    spans = traced.spans()
    refused = one(spans, "intermission.decision.refused")
    a = refused["attributes"]
    assert a["gen_ai.conversation.id"] == "m"
    assert a["intermission.decision.principal"] == "mallory"
    assert a["intermission.decision.via"] == "agui" and a["intermission.decision.roles"] == ["dev"]
    assert a["intermission.decision.authenticated"] is True
    assert a["intermission.decision.reason"] == "not an approver"
    assert a["intermission.decision.policy"] == "0 of 2 approvals"
    assert a["intermission.decision.error"] == "ReviewerNotAllowedError"
    assert events(refused, "intermission.decision.refused")
    (link,) = refused["links"]
    assert link["span"] == pause_root["span"]  # it belongs to the paused request
    escalated = one(spans, "intermission.task.escalated")
    assert escalated["attributes"]["gen_ai.tool.name"] == "send"
    assert not named(spans, "intermission.effect.started")  # effects: keys stay out
    assert "effect-x" not in json.dumps(spans)


def test_a_graph_approval_decided_outside_a_request_is_on_record(traced: Any) -> None:
    from intermission.hitl import decide_graph

    team = build_change_graph()
    s = InMemoryAgentSession.of("g")
    team.prompt("upgrade the service").session(s).call()
    assert s.is_pending
    paused_root = one(traced.spans(), "invoke_workflow change")
    traced.clear()
    decide_graph(s, "REJECT", reviewer="ops-lead", reason="not this week")
    decided = one(traced.spans(), "intermission.decision.recorded")
    assert decided["attributes"]["intermission.decision.verdict"] == "reject"
    assert decided["attributes"]["intermission.decision.principal"] == "ops-lead"
    assert decided["attributes"]["intermission.decision.reason"] == "not this week"
    assert decided["links"][0]["span"] == paused_root["span"]
    traced.clear()
    team.prompt().session(s).call()
    resumed = one(traced.spans(), "invoke_workflow change")
    assert resumed["links"][0]["span"] == paused_root["span"]


def test_a_failing_listener_never_breaks_a_run(traced: Any, caplog: Any) -> None:
    from intermission.core import listeners

    class Broken:
        def on_event(self, session: Any, event: Any) -> None:
            raise RuntimeError("broken listener")

        def on_note(self, session: Any, entry: Any) -> None:
            raise RuntimeError("broken listener")

        def on_effect(self, session: Any, key: str, outcome: str) -> None:
            raise RuntimeError("broken listener")

        def on_end(self, session: Any, error: BaseException | None) -> None:
            raise RuntimeError("broken listener")

    broken = Broken()
    listeners.add(broken)
    try:
        with caplog.at_level(logging.ERROR, logger="intermission.listeners"):
            s, agent = paused()
            HITL.submit(s, HITL.pending_tasks(s)[0], HITLDecision.approve())
            assert agent.prompt().session(s).call().content == "Sent."
    finally:
        listeners.remove(broken)
    assert "broken listener" in caplog.text
    assert named(traced.spans(), "execute_tool send")  # the other listener still traced


def test_a_decision_through_the_cli_is_recorded_once_and_a_refused_one_once(
    traced: Any, tmp_path: Any, capsys: Any
) -> None:
    # the CLI (like a widget) checks a decision on a read copy before it claims; that
    # check records nothing, so it is not on record either: one decision, one record
    from intermission.cli import main
    from intermission.stores import SQLiteStore
    from intermission.testing.conformance import paused_ops

    path = str(tmp_path / "s.db")
    store = SQLiteStore(path)
    store.save(paused_ops("c1"))
    store.close()
    traced.clear()
    assert main(["approve", "c1", "--store", path]) == 0
    spans = traced.spans()
    recorded = named(spans, "intermission.decision.recorded")
    assert len(recorded) == 1, [s["attributes"] for s in recorded]
    assert recorded[0]["attributes"]["intermission.decision.via"] == "cli"
    (applied,) = events(one(spans, "invoke_agent ops"), "intermission.decision.applied")
    assert applied["intermission.decision.via"] == "cli"
    # a refused decision (the OS user is not of the role the policy names) is on record once
    from intermission import ApprovalPolicy

    s = paused_ops("c2")
    policy = ApprovalPolicy(roles=frozenset({"finance"}))
    s.hitl.tasks[:] = [t.model_copy(update={"policy": policy}) for t in s.hitl.tasks]
    store = SQLiteStore(path)
    store.save(s)
    store.close()
    traced.clear()
    assert main(["approve", "c2", "--store", path]) == 2
    capsys.readouterr()
    refused = named(traced.spans(), "intermission.decision.refused")
    assert len(refused) == 1 and not named(traced.spans(), "intermission.decision.recorded")


@pytest.mark.parametrize("capture", [False, True])
def test_a_refused_edit_keeps_the_edited_values_out_unless_content_is_opted_in(
    capture: bool,
) -> None:
    # the refusal of an edit that does not fit the tool quotes the edited values: content
    from tests.otel.conftest import provider

    import intermission.otel as otel
    from intermission import InvalidDecisionError

    tp, exporter = provider()
    otel.instrument(tp, capture_content=capture, experimental=False)
    try:
        s, _ = paused()
        task = HITL.pending_tasks(s)[0]
        with pytest.raises(InvalidDecisionError):
            HITL.submit(s, task, HITLDecision.approve().modified_args({"to": ["s3cret-edit"]}))
        refused = one([span_data(x) for x in exporter.get_finished_spans()],
                      "intermission.decision.refused")  # fmt: skip
    finally:
        otel.uninstrument()
        tp.shutdown()
    a = refused["attributes"]
    assert a["intermission.decision.error"] == "InvalidDecisionError"
    assert a["intermission.decision.target"] == "call_m"
    assert ("s3cret-edit" in json.dumps(refused)) is capture
