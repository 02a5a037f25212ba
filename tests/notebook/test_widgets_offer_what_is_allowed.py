"""Widgets offer only what will be accepted (R63): after one of two votes, the voter's view,
a second reviewer's and the requester's each sync what that viewer may do now
(``can_approve`` / ``can_reject``) and why not, in sentences, judged by the policy code that
judges a click; the header and status lines read as sentences; a refusal never shows an
exception's class name."""

from __future__ import annotations

from typing import Any

import pytest
from tests._helpers import need_module

need_module("anywidget", "the notebook extra (pip install 'intermission[notebook]')")

from intermission import ApprovalPolicy, InMemoryAgentSession, Principal  # noqa: E402
from intermission.examples import build_change_graph  # noqa: E402
from intermission.notebook import ApprovalWidget, HITLPanel  # noqa: E402
from intermission.stores import SQLiteStore  # noqa: E402

# (several people in one kernel: their principals are trusted as code gives them)
POLICY = ApprovalPolicy(roles={"sre"}, approvals=2, not_requester=True, asserted_ok=True)
CAROL, ALICE, BOB = (Principal(n, {"sre"}) for n in ("carol", "alice", "bob"))
MINE = "you approved — waiting for one more from sre (not carol, who asked)"
ASKED = "you asked for this approval, so someone else must decide it"


@pytest.fixture
def store(tmp_path: Any) -> Any:
    s = SQLiteStore(tmp_path / "a.db")
    session = InMemoryAgentSession.of("c-1")
    team = build_change_graph(change_id="c-1", policy=POLICY)
    team.prompt("change").session(session).principal(CAROL).call()
    s.save(session)
    yield s
    s.close()


def _view(store: Any, who: Principal) -> ApprovalWidget:
    team = build_change_graph(change_id="c-1", policy=POLICY)
    return ApprovalWidget(team, store.load("c-1"), store=store, principal=who)


def test_after_one_of_two_votes_each_viewer_is_offered_what_the_policy_allows(store: Any) -> None:
    before = store.raw_row("c-1")
    alice, bob, carol = _view(store, ALICE), _view(store, BOB), _view(store, CAROL)
    # judging what each viewer may do writes nothing (no refusal in the trail either)
    assert store.raw_row("c-1") == before
    assert [r.action for r in store.audit("c-1")] == ["approval.opened"]
    # before any vote: alice and bob may decide, carol (who asked) may not
    for view in (alice, bob):
        assert (view.can_approve, view.can_reject) == (True, True)
        assert view.why_not == {"approve": "", "reject": ""}
        assert "<b>Waiting for a decision:</b>" in view.request
    assert (carol.can_approve, carol.can_reject) == (False, False)
    assert carol.why_not == {"approve": ASKED, "reject": ASKED}

    alice.click("approve", comment="fine")  # what her Approve button sends
    alice.wait()
    # the voter: both buttons off, saying why; the header and status are sentences
    assert (alice.can_approve, alice.can_reject) == (False, False)
    assert alice.why_not == {"approve": MINE, "reject": MINE}
    assert "<b>Waiting for one more approval:</b>" in alice.request
    assert "Waiting for a decision" not in alice.request
    assert alice.status == "<b>Your approval is recorded.</b> Waiting for one more approval."
    # the second reviewer, once their view re-reads the store (its poll)
    assert bob.runner.sync()
    assert (bob.can_approve, bob.can_reject) == (True, True)
    assert bob.why_not == {"approve": "", "reject": ""}
    assert "<b>Waiting for one more approval:</b>" in bob.request
    # the requester still may not, whatever the votes
    assert carol.runner.sync()
    assert carol.why_not == {"approve": ASKED, "reject": ASKED} and not carol.can_approve
    # the view follows its Reviewer field: another name is judged as that person
    alice.click("viewer", reviewer="dan")
    assert alice.why_not["approve"] == (
        "only someone with the role sre may decide this, and you hold no role"
    )
    for view in (alice, bob, carol):
        view.close()


def test_a_refusal_reads_as_a_sentence_without_a_class_name(store: Any) -> None:
    alice = _view(store, ALICE)
    alice.click("approve")
    alice.wait()
    before = store.raw_row("c-1")
    alice.click("approve")  # the page greys the button; a click from code is refused
    alice.wait()
    assert store.raw_row("c-1") == before
    assert alice.status == (
        "<span class='im-error'>Not recorded: you already approved this; it is still "
        "waiting for one more from sre (not carol, who asked).</span>"
    )  # fmt: skip
    carol = _view(store, CAROL)
    carol.click("reject", reason="no")
    carol.wait()
    assert carol.status == f"<span class='im-error'>Not recorded: {ASKED}.</span>"
    for view in (alice, carol):
        assert "Error" not in view.status and "error:" not in view.status
        view.close()


def test_reject_without_a_reason_says_it_needs_one(store: Any) -> None:
    bob = _view(store, BOB)
    # Reject is offered (a reason typed on the page enables it there) ...
    assert bob.can_reject and bob.needs_reason
    before = store.raw_row("c-1")
    bob.click("reject", reason="")  # ... and without one it is refused, in a sentence
    assert store.raw_row("c-1") == before
    assert bob.status == (
        "<span class='im-error'>Not recorded: a rejection needs a reason — write one "
        "above.</span>"
    )  # fmt: skip
    bob.close()


def _deploy() -> Any:
    from intermission import HITLInterceptor, ReActAgent, ScriptedModel, ToolCall, tool

    @tool
    def deploy(env: str) -> str:
        """Deploy."""
        return f"deployed {env}"

    script = ScriptedModel([[ToolCall("deploy", {"env": "prod"})], "done"])
    hitl = HITLInterceptor().on_tool("deploy", policy=POLICY)
    return ReActAgent.of(script).name("deploy").tools(deploy).interceptor(hitl).build()


def test_a_panel_row_offers_what_its_call_allows_each_viewer(tmp_path: Any) -> None:
    store = SQLiteStore(tmp_path / "p.db")
    session = InMemoryAgentSession.of("d-1")
    _deploy().prompt("deploy").session(session).principal(CAROL).call()
    store.save(session)
    alice, bob, carol = (HITLPanel(_deploy(), store.load("d-1"), store=store, principal=p)
                         for p in (ALICE, BOB, CAROL))  # fmt: skip
    (row,) = carol.calls
    assert (row["can_approve"], row["can_reject"], row["can_skip"]) == (False, False, False)
    assert row["why_not"] == dict.fromkeys(("approve", "reject", "skip"), ASKED)
    assert not carol.can_approve and carol.why_not["approve"] == ASKED
    alice.click("all", verdict="approve")
    alice.wait()
    (row,) = alice.calls
    assert row["open"] and not row["can_approve"] and row["why_not"]["approve"] == MINE
    assert alice.status == "<b>Your approvals are recorded.</b> Waiting for one more approval."
    assert bob.runner.sync()
    (row,) = bob.calls
    assert row["can_approve"] and row["can_reject"] and bob.can_approve
    for view in (alice, bob, carol):
        view.close()
    store.close()
