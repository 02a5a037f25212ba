"""What the widgets say about an approval that needs two people: the HITLPanel row, the
ApprovalWidget and the Inbox show the approvals so far and what is still needed (the same
words as every surface); a second principal's view completes it; a refusal shows in the
widget and reaches the store's audit trail."""

from __future__ import annotations

from typing import Any

import pytest
from tests._helpers import need_module

need_module("anywidget", "the notebook extra (pip install 'intermission[notebook]')")

from intermission import (  # noqa: E402
    ApprovalPolicy,
    InMemoryAgentSession,
    Principal,
    ReviewerNotAllowedError,
)
from intermission.examples import build_change_graph  # noqa: E402
from intermission.notebook import ApprovalWidget, Inbox, settings  # noqa: E402
from intermission.stores import SQLiteStore  # noqa: E402

POLICY = ApprovalPolicy(roles={"sre"}, approvals=2, not_requester=True)
ONE = "1 of 2 approvals (alice, sre) — waiting for one more from sre (not carol, who asked)"


@pytest.fixture
def store(tmp_path: Any) -> Any:
    s = SQLiteStore(tmp_path / "w.db")
    session = InMemoryAgentSession.of("c-1")
    build_change_graph(change_id="c-1", policy=POLICY).prompt("change").session(session).principal(
        Principal("carol", {"sre"})
    ).call()
    s.save(session)
    yield s
    s.close()


def test_the_approval_widget_and_the_inbox_show_the_quorum(store: Any) -> None:
    team = build_change_graph(change_id="c-1", policy=POLICY)
    alice = ApprovalWidget(team, store.load("c-1"), store=store,
                           principal=Principal("alice", {"sre"}))  # fmt: skip
    assert alice.progress.startswith("0 of 2 approvals")
    assert alice.approve(comment="fine") is None  # a vote: nothing resumed
    assert alice.runner.note == f"recorded; {ONE}"
    assert alice.progress == ONE and "recorded; 1 of 2" in alice.status
    assert alice.can_decide  # (open for others: this view can change hands)
    assert not alice.decided  # a vote decides nothing yet
    inbox = Inbox(store, {"change": team}, poll_s=None)
    assert ONE in inbox.table
    # alice again, in another view: refused, shown, nothing changed, and kept in the trail
    again = inbox.open_session("c-1")
    again.reviewer = "alice"  # a typed name holds no roles ...
    with pytest.raises(ReviewerNotAllowedError, match="held: none"):
        again.approve()
    again.principal = Principal("alice", {"sre"})  # ... alice's principal does
    before = store.raw_row("c-1")
    with pytest.raises(Exception, match="counts once"):
        again.approve()
    assert store.raw_row("c-1") == before and "counts once" in again.status
    carol = ApprovalWidget(team, store.load("c-1"), store=store,
                           principal=Principal("carol", {"sre"}))  # fmt: skip
    with pytest.raises(ReviewerNotAllowedError):
        carol.approve()
    bob = ApprovalWidget(team, store.load("c-1"), store=store, principal=Principal("bob", {"sre"}))
    assert bob.progress == ONE
    response = bob.approve()
    assert response.content == "Change executed: applied c-1"
    assert "APPROVE</b> by <b>bob</b> <i>(alice and bob)</i>" in bob.status
    assert bob.progress == "" and bob.decided  # decided: the status says by whom
    refused = [(r.actor, r.detail["rule"]) for r in store.audit("c-1")
               if r.action == "decision.refused"]  # fmt: skip
    assert refused == [("alice", "roles"), ("alice", "twice"), ("carol", "not_requester")]
    inbox.refresh()
    assert "no pending sessions" in inbox.table
    for view in (alice, again, carol, bob):
        view.close()
    inbox.close()


def test_settings_principal_names_who_decides_in_the_notebook(store: Any) -> None:
    team = build_change_graph(change_id="c-1", policy=POLICY)
    before = settings.principal
    settings.principal = Principal("alice", {"sre"})
    try:
        view = ApprovalWidget(team, store.load("c-1"), store=store)
        assert view.reviewer == "alice" and view.roles == {"alice": ["sre"]}
        assert view.approve() is None
        (vote,) = [e.vote for e in store.load("c-1").events if e.kind == "approval_voted"]
        assert (vote.name, vote.roles, vote.via, vote.authenticated) == (
            "alice", ["sre"], "notebook", False
        )  # fmt: skip
        view.close()
    finally:
        settings.principal = before


def _deploy(policy: ApprovalPolicy | None) -> Any:
    from intermission import HITLInterceptor, ReActAgent, ScriptedModel, ToolCall, tool

    @tool
    def deploy(env: str) -> str:
        """Deploy."""
        return f"deployed {env}"

    script = ScriptedModel([[ToolCall("deploy", {"env": "prod"})], "done"] * 2)
    hitl = HITLInterceptor().on_tool("deploy", policy=policy)
    return ReActAgent.of(script).name("deploy").tools(deploy).interceptor(hitl).build()


@pytest.mark.parametrize("needs", [True, False])
def test_a_widget_asks_for_a_reason_to_reject_as_the_policy_says(needs: bool) -> None:
    from intermission.notebook import HITLPanel

    policy = None if needs else ApprovalPolicy(reason_to_reject=False)
    agent = _deploy(policy)
    session = InMemoryAgentSession.of("r")
    agent.prompt("deploy").session(session).call()
    panel = HITLPanel(agent, session, reviewer="alice")
    (uuid,) = panel.rows
    (call,) = panel.calls
    assert call["open"] and call["needs_reason"] is needs and panel.needs_reason is needs
    if needs:
        with pytest.raises(Exception, match="needs a reason"):
            panel.reject(uuid, "")
        assert session.is_pending
    else:
        assert panel.reject(uuid, "").is_abnormal and session.status == "done"
    panel.close()
