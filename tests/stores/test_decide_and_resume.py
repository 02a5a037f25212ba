"""Issue 24.2 step by step, on every store: ``decide_and_resume`` checks a decision on a
read (a refused one claims nothing), waits (bounded) for another resumer's claim instead
of giving up, and when someone else applied meanwhile says so — the same decision as
applied by them, a different one as a conflict naming them. Orderings are forced with
events, never with sleeps."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from typing import Any

import pytest

from intermission import (
    HITL,
    DecisionConflictError,
    InMemoryAgentSession,
    SessionBusyError,
    decide_graph,
)
from intermission.examples import build_change_graph, build_ops_agent
from intermission.stores import decide_and_resume


class _Held(Exception):
    """Raised to leave a claim without saving."""


def _paused(store: Any, sid: str) -> Any:
    graph = build_change_graph(lambda change_id: f"applied {change_id}")
    s = InMemoryAgentSession.of(sid)
    graph.prompt("upgrade").session(s).call()
    store.save(s)
    return graph


def _approve(who: str, seen: threading.Event | None = None) -> Any:
    def decide(s: Any) -> None:
        decide_graph(s, "APPROVE", reviewer=who)
        if seen is not None:
            seen.set()  # the check on the read is done: now the test lets the others move

    return decide


def _in_thread(work: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:
            out.append(exc)

    t = threading.Thread(target=run)
    t.start()
    return t, out


def test_the_winner_waits_for_a_losers_claim_and_applies_its_decision(make_store: Any) -> None:
    store = make_store()
    graph = _paused(store, "w")
    with ExitStack() as loser:  # bob holds the claim, as a conflict check under it once did
        loser.enter_context(pytest.raises(_Held))
        loser.enter_context(store.resume("w"))
        read = threading.Event()
        t, out = _in_thread(lambda: decide_and_resume(store, "w", _approve("alice", read), graph))
        assert read.wait(30)
        raise _Held  # bob leaves without saving; alice, waiting, gets the claim
    t.join(60)
    (outcome,) = out
    assert not isinstance(outcome, BaseException), outcome
    assert not outcome.applied_elsewhere and outcome.response.content.startswith("Change executed")
    done = store.load("w")
    assert done.status == "done" and done.context.get("approval.operator") == "alice"


def test_a_same_decision_applied_meanwhile_is_reported_as_applied_by_them(
    make_store: Any,
) -> None:
    store = make_store()
    graph = _paused(store, "m")
    read = threading.Event()
    with store.resume("m") as s:  # alice is resuming when carol decides the same
        t, out = _in_thread(lambda: decide_and_resume(store, "m", _approve("carol", read), graph))
        assert read.wait(30)
        decide_graph(s, "APPROVE", reviewer="alice")
        graph.prompt().session(s).call()
    t.join(60)
    (outcome,) = out
    assert not isinstance(outcome, BaseException), outcome
    assert outcome.applied_elsewhere and outcome.applied_by == "alice"
    assert outcome.verdict == "APPROVE" and outcome.session.status == "done"
    assert "applied by another resume at " in outcome.describe()
    assert [e.kind for e in store.load("m").events].count("approval_decided") == 1


def test_a_different_decision_applied_meanwhile_is_a_conflict_naming_them(
    make_store: Any,
) -> None:
    store = make_store()
    graph = _paused(store, "d")
    read = threading.Event()

    def bob_rejects(s: Any) -> None:
        decide_graph(s, "REJECT", reviewer="bob", reason="no")
        read.set()

    with store.resume("d") as s:
        t, out = _in_thread(lambda: decide_and_resume(store, "d", bob_rejects, graph))
        assert read.wait(30)
        decide_graph(s, "APPROVE", reviewer="alice")
        graph.prompt().session(s).call()
    t.join(60)
    (err,) = out
    assert isinstance(err, DecisionConflictError) and err.applied and err.reviewer == "alice"
    assert "another resume applied it meanwhile" in str(err)
    assert store.load("d").context.get("approval.decision") == "APPROVE"


def test_a_tool_decision_applied_meanwhile_is_reported_too(make_store: Any) -> None:
    store = make_store()
    agent = build_ops_agent()
    s = InMemoryAgentSession.of("t")
    agent.prompt("delete user 1001").session(s).call()
    store.save(s)
    read = threading.Event()

    def carol(s: Any) -> None:
        HITL.approve_all(s, reviewer="carol")
        read.set()

    with store.resume("t") as s:
        t, out = _in_thread(lambda: decide_and_resume(store, "t", carol, agent))
        assert read.wait(30)
        HITL.approve_all(s, reviewer="alice")
        agent.prompt().session(s).call()
    t.join(60)
    (outcome,) = out
    assert not isinstance(outcome, BaseException), outcome
    assert outcome.applied_elsewhere and outcome.applied_by == "alice"
    assert sum(e.kind == "tool_call_end" for e in store.load("t").events) == 1


def test_a_refused_decision_claims_nothing(
    make_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store()
    graph = _paused(store, "r")
    s = store.load("r")
    decide_graph(s, "APPROVE", reviewer="alice")
    store.save(s)  # recorded, not applied
    before = store.load("r").to_json()
    claims: list[str] = []
    original = store.resume
    monkeypatch.setattr(store, "resume", lambda sid: claims.append(sid) or original(sid))
    with pytest.raises(DecisionConflictError, match="APPROVE by alice"):
        decide_and_resume(
            store, "r", lambda s: decide_graph(s, "REJECT", reviewer="bob", reason="no"), graph
        )
    assert claims == [] and store.load("r").to_json() == before
    # the same decision again claims, and applies alice's
    outcome = decide_and_resume(store, "r", _approve("carol"), graph)
    assert claims == ["r"] and outcome.session.context.get("approval.operator") == "alice"


def test_the_wait_for_a_claim_is_bounded(make_store: Any) -> None:
    store = make_store()
    graph = _paused(store, "b")
    before = store.load("b").to_json()
    with pytest.raises(_Held), store.resume("b"):
        with pytest.raises(SessionBusyError):
            decide_and_resume(store, "b", _approve("alice"), graph, wait_s=0.2)
        raise _Held
    assert store.load("b").to_json() == before
