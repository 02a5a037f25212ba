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

# (several people in one kernel: their principals are trusted as code gives them, as a
# teaching notebook does; without asserted_ok a notebook decides as the person its identity
# map maps the OS user to — tests/hitl/test_policy_surfaces.py)
POLICY = ApprovalPolicy(roles={"sre"}, approvals=2, not_requester=True, asserted_ok=True)
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
    assert alice.progress == ONE
    assert alice.status == "<b>Your vote is recorded.</b> Waiting for one more approval."
    assert alice.can_decide  # (open for others: this view can change hands) ...
    assert not alice.can_approve and not alice.can_reject  # ... but not for alice again
    assert not alice.decided  # a vote decides nothing yet
    inbox = Inbox(store, {"change": team}, poll_s=None)
    assert ONE in inbox.table
    # alice again, in another view: refused, shown, nothing changed, and kept in the trail
    again = inbox.open_session("c-1")
    again.click("viewer", reviewer="alice")  # a typed name holds no roles ...
    held = "only someone with the role sre may decide this, and you hold no role"
    assert again.why_not == {"approve": held, "reject": held}
    with pytest.raises(ReviewerNotAllowedError, match="held: none"):
        again.approve()
    again.principal = Principal("alice", {"sre"})  # ... alice's principal does
    before = store.raw_row("c-1")
    with pytest.raises(Exception, match="counts once"):
        again.approve()
    assert store.raw_row("c-1") == before and again.status == (
        "<span class='im-error'>Not recorded: you already approved this; it is still waiting "
        "for one more from sre (not carol, who asked).</span>"
    )  # fmt: skip
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


def test_a_cleared_reviewer_field_decides_as_the_widgets_principal(store: Any) -> None:
    # the README's order: the widget's principal=, then settings.principal, ... the OS user
    team = build_change_graph(change_id="c-1", policy=POLICY)
    view = ApprovalWidget(team, store.load("c-1"), store=store,
                          principal=Principal("alice", {"sre"}))  # fmt: skip
    view.click("approve", reviewer="")  # the page's Approve with the field cleared
    view.wait()
    (vote,) = [e.vote for e in store.load("c-1").events if e.kind == "approval_voted"]
    assert (vote.name, vote.roles) == ("alice", ["sre"]) and view.reviewer == "alice"
    view.close()


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


def _two_deploys(ran: list[str]) -> Any:
    """Asks two sre principals before each of two ``deploy`` calls of one batch."""
    from intermission import HITLInterceptor, ReActAgent, ScriptedModel, ToolCall, tool

    @tool
    def deploy(env: str) -> str:
        """Deploy."""
        ran.append(env)
        return f"deployed {env}"

    def script(messages: list[Any], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m.content for m in messages[last_user:] if m.role == "tool"]
        if seen:
            return "; ".join(seen)
        return [ToolCall("deploy", {"env": "prod"}), ToolCall("deploy", {"env": "staging"})]

    policy = ApprovalPolicy(roles={"sre"}, approvals=2, asserted_ok=True)  # (one kernel)
    hitl = HITLInterceptor().on_tool("deploy", policy=policy)
    return (
        ReActAgent.of(ScriptedModel(script)).name("deploy").tools(deploy).interceptor(hitl).build()
    )


def test_a_batch_under_a_quorum_is_voted_by_clicks_and_its_progress_names_each_call(
    tmp_path: Any,
) -> None:
    import json

    from intermission.notebook import HITLPanel
    from intermission.notebook._html import short_id

    ran: list[str] = []
    store = SQLiteStore(tmp_path / "b.db")
    session = InMemoryAgentSession.of("b-1")
    _two_deploys(ran).prompt("deploy").session(session).call()
    store.save(session)
    alice = HITLPanel(_two_deploys(ran), store.load("b-1"), store=store,
                      principal=Principal("alice", {"sre"}))  # fmt: skip
    first, second = alice.rows
    a, b = short_id(first), short_id(second)
    assert alice.roles == {"alice": ["sre"]}
    waiting = "0 of 2 approvals — waiting for 2 approvals from sre"
    assert alice.progress == f"deploy ({a}): {waiting}; deploy ({b}): {waiting}"
    alice.click("all", verdict="approve")  # what Approve all sends
    alice.wait()
    one = "1 of 2 approvals (alice, sre) — waiting for one more from sre"
    assert alice.runner.note.startswith("recorded; ")
    assert alice.status == "<b>Your approvals are recorded.</b> Waiting for more approvals."
    mine = "you approved — waiting for one more from sre"
    assert [(c["can_approve"], c["can_reject"], c["why_not"]["approve"]) for c in alice.calls] == [
        (False, False, mine)
    ] * 2  # fmt: skip
    assert not alice.can_approve and alice.why_not["approve"] == mine
    assert alice.progress == f"deploy ({a}): {one}; deploy ({b}): {one}"
    assert [c["open"] for c in alice.calls] == [True, True] and alice.can_all
    assert ran == [] and not alice.decided and alice.outcome["progress"] == alice.progress
    # her second vote on one call: refused, shown, nothing changed, kept in the trail
    before = store.raw_row("b-1")
    alice.click("decide", call_uuid=first, verdict="approve")
    alice.wait()
    assert "Not recorded: you already approved this" in alice.status
    assert store.raw_row("b-1") == before
    assert [r.detail["rule"] for r in store.audit("b-1") if r.action == "decision.refused"] == [
        "twice"
    ]
    # a rejection without a reason, clicked: refused by the default rule, in the trail too
    bob = HITLPanel(_two_deploys(ran), store.load("b-1"), store=store,
                    principal=Principal("bob", {"sre"}))  # fmt: skip
    assert bob.progress == alice.progress and bob.needs_reason
    assert bob.can_approve and all(c["can_approve"] and c["can_reject"] for c in bob.calls)
    bob.click("decide", call_uuid=first, verdict="reject", reason="")
    assert "needs a reason" in bob.status and store.raw_row("b-1") == before
    assert [r.detail["rule"] for r in store.audit("b-1") if r.action == "decision.refused"] == [
        "twice", "reason_to_reject"
    ]  # fmt: skip
    # bob's Approve all completes both quorums: each call runs once
    bob.click("all", verdict="approve")
    response = bob.wait()
    assert response.content == "deployed prod; deployed staging" and sorted(ran) == [
        "prod", "staging"
    ]  # fmt: skip
    assert bob.progress == "" and bob.decided
    assert bob.status.count("by <b>bob</b> <i>(alice and bob)</i>") == 2
    data = json.loads(json.dumps(bob.outcome))  # the outcome trait is plain JSON
    assert [[v["name"] for v in d["votes"]] for d in data["decisions"]] == [["alice", "bob"]] * 2
    for view in (alice, bob):
        view.close()
    store.close()


def test_a_second_approver_sees_the_edited_arguments_the_first_approved_and_agrees(
    tmp_path: Any,
) -> None:
    import json

    from intermission.notebook import HITLPanel

    ran: list[str] = []
    store = SQLiteStore(tmp_path / "e.db")
    session = InMemoryAgentSession.of("e-1")
    _two_deploys(ran).prompt("deploy").session(session).call()
    store.save(session)
    alice = HITLPanel(_two_deploys(ran), store.load("e-1"), store=store,
                      principal=Principal("alice", {"sre"}))  # fmt: skip
    first, second = alice.rows
    bob = HITLPanel(_two_deploys(ran), store.load("e-1"), store=store,
                    principal=Principal("bob", {"sre"}))  # fmt: skip
    alice.click("decide", call_uuid=first, verdict="approve", args='{"env": "canary"}')
    alice.click("decide", call_uuid=second, verdict="approve")
    alice.wait()
    assert ran == [] and "1 of 2 approvals (alice, sre)" in alice.progress
    bob.runner.sync()  # what bob's panel does every few seconds
    box = {c["uuid"]: c for c in bob.calls}
    assert json.loads(box[first]["args"]) == {"env": "canary"}  # what alice approved
    assert "approve edited arguments" in box[first]["head"]
    bob.click("all", verdict="approve", args={u: c["args"] for u, c in box.items()})
    assert bob.wait().content == "deployed canary; deployed staging"
    assert sorted(ran) == ["canary", "staging"]
    for view in (alice, bob):
        view.close()
    store.close()


def test_a_choice_made_in_a_panel_stays_when_another_vote_lands(tmp_path: Any) -> None:
    from intermission.notebook import HITLPanel

    ran: list[str] = []
    store = SQLiteStore(tmp_path / "k.db")
    session = InMemoryAgentSession.of("k-1")
    _two_deploys(ran).prompt("deploy").session(session).call()
    store.save(session)
    alice = HITLPanel(_two_deploys(ran), store.load("k-1"), store=store,
                      principal=Principal("alice", {"sre"}))  # fmt: skip
    bob = HITLPanel(_two_deploys(ran), store.load("k-1"), store=store,
                    principal=Principal("bob", {"sre"}))  # fmt: skip
    first, second = alice.rows
    alice.click("decide", call_uuid=second, verdict="reject", reason="no staging today")
    bob.click("all", verdict="approve")
    bob.wait()
    assert alice.runner.sync()  # alice's panel re-reads the store: bob's votes
    assert "reject (chosen)" in alice.calls[1]["state"] and not alice.calls[1]["open"]
    alice.click("decide", call_uuid=first, verdict="approve")  # her last call: submitted
    alice.wait()
    assert ran == ["prod"] and alice.session.status == "done"
    for view in (alice, bob):
        view.close()
    store.close()
