"""The store conformance suite (R29–R32): every store must pass these tests.

Use it from a pytest module that defines a ``make_store`` fixture returning a factory of
fresh, empty stores (``make_store(clock=None, lease_ms=...)``)::

    from intermission.testing.conformance import *  # noqa: F403

    @pytest.fixture
    def make_store(tmp_path):
        return lambda **kw: SQLiteStore(tmp_path / "s.db", **kw)
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .._clock import FakeClock
from ..core.session import InMemoryAgentSession
from ..decisions import HITLDecision
from ..errors import (
    ConflictError,
    EffectOutcomeUnknownError,
    LeaseLostError,
    NothingToResumeError,
    SessionBusyError,
    SessionNotFoundError,
    SnapshotSchemaError,
)
from ..examples import build_change_graph, build_ops_agent
from ..hitl import HITL
from .conformance_audit import (
    test_store_append_audit_writes_alone_and_refuses_bad_entries,
    test_store_audit_a_refused_decision_on_a_finished_session_is_on_the_trail,
    test_store_audit_a_refused_or_failed_save_writes_nothing_and_keeps_the_entries,
    test_store_audit_a_rewrite_with_recomputed_hashes_is_caught_only_with_the_key,
    test_store_audit_an_expiry_without_a_policy_is_on_the_trail,
    test_store_audit_deleted_records_are_missing_from_the_head_and_the_session,
    test_store_audit_forks_start_at_the_parent_head_and_deletes_keep_the_trail,
    test_store_audit_records_effects_and_changes_by_hand,
    test_store_audit_the_head_moves_with_each_record,
    test_store_audit_writes_noted_entries_with_the_save,
)

__all__ = [
    "test_store_append_audit_writes_alone_and_refuses_bad_entries",
    "test_store_audit_a_refused_decision_on_a_finished_session_is_on_the_trail",
    "test_store_audit_a_refused_or_failed_save_writes_nothing_and_keeps_the_entries",
    "test_store_audit_a_rewrite_with_recomputed_hashes_is_caught_only_with_the_key",
    "test_store_audit_deleted_records_are_missing_from_the_head_and_the_session",
    "test_store_audit_an_expiry_without_a_policy_is_on_the_trail",
    "test_store_audit_forks_start_at_the_parent_head_and_deletes_keep_the_trail",
    "test_store_audit_records_effects_and_changes_by_hand",
    "test_store_audit_the_head_moves_with_each_record",
    "test_store_audit_writes_noted_entries_with_the_save",
    "test_store_a_copy_of_a_deleted_session_never_replaces_the_new_one",
    "test_store_a_stale_copy_never_rolls_the_ledger_back",
    "test_store_claim_lease_expires",
    "test_store_forget_and_resolve_effect",
    "test_store_generations_keep_old_sessions_and_forks_as_they_were",
    "test_store_resume_refuses_a_session_with_nothing_to_resume",
    "test_store_compare_and_set",
    "test_store_ledger_is_durable_before_the_effect_runs",
    "test_store_load_missing_and_delete",
    "test_store_pending_keeps_its_place_while_a_session_stays_pending",
    "test_store_pending_lists_newest_first_with_reason_tasks_and_paging",
    "test_store_put_snapshot_refuses_bad_data_and_changes_nothing",
    "test_store_resume_claims_saves_and_releases",
    "test_store_round_trip",
    "test_store_sessions_tell_time_by_the_store_clock",
    "test_store_stuck_lists_effects_of_unknown_outcome",
]


def paused_change(session_id: str, effect: Any = None) -> InMemoryAgentSession:
    """A change-approval session paused at its approval node."""
    team = build_change_graph(effect) if effect else build_change_graph()
    session = InMemoryAgentSession.of(session_id)
    team.prompt("Upgrade the order service").session(session).call()
    return session


def paused_ops(session_id: str) -> InMemoryAgentSession:
    """An ops-agent session paused on a ``delete_user`` approval."""
    session = InMemoryAgentSession.of(session_id)
    build_ops_agent().prompt("delete user 1001").session(session).call()
    return session


def test_store_round_trip(make_store: Any) -> None:  # R28, R29
    store = make_store()
    s = paused_change("rt")
    assert store.save(s) == 1 and s.store_version == 1
    loaded = store.load("rt")
    assert loaded.to_json() == s.to_json() and loaded.store_version == 1
    assert loaded.is_pending and loaded.pending_reason == "Change plan awaits human review"


def test_store_compare_and_set(make_store: Any) -> None:  # R29
    store = make_store()
    s = paused_change("cas")
    store.save(s)
    with pytest.raises(ConflictError):
        store.save(paused_change("cas"))  # a second insert of the same id
    a, b = store.load("cas"), store.load("cas")
    a.context.put("note", "a")
    assert store.save(a) == 2
    b.context.put("note", "b")
    with pytest.raises(ConflictError) as info:
        store.save(b)  # stale: never last-write-wins
    assert info.value.expected == 1 and info.value.actual == 2
    assert store.load("cas").context.get("note") == "a"


def test_store_load_missing_and_delete(make_store: Any) -> None:  # R29a
    store = make_store()
    with pytest.raises(SessionNotFoundError):
        store.load("nope")
    store.save(paused_change("gone"))
    store.delete("gone")
    with pytest.raises(SessionNotFoundError):
        store.load("gone")
    with pytest.raises(SessionNotFoundError):
        with store.resume("gone"):
            pass


def test_store_pending_lists_newest_first_with_reason_tasks_and_paging(make_store: Any) -> None:
    clock = FakeClock(start_ms=1000, step_ms=10)
    store = make_store(clock=clock)
    for i in range(3):
        store.save(paused_change(f"c{i}"))
    store.save(paused_ops("ops-1"))
    done = InMemoryAgentSession.of("idle")
    store.save(done)
    page = store.pending(limit=3)
    assert [p.session_id for p in page] == ["ops-1", "c2", "c1"]
    assert page[0].agent == "ops" and page[0].tasks[0].tool_name == "delete_user"
    assert page[1].reason == "Change plan awaits human review"
    assert str(page[1].request).startswith("Upgrade order-service")
    rest = store.pending(limit=3, before=page[-1])
    assert [p.session_id for p in rest] == ["c0"]
    assert [p.session_id for p in store.pending(agent="change")] == ["c2", "c1", "c0"]
    with store.resume("c1") as s:
        s.context.put("approval.decision", "APPROVE")
        build_change_graph().prompt().session(s).call()
    assert "c1" not in [p.session_id for p in store.pending()]


def test_store_resume_claims_saves_and_releases(make_store: Any) -> None:  # R30
    store = make_store()
    store.save(paused_change("r"))
    with store.resume("r") as s:
        with pytest.raises(SessionBusyError):
            with store.resume("r"):
                raise AssertionError("a second resumer must not get in")
        intruder = store.load("r")
        intruder.context.put("x", 1)
        with pytest.raises(SessionBusyError):
            store.save(intruder)  # nobody else writes while a claim is held
        s.context.put("approval.decision", "APPROVE")
        build_change_graph().prompt().session(s).call()
    after = store.load("r")
    assert after.status == "done" and after.store_version == 2
    # done: nothing to resume (refused before claiming); claim() takes it anyway
    with pytest.raises(NothingToResumeError):
        with store.resume("r"):
            raise AssertionError("a done session must not be resumed")
    with pytest.raises(RuntimeError):
        with store.claim("r") as s:
            s.context.put("lost", True)
            raise RuntimeError("crash inside the block")
    assert "lost" not in store.load("r").context  # not saved, and the claim was released
    with store.claim("r"):
        pass


def test_store_claim_lease_expires(make_store: Any) -> None:  # R30 (a dead owner)
    clock = FakeClock(start_ms=0, step_ms=1)
    store = make_store(clock=clock, lease_ms=1000, heartbeat=False)  # a dead owner renews none
    store.save(paused_change("lease"))
    held = store.resume("lease")
    held.__enter__()  # an owner that never comes back
    with pytest.raises(SessionBusyError):
        with store.resume("lease"):
            pass
    clock.advance(5000)
    with store.resume("lease") as s:
        s.context.put("taken_over", True)
    assert store.load("lease").context.get("taken_over") is True


def test_store_ledger_is_durable_before_the_effect_runs(make_store: Any) -> None:  # R32
    store = make_store()
    seen: list[str] = []

    def effect(change_id: str) -> str:
        seen.append(store.load("led").ledger[f"{change_id}/execute"].status)
        return "applied"

    store.save(paused_change("led"))
    with store.resume("led") as s:
        s.context.put("approval.decision", "APPROVE")
        build_change_graph(effect).prompt().session(s).call()
    assert seen == ["started"]
    assert store.load("led").ledger["change-001/execute"].status == "completed"
    # a copy that does not know the effect ran gets the recorded result, never a rerun
    other = store.load("led")
    other.ledger.pop("change-001/execute")
    assert other.once("change-001/execute", lambda: "twice") == "applied"
    # a copy that finds the effect started (by another holder, still running) refuses it
    first, second = store.load("led"), store.load("led")
    refused: list[str] = []

    def twice() -> str:
        refused.append("ran")
        return "twice"

    def slow() -> str:
        with pytest.raises(EffectOutcomeUnknownError):
            second.once("deploy", twice)
        return "once"

    assert first.once("deploy", slow) == "once" and refused == []
    assert store.load("led").ledger["deploy"].status == "completed"


def test_store_put_snapshot_refuses_bad_data_and_changes_nothing(make_store: Any) -> None:
    store = make_store()
    s = paused_ops("snap")
    store.save(s)
    before = store.raw_row("snap")
    text = s.to_json()
    for bad in (text[: len(text) // 2], text.replace('"schema_version":1', '"schema_version":9')):
        with pytest.raises(SnapshotSchemaError):
            store.put_snapshot(bad, version=1)
    assert store.raw_row("snap") == before
    (task,) = HITL.pending_tasks(store.load("snap"))
    loaded = store.load("snap")
    HITL.submit(loaded, task, HITLDecision.approve().reviewer("lead"))
    assert store.save(loaded) == 2


def _crashed_mid_effect(store: Any, session_id: str, key: str) -> None:
    """Leave ``key`` started in the store, as a holder killed inside the effect does."""
    copy = store.load(session_id)
    assert copy._ledger_start(key) is None  # 'started' written; the effect never ends


def test_store_forget_and_resolve_effect(make_store: Any) -> None:  # R32, R39
    store = make_store()
    store.save(paused_change("fx"))
    _crashed_mid_effect(store, "fx", "charge")
    _crashed_mid_effect(store, "fx", "email")
    with pytest.raises(EffectOutcomeUnknownError, match="resolve_effect"):
        store.load("fx").once("charge", lambda: "again")
    stale = store.load("fx").to_json()  # a copy taken while both were 'started'
    # resolve: it did happen (the human checked); recorded at once, no save needed
    store.load("fx").resolve_effect("charge", {"receipt": "r-1"})
    assert store.load("fx").ledger["charge"].status == "completed"
    assert store.load("fx").once("charge", lambda: "again") == {"receipt": "r-1"}
    # forget: it did not happen; the next once runs it
    store.load("fx").forget_effect("email")
    assert store.load("fx").ledger["email"].status == "failed"
    # the stale copy, put back, brings neither 'started' back
    store.put_snapshot(stale, version=store.load("fx").store_version)
    back = store.load("fx")
    assert back.ledger["charge"].status == "completed" and back.ledger["email"].status == "failed"
    assert back.once("email", lambda: "sent") == "sent"
    assert store.load("fx").ledger["email"].status == "completed"


def test_store_a_stale_copy_never_rolls_the_ledger_back(make_store: Any) -> None:  # R39
    store = make_store()
    store.save(paused_change("st"))
    note = store.load("st")  # loaded before the effect
    runner = store.load("st")
    assert runner.once("deploy", lambda: "v2") == "v2"
    note.context.put("note", "looked at it")
    store.save(note)  # compare-and-set passes (the row did not move): its note is kept
    after = store.load("st")
    assert after.context["note"] == "looked at it" and after.ledger["deploy"].status == "completed"
    ran: list[str] = []

    def again() -> str:
        ran.append("again")
        return "v3"

    assert after.once("deploy", again) == "v2" and ran == []


def test_store_resume_refuses_a_session_with_nothing_to_resume(make_store: Any) -> None:  # R40
    store = make_store()
    s = paused_change("fin")
    s.context.put("approval.decision", "APPROVE")
    build_change_graph().prompt().session(s).call()
    assert s.status == "done"
    store.save(s)
    for _ in range(3):  # refused before claiming: no claim is left behind
        with pytest.raises(NothingToResumeError, match="is done"):
            with store.resume("fin"):
                raise AssertionError("must not run")
    with store.claim("fin") as again:  # a new prompt on a finished session
        assert again.status == "done"
    new = InMemoryAgentSession.of("never-ran")
    store.save(new)
    with pytest.raises(NothingToResumeError, match="is new"):
        with store.resume("never-ran"):
            raise AssertionError("must not run")


def test_store_a_copy_of_a_deleted_session_never_replaces_the_new_one(
    make_store: Any,
) -> None:  # R29, R48
    store = make_store()
    runs: list[str] = []

    def effect(change_id: str) -> str:
        runs.append(change_id)
        return "applied"

    store.save(paused_change("gen"))
    stale = store.load("gen")  # version 1: a view still holding the old session
    with store.resume("gen") as s:
        s.context.put("approval.decision", "APPROVE")
        build_change_graph(effect).prompt().session(s).call()
    assert runs == ["change-001"]
    store.delete("gen")  # its ledger goes with it
    new = InMemoryAgentSession.of("gen")
    new.context.put("owner", "bob")
    assert store.save(new) == 1  # version 1 again, another generation
    before = store.raw_row("gen")
    stale.context.put("approval.decision", "APPROVE")
    with pytest.raises(ConflictError) as info:
        store.save(stale)  # same id, same version number: still stale
    assert info.value.replaced and info.value.expected == 1 and info.value.actual == 1
    assert "deleted" in str(info.value) and stale.store_version == 1
    with pytest.raises(ConflictError) as info:  # nor as an explicit restore over it
        store.put_snapshot(stale.to_json(), version=1)
    assert info.value.replaced
    assert store.raw_row("gen") == before
    assert store.load("gen").context.get("owner") == "bob"
    with pytest.raises(NothingToResumeError):  # the new session: nothing approved to run
        with store.resume("gen"):
            raise AssertionError("must not run")
    # a resume of the old generation whose session is replaced meanwhile saves nothing
    store.save(paused_change("gen2"))
    with pytest.raises(LeaseLostError):
        with store.resume("gen2") as s:
            s.context.put("approval.decision", "APPROVE")
            store.delete("gen2")
            store.save(InMemoryAgentSession.of("gen2"))
            build_change_graph(effect).prompt().session(s).call()
    assert store.load("gen2").status == "new" and store.load("gen2").store_version == 1
    # put back deliberately: delete first, then insert (version 0)
    store.delete("gen")
    assert store.put_snapshot(stale.to_json()) == 1
    assert store.load("gen").family == stale.family


def test_store_generations_keep_old_sessions_and_forks_as_they_were(
    make_store: Any,
) -> None:  # R29, R48
    store = make_store()
    data = json.loads(paused_change("old").to_json())
    data.pop("family")  # a snapshot from before families were minted
    store.put_snapshot(data)
    a, b = store.load("old"), store.load("old")
    assert a.family is None and a.ledger_id == "old"
    a.context.put("note", "a")
    assert store.save(a) == 2
    b.context.put("note", "b")
    with pytest.raises(ConflictError) as info:
        store.save(b)  # stale by version, as ever
    assert not info.value.replaced and info.value.actual == 2
    # a shared fork has a row of its own in the family; each saves on its own version
    fork = store.fork("old", "old-fork")
    assert fork.ledger_id == "old"
    fork.context.put("note", "fork")
    assert store.save(fork) == 2
    a.context.put("note", "a2")
    assert store.save(a) == 3
    # the old session deleted and a new one saved under its id: its copy is refused
    store.delete("old")
    new = InMemoryAgentSession.of("old")
    for n in range(3):  # up to version 3, the number the old session's copy holds
        new.context.put("n", n)
        store.save(new)
    assert new.store_version == a.store_version == 3
    a.context.put("note", "a3")
    with pytest.raises(ConflictError) as info:
        store.save(a)
    assert info.value.replaced and store.load("old").context.get("note") is None
    assert store.load("old-fork").context.get("note") == "fork"


def test_store_pending_keeps_its_place_while_a_session_stays_pending(make_store: Any) -> None:
    """Pages are keyed on when a session became pending: a save while it stays pending (a
    decision recorded on one of its calls) does not move it past a reader's cursor."""
    store = make_store(clock=FakeClock(start_ms=1000, step_ms=10))
    for i in range(4):
        store.save(paused_ops(f"p{i}"))
    first = store.pending(limit=2)
    assert [p.session_id for p in first] == ["p3", "p2"]
    moved = store.load("p0")  # saved again, still pending
    (task,) = HITL.pending_tasks(moved)
    HITL.submit(moved, task, HITLDecision.approve().reviewer("ann"))
    store.save(moved)
    assert store.load("p0").is_pending
    rest = store.pending(limit=2, before=first[-1])
    assert [p.session_id for p in rest] == ["p1", "p0"]  # before: p0 had jumped ahead
    again = store.pending()
    assert [p.session_id for p in again] == ["p3", "p2", "p1", "p0"]
    assert again[3].updated_ms > again[0].updated_ms and again[3].pending_since < 1100
    assert again.unreadable == []


def test_store_sessions_tell_time_by_the_store_clock(make_store: Any) -> None:
    """Sessions loaded or claimed from a store carry ``store.clock``: deadlines are judged
    by the store's time in every process."""
    clock = FakeClock(start_ms=5_000, step_ms=0)
    store = make_store(clock=clock)
    store.save(paused_ops("clock"))
    assert store.load("clock").clock is clock
    with store.resume("clock") as s:
        assert s.clock is clock


def test_store_stuck_lists_effects_of_unknown_outcome(make_store: Any) -> None:
    """``store.stuck()``: sessions with an effect started and never ended that nobody holds;
    resolving it under the claim takes the session off the list."""
    from ..stores.effects import resolve_unknown_effect

    store = make_store()
    store.save(paused_change("stuck"))
    assert store.stuck() == []
    _crashed_mid_effect(store, "stuck", "charge")
    (entry,) = store.stuck()
    assert (entry.session_id, entry.agent, entry.status, entry.key) == (
        "stuck", "change", "pending", "charge",
    )  # fmt: skip
    with store.claim("stuck"):  # held: the effect may be running right now
        assert store.stuck() == []
    resolve_unknown_effect(store, "stuck", "charge", result={"ok": True}, reviewer="ann")
    assert store.stuck() == [] and store.load("stuck").ledger["charge"].status == "completed"
