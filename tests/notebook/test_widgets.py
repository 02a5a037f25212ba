"""Headless widgets (R35–R37a, R59): what a button sends (``click``: the message the page
sends, handled in Python) takes the same path as the code twins."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from tests._helpers import linear, paused_change

from intermission import (
    HITL,
    InMemoryAgentSession,
    InvalidDecisionError,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    tool,
)
from intermission.examples import build_change_graph, build_ops_agent
from intermission.notebook import ApprovalWidget, HITLPanel, Inbox, Stepper
from intermission.stores import MemoryStore

paused = paused_change  # the change graph waiting at its approval: (team, session, log)


def test_approve_button_and_code_twin_take_the_same_path() -> None:
    team, s, log = paused()
    w = ApprovalWidget(team, s)
    assert "Change plan awaits human review" in w.request and w.can_decide
    w.click("approve", reviewer="alice", comment="ship it")
    w.wait()
    assert log == ["change-001"] and s.context["approval.operator"] == "alice"
    assert s.context["approval.comment"] == "ship it"
    assert "Change executed" in w.result
    assert not w.can_decide and not w.busy
    assert "executor_agent · visited" in w.graph
    team2, s2, log2 = paused()
    resp = ApprovalWidget(team2, s2).approve(reviewer="alice", comment="ship it")
    assert log2 == ["change-001"] and resp.content == "Change executed: applied change-001"


def test_reject_needs_a_reason_and_it_shows_in_the_timeline() -> None:  # R47
    team, s, log = paused()
    w = ApprovalWidget(team, s, reviewer="bob")
    before = s.to_json()
    w.click("reject", reason="  ")  # (the page greys Reject without a reason: never sent)
    assert "needs a reason" in w.status and s.to_json() == before
    with pytest.raises(InvalidDecisionError, match="needs a reason"):
        w.reject("")
    w.click("reject", reason="no window", comment="ask again on Monday")
    assert w.wait().content == "Change rejected: no window" and log == []
    assert s.context["approval.reason"] == "no window" and s.context["approval.operator"] == "bob"
    timeline = w.timeline
    assert "REJECT</b> by bob — ask again on Monday" in timeline and "reason: no window" in timeline
    team2, s2, _ = paused()
    assert ApprovalWidget(team2, s2).reject("no window").content == "Change rejected: no window"


def test_the_reviewer_defaults_from_the_settings_and_an_empty_one_falls_back_to_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from intermission.notebook import settings

    monkeypatch.setattr(settings, "reviewer", "carol")
    team, s, _ = paused()
    w = ApprovalWidget(team, s, approvers={"carol"})
    assert w.reviewer == "carol"
    w.click("approve", reviewer="   ")  # cleared: the decision records the default (R47)
    w.wait()
    assert s.status == "done" and s.context["approval.operator"] == "carol"
    assert w.reviewer == "carol"  # the field says who was recorded
    decided = [e for e in s.events if e.kind == "approval_decided"]
    assert [e.reviewer for e in decided] == ["carol"]
    monkeypatch.setattr(settings, "reviewer", None)
    monkeypatch.setenv("INTERMISSION_REVIEWER", "dave")
    assert ApprovalWidget(team, paused()[1]).reviewer == "dave"


def test_with_no_reviewer_at_all_a_decision_is_refused_and_nothing_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import getpass

    from intermission.notebook import settings

    monkeypatch.setattr(settings, "reviewer", None)
    monkeypatch.delenv("INTERMISSION_REVIEWER", raising=False)
    monkeypatch.setattr(getpass, "getuser", lambda: "")
    team, s, _ = paused()
    before = s.to_json()
    w = ApprovalWidget(team, s)
    w.click("approve")
    w.wait()
    assert "Error" not in w.status and "Not recorded: a decision needs a reviewer" in w.status
    assert not w.can_approve and w.why_not["approve"] == "type your name in the Reviewer field"
    assert s.to_json() == before
    with pytest.raises(InvalidDecisionError, match="reviewer"):
        w.approve()
    agent = build_ops_agent()
    session = InMemoryAgentSession("hitl-none")
    agent.prompt("Please delete user 1001").session(session).call()
    assert session.is_pending
    panel = HITLPanel(agent, session)
    with pytest.raises(InvalidDecisionError, match="reviewer"):
        panel.decide_all("approve")
    assert session.is_pending


def test_double_click_resumes_once() -> None:
    gate = threading.Event()
    calls: list[str] = []

    def slow(change_id: str) -> str:
        calls.append(change_id)
        gate.wait(5)
        return "ok"

    team, s, _ = paused()
    team = build_change_graph(slow)
    w = ApprovalWidget(team, s, reviewer="alice")
    w.click("approve")
    assert w.busy and not w.can_decide  # the page greys its buttons
    w.click("approve")  # a second message (a page without its guard): ignored while busy
    w.click("reject", reason="too late")  # ignored too
    w.runner.run_in_background(lambda sess: None)  # also ignored while busy
    gate.set()
    w.wait()
    assert calls == ["change-001"] and s.context["approval.decision"] == "APPROVE"


def test_failing_resume_shows_the_error_and_re_enables_buttons() -> None:
    team, s, _ = paused()
    w = ApprovalWidget(team, s, approvers={"lead"})
    w.click("approve", reviewer="intern")
    w.wait()
    assert "Not recorded: you are not one of the people who may decide this." in w.status
    assert "Error" not in w.status  # a sentence, not an exception's class name
    assert w.can_decide and not w.busy and s.is_pending
    with pytest.raises(Exception, match="intern"):
        w.approve(reviewer="intern")
    assert w.approve(reviewer="lead").content.startswith("Change executed")


def test_html_in_reason_and_request_is_escaped() -> None:
    team, s, _ = paused()
    s.pending(True, "<script>alert('x')</script>")
    s.context.put("approval.request", "<img src=x onerror=alert(1)>")
    w = ApprovalWidget(team, s)
    assert "<script>" not in w.request and "&lt;script&gt;" in w.request
    assert "<img" not in w.request


def _two_call_agent() -> tuple[ReActAgent, list[tuple[str, int]]]:
    ran: list[tuple[str, int]] = []

    @tool
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        ran.append((to, amount))
        return f"paid {amount} to {to}"

    from intermission import HITLInterceptor

    model = ScriptedModel(
        [[ToolCall("pay", {"to": "a", "amount": 1}, id="c1"),
          ToolCall("pay", {"to": "<b>b</b>", "amount": 2}, id="c2")], "done"]
    )  # fmt: skip
    agent = (
        ReActAgent.of(model)
        .name("payer")
        .tools(pay)
        .interceptor(HITLInterceptor().on_tool("pay"))
        .build()
    )
    return agent, ran


def test_hitl_panel_rows_by_uuid_with_edited_arguments() -> None:
    agent, ran = _two_call_agent()
    s = InMemoryAgentSession.of("p")
    agent.prompt("pay both").session(s).call()
    panel = HITLPanel(agent, s, reviewer="lead")
    assert set(panel.rows) == {"c1", "c2"} and [c["uuid"] for c in panel.calls] == ["c1", "c2"]
    assert '"<b>b</b>"' in panel.calls[1]["args"]  # a text box shows text, not HTML
    timeline = panel.timeline
    assert "&lt;b&gt;b&lt;/b&gt;" in timeline and "<b>b</b>" not in timeline
    panel.click("decide", call_uuid="c1", verdict="approve", args='{"to": "a", "amount": 5}')
    assert ran == [] and [c["open"] for c in panel.calls] == [False, True]
    assert "approve (chosen)" in panel.calls[0]["state"]
    panel.click("decide", call_uuid="c2", verdict="skip")
    assert panel.wait().content == "done" and ran == [("a", 5)]
    agent2, ran2 = _two_call_agent()
    s2 = InMemoryAgentSession.of("p2")
    agent2.prompt("pay both").session(s2).call()
    panel2 = HITLPanel(agent2, s2, reviewer="lead")
    with pytest.raises(InvalidDecisionError, match="needs a reason"):
        panel2.decide_all({"c1": "approve", "c2": "reject"})
    panel2.reason = "b is not a payee"  # the Reason field, as the page sends it
    resp = panel2.decide_all({"c1": "approve", "c2": "reject"})
    assert resp.content == "done" and ran2 == [("a", 1)]
    (rejected,) = [e for e in s2.events if e.kind == "tool_call_end" and e.call_uuid == "c2"]
    assert rejected.observation == "Rejected by the reviewer: b is not a payee"
    assert {e.decision.reviewer for e in s2.events if e.kind == "hitl_decided"} == {"lead"}


def test_approve_all_after_a_rejected_row_keeps_the_rejection() -> None:
    # a person rejects one call, then approves the rest with Approve all
    agent, ran = _two_call_agent()
    s = InMemoryAgentSession.of("p")
    agent.prompt("pay both").session(s).call()
    panel = HITLPanel(agent, s, reviewer="lead")
    panel.click("decide", call_uuid="c2", verdict="reject", reason="b is not a payee")
    assert "reject (chosen)" in panel.calls[1]["state"] and panel.can_all
    panel.click("all", verdict="approve")
    assert panel.wait().content == "done" and ran == [("a", 1)]
    verdicts = {e.call_uuid: e.decision.verdict for e in s.events if e.kind == "hitl_decided"}
    assert verdicts == {"c1": "approve", "c2": "reject"}


def test_hitl_panel_refuses_bad_json_and_changes_nothing() -> None:
    agent, _ran = _two_call_agent()
    s = InMemoryAgentSession.of("p")
    agent.prompt("pay both").session(s).call()
    before = s.to_json()
    panel = HITLPanel(agent, s)
    panel.click("decide", call_uuid="c1", verdict="approve", args="{not json")
    assert "not JSON" in panel.status and s.to_json() == before
    panel.click("decide", call_uuid="c1", verdict="approve", args='{"to": "a", "amount": "lots"}')
    assert "amount" in panel.status and HITL.get_decision(s, "c1") is None
    assert panel.calls[0]["open"]  # refused: the row may be decided again


def test_the_panels_boxes_run_as_shown_a_deleted_argument_is_refused() -> None:
    # the box shows every argument, but an edit is merged over the proposed ones: a key a
    # person deleted would still have run
    ran: list[tuple[int, bool]] = []

    @tool
    def delete_user(user_id: int, hard: bool = False) -> str:
        """Delete a user account."""
        ran.append((user_id, hard))
        return "deleted"

    from intermission import HITLInterceptor

    model = ScriptedModel([[ToolCall("delete_user", {"user_id": 7, "hard": True}, id="d")], "ok"])
    agent = ReActAgent.of(model).name("ops").tools(delete_user).interceptor(
        HITLInterceptor().on_tool("delete_user")).build()  # fmt: skip
    s = InMemoryAgentSession.of("p")
    agent.prompt("delete 7").session(s).call()
    before = s.to_json()
    panel = HITLPanel(agent, s)
    panel.click("decide", call_uuid="d", verdict="approve", args='{"user_id": 7}')
    panel.wait()
    assert "cannot remove an argument (&#x27;hard&#x27;)" in panel.status
    assert s.to_json() == before and ran == [] and panel.calls[0]["open"]
    panel.click("all", verdict="approve", args={"d": '{"user_id": 7, "hard": false}'})
    assert panel.wait().content == "ok" and ran == [(7, False)]  # Approve all takes the box


def test_the_wrong_widget_is_refused_and_changes_nothing() -> None:  # R35, R36
    # a tool-approval session in an ApprovalWidget, a graph-approval one in an HITLPanel:
    # a typed error naming the right tool, not a resume that seems to work and does nothing
    agent, ran = _two_call_agent()
    tools = InMemoryAgentSession.of("tools")
    agent.prompt("pay both").session(tools).call()
    before = tools.to_json()
    with pytest.raises(InvalidDecisionError, match="2 tool approval"):
        ApprovalWidget(agent, tools).approve(reviewer="alice")
    button = ApprovalWidget(agent, tools)
    button.click("approve")
    button.wait()  # (the click's resume runs beside the cell; its refusal redraws the buttons)
    assert "HITLPanel" in button.status and button.can_decide
    assert tools.to_json() == before and ran == []

    team, graph, log = paused()
    before = graph.to_json()
    with pytest.raises(InvalidDecisionError, match=r"no pending tool calls.*ApprovalWidget"):
        HITLPanel(team, graph).decide_all()
    assert graph.to_json() == before and log == []


def _two_pending() -> tuple[MemoryStore, Any, list[str]]:
    """A store holding the paused change graph and, newer, the paused ops agent."""
    store = MemoryStore()
    team, s, log = paused()
    store.save(s)
    ops = InMemoryAgentSession.of("ops-1")
    build_ops_agent().prompt("delete user 1001").session(ops).call()
    store.save(ops)
    return store, team, log


def test_inbox_opens_decides_and_saves() -> None:
    store, team, log = _two_pending()
    inbox = Inbox(store, {"change": lambda: team, "ops": build_ops_agent})
    assert set(inbox.pending_ids) == {"change-001", "ops-1"}
    # what each waits for: a graph approval counts, it is not "0 tasks"
    table = inbox.table
    assert "<td>1 approval</td>" in table and "<td>1 tool call</td>" in table
    widget = inbox.open_session("change-001")
    assert isinstance(widget, ApprovalWidget)
    widget.approve(reviewer="alice")
    assert log == ["change-001"] and store.load("change-001").status == "done"
    panel = inbox.open_session("ops-1")
    assert isinstance(panel, HITLPanel)
    panel.decide_all("approve")
    assert store.load("ops-1").status == "done"
    assert inbox.refresh() == []


def test_stepper_advances_n_nodes_and_resets() -> None:
    spec = linear(4)
    stepper = Stepper(spec)
    assert stepper.step(2) == "budget" and stepper.session.context["count"] == 1
    assert "next node(s): n1" in stepper.status
    assert "Stopped after the steps asked for" in stepper.status
    stepper.click("step", n=1)
    assert stepper.session.context["count"] == 2 and stepper.steps == 1 and not stepper.busy
    assert stepper.run() == "done" and stepper.session.context["count"] == 4
    stepper.reset()
    assert "count" not in stepper.session.context
    team_stepper = Stepper(build_change_graph(), prompt="Upgrade")
    team_stepper.step(2)
    assert team_stepper.session.context.trace.positions("change") == ["approval"]
    team_stepper.step(1)
    assert team_stepper.session.is_pending


def test_code_twins_leave_the_click_to_a_person_and_never_decide_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # issue 15: tutorials that work both ways
    from intermission.notebook import settings

    monkeypatch.setattr(settings, "autopilot", False)
    team, s, log = paused()
    w = ApprovalWidget(team, s, reviewer="alice")
    assert w.code_twin(lambda x: x.approve()) is None  # a person is expected to click
    assert "Waiting for your decision" in w.hint and s.is_pending and log == []
    assert not w.decided
    w.click("approve")  # the person clicks
    response = w.code_twin(lambda x: x.reject("never runs"))  # shows the click's result
    assert response.content.startswith("Change executed") and log == ["change-001"]
    assert w.decided and w.hint == ""
    monkeypatch.setattr(settings, "autopilot", True)  # nbval: the twin decides
    team2, s2, log2 = paused()
    w2 = ApprovalWidget(team2, s2, reviewer="alice")
    assert w2.code_twin(lambda x: x.approve(comment="auto")).content.startswith("Change executed")
    assert log2 == ["change-001"] and w2.decided


def test_the_inbox_preselects_refreshes_itself_and_shows_one_graph() -> None:  # R47
    store, team, log = _two_pending()
    inbox = Inbox(store, {"change": lambda: team, "ops": build_ops_agent}, poll_s=0.05)
    assert inbox.selected == "ops-1"  # the newest pending session, preselected
    late = InMemoryAgentSession.of("change-002")
    team.prompt("Another change").session(late).call()
    store.save(late)
    deadline = time.monotonic() + 5
    while "change-002" not in inbox.pending_ids and time.monotonic() < deadline:
        time.sleep(0.01)  # the poll finds it without a click on Refresh
    assert "change-002" in inbox.table and "change-002" in [o["id"] for o in inbox.options]
    inbox.click("open", session_id="change-001")
    widget = inbox.current
    assert isinstance(widget, ApprovalWidget) and inbox.detail is widget
    assert widget.graph.count("<svg") == 1  # one graph, the widget's
    widget.click("approve")
    widget.wait()
    assert log == ["change-001"] and "change-001" not in inbox.pending_ids  # refreshed
    assert "change-001" not in inbox.table
    inbox.close()
