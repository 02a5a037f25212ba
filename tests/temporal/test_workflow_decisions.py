"""Sessions as Temporal workflows against a real dev server (SPEC R66): decisions are
Updates judged by the validator before they enter history; effects are counted in the
file the tool writes, not in what intermission reports."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from intermission import Actor, DecisionRefusedError, InvalidDecisionError, NothingToResumeError

pytestmark = pytest.mark.timeout(300)

CAROL = Actor(name="carol", authenticated=True, via="api")
ALICE = Actor(name="alice", authenticated=True, via="api")
BOB = Actor(name="bob", authenticated=True, via="api")


def started(store: Any, agent: str, sid: str, requester: Actor = CAROL) -> Any:
    """Start ``agent`` on ``sid`` and wait for its pause; the paused session."""
    store.start(agent, "delete user 7", sid, principal=requester)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            s = store.load(sid)
        except Exception:  # (the workflow's first run has not stored it yet)
            s = None
        if s is not None and s.status == "pending":
            return s
        time.sleep(0.1)
    raise AssertionError(f"{sid} never paused")


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def accepted_updates(store: Any, sid: str) -> list[dict[str, Any]]:
    """The Updates the workflow's history holds (accepted ones: a refused one leaves none)."""
    from intermission.temporal import workflow_id

    handle = store.client.get_workflow_handle(workflow_id(sid))
    history = store._loop.run(handle.fetch_history())
    events = json.loads(history.to_json())["events"]
    return [e for e in events if e["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED"]


def actions(store: Any, sid: str) -> list[str]:
    return [r.action for r in store.audit(sid)]


def test_an_approval_runs_the_tool_once_and_the_chain_holds(store: Any, effects: Path) -> None:
    started(store, "ops", "t-approve")
    assert any(p.session_id == "t-approve" for p in store.pending())
    out = store.decide("t-approve", "approve", principal=ALICE)
    assert (out.status, out.answer, out.waiting) == ("done", "Done.", None)
    assert [e.split(":")[:2] for e in lines(effects)] == [["ops", "7"]]
    assert actions(store, "t-approve") == ["task.opened", "decision.recorded", "effect.finished"]
    assert store.audit("t-approve")[1].actor == "alice"
    assert store.verify_audit("t-approve").ok
    assert len(accepted_updates(store, "t-approve")) == 1
    assert store.result("t-approve").status == "done"


def test_a_rejection_never_runs_the_tool(store: Any, effects: Path) -> None:
    started(store, "ops", "t-reject")
    out = store.decide("t-reject", "reject", principal=ALICE, reason="not on a Friday")
    assert out.status == "done"
    assert lines(effects) == []
    s = store.load("t-reject")
    assert "not on a Friday" in json.dumps(s.snapshot().model_dump(mode="json"))
    assert actions(store, "t-reject")[:2] == ["task.opened", "decision.recorded"]
    assert "effect.finished" not in actions(store, "t-reject")


def test_a_quorum_counts_each_person_once_and_never_the_requester(
    store: Any, effects: Path
) -> None:
    started(store, "quorum", "t-quorum", requester=CAROL)
    with pytest.raises(DecisionRefusedError) as refused:
        store.decide("t-quorum", "approve", principal=CAROL)
    assert refused.value.rule == "not_requester"

    first = store.decide("t-quorum", "approve", principal=ALICE)
    assert first.waiting is not None and "1 of 2" in first.waiting
    with pytest.raises(DecisionRefusedError) as twice:
        store.decide("t-quorum", "approve", principal=ALICE)
    assert twice.value.rule == "twice"
    assert lines(effects) == []

    done = store.decide("t-quorum", "approve", principal=BOB)
    assert done.status == "done"
    assert len(lines(effects)) == 1
    # the refused attempts are on the audit trail; the history holds the two that counted
    trail = [(r.action, r.actor) for r in store.audit("t-quorum")]
    assert ("decision.refused", "carol") in trail and trail.count(
        ("decision.refused", "alice")
    ) == 1
    updates = accepted_updates(store, "t-quorum")
    assert len(updates) == 2
    assert "carol" not in json.dumps(updates)
    assert store.verify_audit("t-quorum").ok


def test_a_stale_or_unsigned_decision_is_refused_before_history(
    store: Any, effects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from intermission.temporal import wire, workflow_id

    started(store, "twice", "t-stale")  # it asks twice: two pauses
    seen = store._state("t-stale").pause
    # a decision signed with another key (anyone who can reach the frontend could send it)
    run_id = store._state("t-stale").run_id
    forged = wire.sign(wire.Decision(session_id="t-stale", run_id=run_id, pause=seen,
                                     verdict="approve", actor=ALICE), b"not the key")  # fmt: skip
    handle = store.client.get_workflow_handle(workflow_id("t-stale"))
    from temporalio.client import WorkflowUpdateFailedError

    with pytest.raises(WorkflowUpdateFailedError):
        store._loop.run(handle.execute_update("decide", forged, result_type=wire.Decided))
    assert accepted_updates(store, "t-stale") == []
    assert lines(effects) == []

    again = store.decide("t-stale", "approve", principal=BOB, pause=seen)
    assert again.status == "pending"  # it asks about the second user now
    assert [e.split(":")[:2] for e in lines(effects)] == [["twice", "7"]]
    # alice rejects on the view she saw before bob's approval ended that pause
    with pytest.raises(InvalidDecisionError) as late:
        store.decide("t-stale", "reject", principal=ALICE, reason="no", pause=seen)
    assert "no longer open" in str(late.value)
    assert len(accepted_updates(store, "t-stale")) == 1
    assert len(lines(effects)) == 1
    assert ("decision.refused", "alice") in [(r.action, r.actor) for r in store.audit("t-stale")]


def test_a_deadline_applies_its_default_by_a_durable_timer(store: Any, effects: Path) -> None:
    started(store, "timed", "t-timed")
    t0 = time.monotonic()
    result = store.result("t-timed")  # nobody decides: the timer fires, on_expire rejects
    assert result.status == "done"
    assert time.monotonic() - t0 < 30
    assert lines(effects) == []
    assert actions(store, "t-timed") == ["task.opened", "task.expired"]
    opened, expired = store.audit("t-timed")
    assert expired.at_ms - opened.at_ms >= 1500  # (the policy's expires_after_ms)
    with pytest.raises(NothingToResumeError):  # a late decision: the run has ended
        store.decide("t-timed", "approve", principal=ALICE)


def test_a_signed_decision_decides_only_the_run_and_pause_it_was_made_for(
    store: Any, effects: Path
) -> None:
    """A decision read out of one workflow's history (signed, in plain text there) decides
    nothing elsewhere: not a workflow started under another id for the same session, not a
    later run under the same id; an unsigned start never runs."""
    from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError

    from intermission.temporal import wire, workflow_id

    started(store, "ops", "t-replay")
    store.decide("t-replay", "approve", principal=ALICE)
    (accepted,) = accepted_updates(store, "t-replay")
    payload = accepted["workflowExecutionUpdateAcceptedEventAttributes"]["acceptedRequest"]
    data = payload["input"]["args"]["payloads"][0]["data"]
    import base64

    captured = wire.Decision.model_validate_json(base64.b64decode(data))
    assert captured.actor.name == "alice"

    def start_raw(wid: str, start: Any) -> Any:
        return store._loop.run(store.client.start_workflow(
            "intermission.session", start, id=wid, task_queue=store.task_queue,
        ))  # fmt: skip

    key = store._key
    evil = wire.signed_start(
        wire.Start(session_id="t-replay", agent="ops", prompt="delete EVERY user"), key
    )
    h = start_raw("intermission-evil-t-replay", evil)  # another id for the same session
    with pytest.raises(WorkflowFailureError):
        store._loop.run(h.result())
    unsigned = wire.Start(session_id="t-unsigned", agent="ops", prompt="x", requester=ALICE)
    h = start_raw(workflow_id("t-unsigned"), unsigned)  # who asked cannot be told: refused
    with pytest.raises(WorkflowFailureError):
        store._loop.run(h.result())
    # a signed start read out of an old history and sent again once its minutes are over
    stale = {"session_id": "t-old", "not_after_ms": time.time() * 1000 - 1}
    old = wire.sign(unsigned.model_copy(update=stale), key)
    h = start_raw(workflow_id("t-old"), old)
    with pytest.raises(WorkflowFailureError):
        store._loop.run(h.result())
    for wid in ("intermission-evil-t-replay", workflow_id("t-unsigned"), workflow_id("t-old")):
        events = json.loads(store._loop.run(
            store.client.get_workflow_handle(wid).fetch_history()).to_json())["events"]  # fmt: skip
        assert not any("ACTIVITY" in e["eventType"] for e in events), wid  # nothing ran

    store.start("ops", "delete user 7", "t-replay2")  # a new run; the old decision sent to it
    started_again = time.monotonic()
    while store._state("t-replay2").pause == 0:
        assert time.monotonic() - started_again < 60
        time.sleep(0.1)
    moved = captured.model_copy(update={"session_id": "t-replay2"})  # (breaks its signature)
    for attempt in (captured, moved):
        handle = store.client.get_workflow_handle(workflow_id("t-replay2"))
        with pytest.raises(WorkflowUpdateFailedError):
            store._loop.run(handle.execute_update("decide", attempt, result_type=wire.Decided))
    assert accepted_updates(store, "t-replay2") == []
    assert len(lines(effects)) == 1  # alice's one approval, one effect


def test_a_refusal_signal_sent_again_adds_nothing_and_bad_names_are_refused(
    store: Any, effects: Path
) -> None:
    from intermission import UsageError
    from intermission.temporal import workflow_id

    started(store, "quorum", "t-signal", requester=CAROL)
    with pytest.raises(DecisionRefusedError):
        store.decide("t-signal", "approve", principal=CAROL)
    history = store._loop.run(
        store.client.get_workflow_handle(workflow_id("t-signal")).fetch_history()
    )
    events = json.loads(history.to_json())["events"]
    (sent,) = [e for e in events if e["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED"]
    import base64

    from intermission.temporal import wire

    data = sent["workflowExecutionSignaledEventAttributes"]["input"]["payloads"][0]["data"]
    refusal = wire.Refusal.model_validate_json(base64.b64decode(data))
    before = actions(store, "t-signal")
    handle = store.client.get_workflow_handle(workflow_id("t-signal"))
    for _ in range(3):
        store._loop.run(handle.signal("refused", refusal))
    time.sleep(1.0)
    assert actions(store, "t-signal") == before
    with pytest.raises(UsageError):
        store.pending(agent="quorum' OR IntermissionPending = false OR 'a'='a")
    with pytest.raises(UsageError):  # (the arguments every store checks)
        store.pending(limit=0)


def test_an_unknown_agent_ends_the_run_at_once_instead_of_retrying(store: Any) -> None:
    store.start("no-such-agent", "x", "t-unknown")
    t0 = time.monotonic()
    out = store.result("t-unknown")
    assert out.status == "failed" and "no-such-agent" in (out.answer or "")
    assert time.monotonic() - t0 < 30


def test_a_malformed_signal_is_ignored_and_the_session_still_decides(
    store: Any, effects: Path
) -> None:
    """A signal anyone can send (no argument, a wrong one) neither poisons the workflow nor
    hides it from pending()."""
    from intermission import UsageError
    from intermission.temporal import wire, workflow_id

    started(store, "ops", "t-poison")
    handle = store.client.get_workflow_handle(workflow_id("t-poison"))
    store._loop.run(handle.signal("refused", args=[]))
    store._loop.run(handle.signal("refused", args=["not a refusal", 3]))
    store._loop.run(handle.signal("refused", {"session_id": "t-poison"}))
    time.sleep(1.5)
    assert "t-poison" in [p.session_id for p in store.pending()]
    assert store.decide("t-poison", "approve", principal=ALICE).status == "done"
    assert len(lines(effects)) == 1
    with pytest.raises(UsageError):
        wire.resolve_key("short")
