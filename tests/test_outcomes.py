"""What became of an approval, read from the session (intermission.outcomes)."""

from __future__ import annotations

from intermission import FakeClock, InMemoryAgentSession
from intermission.examples import build_change_graph
from intermission.hitl import decide_graph
from intermission.outcomes import approval_outcomes


def test_a_graph_approval_owns_its_effect_however_long_its_event_took_to_stamp() -> None:
    """The decision's time key is read before its event is stamped; on a loaded machine
    they differ by more than a millisecond (a clock stepping 7 ms a read stands in for
    that): the effect the approval authorised is still its own."""
    team = build_change_graph()
    session = InMemoryAgentSession("slow", clock=FakeClock(start_ms=1_000_000.0, step_ms=7))
    team.prompt("Upgrade the order service").session(session).call()
    decide_graph(session, "APPROVE", reviewer="rita")
    team.prompt().session(session).call()
    (outcome,) = approval_outcomes(session)
    assert outcome["verdict"] == "approve" and outcome["callId"] is None
    assert [d["name"] for d in outcome["deciders"]] == ["rita"]
    assert [e["status"] for e in outcome["effects"]] == ["completed"]
    assert str(outcome["effects"][0]["result"]).startswith("applied ")


def test_who_decided_an_outcome_is_the_voters_of_its_verdict() -> None:
    """A quorum's voter of the other verdict did not decide it: the Slack update and the
    outbox name only the voters of the outcome's verdict (issue 41's second reading)."""
    from intermission.outcomes import deciders_of
    from intermission.slack.reply import _who

    votes = [{"name": "alice", "verdict": "approve"}, {"name": "bob", "verdict": "reject"},
             {"name": "carol", "verdict": "approve"}]  # fmt: skip
    approved = {"verdict": "approve", "deciders": votes}
    assert [d["name"] for d in deciders_of(approved)] == ["alice", "carol"]
    assert _who(approved) == "alice and carol"
    assert _who({"verdict": "reject", "deciders": votes}) == "bob"
    one = {"verdict": "reject", "deciders": [{"name": "dana"}]}  # (no quorum: no verdicts)
    assert _who(one) == "dana"
