"""The outbox in the store (memory, SQLite, PostgreSQL): the save that causes a notification
writes it in its own transaction; a save that fails or is refused writes none; the rules
that derive notifications from events and audit notes; the switch and what it costs off."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.faults._race_agents import ops_agent

from intermission import (
    HITL,
    ApprovalPolicy,
    ConflictError,
    Escalate,
    FakeClock,
    HITLDecision,
    InMemoryAgentSession,
    LeaseLostError,
    NotificationNotFoundError,
    NotifyError,
    Principal,
    ToolUnavailableError,
    Vote,
    decide_graph,
)
from intermission._json import canonical_dumps
from intermission.audit import AuditEntry, note
from intermission.examples import build_ops_agent
from intermission.notify.interrupts import interrupts_of, summarize
from intermission.stores import SQLiteStore
from intermission.stores.outbox_rules import AUDIT_RULES, EVENT_RULES, derive
from intermission.testing.conformance import paused_change, paused_ops

PAST = 1_700_000_000_000.0


def with_policy(
    s: InMemoryAgentSession, roles: list[str], approvals: int = 1, approvers: Any = None
) -> InMemoryAgentSession:
    """The session with its tasks carrying an approval policy, as ``on_tool(policy=)``
    gives them (a field of the task)."""
    policy = ApprovalPolicy(roles=frozenset(roles), approvals=approvals, not_requester=True)
    s.hitl.tasks[:] = [
        t.model_copy(update={"policy": policy, "approvers": approvers}) for t in s.hitl.tasks
    ]
    return s


def shown(row: Any) -> list[dict[str, Any]]:
    """The interrupts of a stored notification, as a person is shown them."""
    return interrupts_of(row.payload)[0]


def kinds(store: Any) -> list[tuple[str, str]]:
    return sorted((r.session_id, r.kind) for r in store.outbox.rows())


def test_a_pause_is_written_with_its_save_and_says_what_waits(make_store: Any) -> None:
    store = make_store(outbox=True)
    s = paused_ops("t1")
    assert store.outbox.rows() == []  # nothing before the save
    store.save(s)
    (row,) = store.outbox.rows()
    (task,) = s.hitl.tasks
    assert row.kind == "pending" and row.status == "pending" and row.attempts == 0
    assert row.key.startswith("ntf_") and len(row.key) == 36
    p = row.payload
    assert p["session_id"] == "t1" and p["agent"] == "ops"
    assert p["reason"] == "Sensitive operation: human confirmation required"
    (interrupt,) = shown(row)
    assert interrupt["id"] == task.call_uuid and interrupt["type"] == "tool_call"
    assert interrupt["tool"] == "delete_user" and interrupt["arguments"] == {"user_id": 1001}
    # saving again without running anything adds nothing; the key is the row's for good
    store.save(s)
    assert [r.key for r in store.outbox.rows()] == [row.key]


def test_a_graph_approval_is_one_confirmation_named_as_the_console_names_it(
    make_store: Any,
) -> None:
    store = make_store(outbox=True)
    s = paused_change("c1")
    store.save(s)
    (row,) = store.outbox.rows()
    (interrupt,) = shown(row)
    pause = [e for e in s.events if e.kind == "team_end" and e.pending][-1]
    assert interrupt["id"] == f"approval-{pause.seq}" and interrupt["type"] == "confirmation"
    assert "order-service" in interrupt["arguments"]["request"]
    s = store.load("c1")
    decide_graph(s, "APPROVE", reviewer="bob")
    store.save(s)
    decided = [r for r in store.outbox.rows() if r.kind == "decided"]
    assert [r.payload["detail"]["reviewer"] for r in decided] == ["bob"]
    assert shown(decided[0])[0]["id"] == interrupt["id"]


def test_a_stale_copy_or_a_lost_claim_writes_nothing(make_store: Any) -> None:
    store = make_store(outbox=True, lease_ms=150, heartbeat=False)
    agent = build_ops_agent()
    s = InMemoryAgentSession.of("cas")
    store.save(s)  # saved before anything ran: no notification
    a, b = store.load("cas"), store.load("cas")
    agent.prompt("delete user 1001").session(a).call()
    agent.prompt("delete user 1002").session(b).call()
    store.save(a)
    with pytest.raises(ConflictError):
        store.save(b)  # refused by compare-and-set: its pause did not happen
    assert kinds(store) == [("cas", "pending")]
    # a resume whose claim lapsed and was taken over cannot save, nor notify
    (task,) = store.load("cas").hitl.tasks
    s = store.load("cas")
    HITL.submit(s, task.call_uuid, HITLDecision.approve().reviewer("ann"))
    store.save(s)
    with pytest.raises(LeaseLostError), store.resume("cas") as mine:
        time.sleep(0.3)  # the lease (150 ms) lapses
        with store.resume("cas") as theirs:  # another resumer takes the session over
            theirs.context.put("note", "taken over")
        agent.prompt().session(mine).call()  # decided and applied: would notify
    assert kinds(store) == [("cas", "pending")]
    assert store.load("cas").context.get("note") == "taken over"


def test_decisions_expiries_and_unknown_outcomes_are_told(make_store: Any) -> None:
    store = make_store(outbox=True)
    # an expired task: the resume rejects it as system:deadline (told as expired, once)
    s = InMemoryAgentSession("late", clock=FakeClock(start_ms=PAST, step_ms=0))
    ops_agent().prompt("delete 1001").session(s).call()
    store.save(s)
    with store.resume("late") as s:
        ops_agent().prompt().session(s).call()
    assert kinds(store) == [("late", "expired"), ("late", "pending")]
    (expired,) = [r for r in store.outbox.rows() if r.kind == "expired"]
    assert expired.payload["detail"] == {"resolution": "reject"}
    # an effect that started and whose end nobody saw: a person must check
    s = InMemoryAgentSession.of("fx")

    def dropped() -> None:
        raise ToolUnavailableError("the server went away mid-call", tool="t", sent=True)

    with pytest.raises(ToolUnavailableError):
        s.once("charge/42", dropped)
    s.status = "failed"
    store.save(s)
    (unknown,) = [r for r in store.outbox.rows() if r.session_id == "fx"]
    assert unknown.kind == "unknown_outcome" and unknown.payload["detail"]["effect"] == "charge/42"
    store.save(store.load("fx"))  # the same unknown effect is told once
    assert len([r for r in store.outbox.rows() if r.session_id == "fx"]) == 1


def test_audit_notes_are_told_by_their_action(make_store: Any) -> None:
    """Warnings, escalations and expiries noted on a session (by whoever watches deadlines)
    are told by the save that writes them; a new action is one line in AUDIT_RULES."""
    store = make_store(outbox=True)
    s = paused_ops("w")
    store.save(s)
    (task,) = s.hitl.tasks
    s = store.load("w")
    note(s, AuditEntry(action="task.warned", via="system", target=task.call_uuid,
                       reason="the deadline is in 10 minutes"))  # fmt: skip
    note(s, AuditEntry(action="task.escalated", via="system", target=task.call_uuid,
                       detail={"roles": ["oncall-lead"]}))  # fmt: skip
    note(s, AuditEntry(action="decision.recorded", actor="ann"))  # (not a notification)
    store.save(s)
    told = {r.kind: r for r in store.outbox.rows()}
    assert set(told) == {"pending", "warning", "escalated"}
    assert shown(told["warning"])[0]["tool"] == "delete_user"
    assert told["warning"].payload["detail"]["reason"] == "the deadline is in 10 minutes"
    assert interrupts_of(told["escalated"].payload)[1] == ["oncall-lead"]
    assert set(AUDIT_RULES) >= {"task.warned", "task.escalated", "task.expired"}
    assert set(EVENT_RULES) >= {"hitl_pending", "hitl_decided", "approval_decided"}


def test_the_policy_still_needed_and_its_roles_travel_with_the_notification() -> None:
    """A task's approval policy (roles, approvals) is read where it is kept, defensively:
    the roles route the notification, the approvals say how many are still needed."""
    s = with_policy(paused_ops("p"), ["finance"], approvals=2, approvers=["cfo"])
    (task,) = s.hitl.tasks
    vote = Vote(verdict="approve", name="ann", roles=["finance"], time_ms=1.0)
    s.hitl.tasks[0] = task.model_copy(update={"votes": [vote]})  # one approval so far
    (written,) = derive(s, 0.0)
    (interrupt,), roles = interrupts_of(json.loads(written.payload))
    assert roles == ["finance"]
    got = interrupt["policy"]
    assert got["approvals_needed"] == 1 and got["reviewers"] == ["cfo"]
    assert got["roles"] == ["finance"] and got["not_requester"] is True


def test_a_policy_s_vote_deadlines_and_escalation_are_told_as_recorded(make_store: Any) -> None:
    """Driven by the real policy machinery: a vote tells nobody (the approval still waits,
    already told); the sweeper's warning, escalation and expiry are each told once, with
    the roles that may decide then; the timed-out decision is told as the expiry only."""
    from tests.hitl.test_policy_deadlines import T0, Clock, loaded, paused

    from intermission.stores import sweep_deadlines

    clock = Clock()
    store = make_store(outbox=True, clock=clock)
    policy = ApprovalPolicy(
        roles={"sre"}, approvals=2, expires_after_ms=1000, warn_before_ms=300,
        on_expire=Escalate(roles={"lead"}, after_ms=1000),
    )  # fmt: skip
    paused(store, clock, policy)
    s = loaded(store, "s", clock)
    (task,) = s.hitl.tasks
    HITL.submit(s, task.call_uuid, HITLDecision.approve(), principal=Principal("ann", {"sre"}))
    store.save(s)  # a vote: kept, the approval still open
    (pause,) = store.outbox.rows()
    assert pause.kind == "pending" and interrupts_of(pause.payload)[1] == ["sre"]
    for t in (T0 + 750, T0 + 1000, T0 + 1750, T0 + 2000):
        clock.t = t
        assert sweep_deadlines(store) == ["s"]
    told = sorted((r.payload["created_ms"], r.kind) for r in store.outbox.rows())
    assert [k for _, k in told] == ["pending", "warning", "escalated", "warning", "expired"]
    by_kind = {r.kind: r for r in store.outbox.rows()}
    assert interrupts_of(by_kind["escalated"].payload)[1] == ["lead", "sre"]
    (shown_task,) = shown(by_kind["expired"])
    assert shown_task["id"] == task.call_uuid and shown_task["policy"]["approvals_needed"] == 1
    assert by_kind["expired"].payload["given"] == {task.call_uuid: ["ann"]}


def test_the_switch_is_the_database_s_and_off_costs_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    off = SQLiteStore(path)
    assert off.outbox.enabled is False
    off.save(paused_ops("a"))
    assert off.outbox.rows() == []  # off: no row, not even an empty derivation
    on = SQLiteStore(path, outbox=True)  # recorded in the database…
    later = SQLiteStore(path)  # …so a store opened after it follows
    opted_out = SQLiteStore(path, outbox=False)
    assert later.outbox.enabled and not opted_out.outbox.enabled
    later.save(paused_ops("b"))
    opted_out.save(paused_ops("c"))
    assert kinds(on) == [("b", "pending")]
    on.outbox.enable(False)
    assert SQLiteStore(path).outbox.enabled is False
    for store in (off, on, later, opted_out):
        store.close()


def test_a_fork_or_a_restored_snapshot_does_not_tell_an_old_pause_again(make_store: Any) -> None:
    store = make_store(outbox=True)
    s = paused_ops("orig")
    store.save(s)
    store.fork("orig", "fork")
    store.put_snapshot(s.to_json().replace('"orig"', '"copy"'))
    assert kinds(store) == [("orig", "pending")]


def test_an_unknown_outcome_is_told_once_whatever_saves_see_it(make_store: Any) -> None:
    store = make_store(outbox=True)
    s = InMemoryAgentSession.of("u")

    def dropped() -> None:
        raise ToolUnavailableError("the server went away mid-call", tool="t", sent=True)

    with pytest.raises(ToolUnavailableError):
        s.once("refund/7", dropped)
    s.status = "paused"
    store.save(s)
    for _ in range(3):  # later saves (a person looking, notes) see the same started effect
        again = store.load("u")
        again.context.put("looked", True)
        store.save(again)
    assert kinds(store) == [("u", "unknown_outcome")]


def test_retry_and_its_typed_errors(make_store: Any) -> None:
    store = make_store(outbox=True)
    store.save(paused_ops("x"))
    (row,) = store.outbox.rows()
    with pytest.raises(NotificationNotFoundError, match="no notification 'ntf_nope'"):
        store.outbox.retry("ntf_nope")
    assert [r.key for r in store.outbox.take("me", 10, 60_000)] == [row.key]
    assert store.outbox.take("other", 10, 60_000) == []  # leased: nobody else takes it
    store.outbox.failed(row.key, "me", "x: HTTP 500", ["slack"], 0.0, True)
    (dead,) = store.outbox.rows("dead")
    assert dead.attempts == 1 and dead.last_error == "x: HTTP 500" and dead.done == ("slack",)
    assert store.outbox.take("me", 10, 60_000) == []  # dead: nobody takes it
    assert store.outbox.retry(row.key).status == "pending"
    (again,) = store.outbox.take("me", 10, 60_000)
    assert again.key == row.key and again.attempts == 0 and again.done == ("slack",)
    store.outbox.delivered(row.key)
    assert store.outbox.rows() == []
    with pytest.raises(NotifyError, match="a delivered one leaves it"):
        store.outbox.retry(row.key)


def test_a_lease_that_ends_gives_the_row_back(make_store: Any) -> None:
    store = make_store(outbox=True)
    store.save(paused_ops("l"))
    (row,) = store.outbox.take("dead-dispatcher", 10, 100)
    deadline = time.monotonic() + 30
    while not (again := store.outbox.take("next", 10, 60_000)):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert [r.key for r in again] == [row.key]
    # the first one's late failure does not touch a row another holds
    store.outbox.failed(row.key, "dead-dispatcher", "late", [], 0.0, True)
    assert store.outbox.rows()[0].status == "pending" and store.outbox.rows()[0].attempts == 0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "stale"]), min_size=1, max_size=6))
def test_exactly_the_committed_pauses_are_told(steps: list[str]) -> None:
    """Whatever order two copies and a stale one save their pauses in, the outbox holds one
    notification per pause that was saved, none for one that was refused."""
    from intermission.stores import MemoryStore

    store = MemoryStore(outbox=True)
    store.save(InMemoryAgentSession.of("h"))
    agent = build_ops_agent()
    stale = store.load("h")
    committed = 0
    for step in steps:
        s = stale if step == "stale" else store.load("h")
        if s.is_pending:  # decide it first, so this run pauses anew
            for t in s.hitl.tasks:
                if t.call_uuid not in s.hitl.decisions:
                    HITL.submit(s, t.call_uuid, HITLDecision.reject("no"))
            agent.prompt().session(s).call()
        agent.prompt(f"delete {step}").session(s).call()
        try:
            store.save(s)
            committed += 1
        except ConflictError:
            pass
    pauses = [r for r in store.outbox.rows() if r.kind == "pending"]
    assert len(pauses) == committed
    # and each names the task that the saved pause waits on
    tasks = {e.tasks[0].call_uuid for e in store.load("h").events if e.kind == "hitl_pending"}
    assert {shown(r)[0]["id"] for r in pauses} <= tasks


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=30), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=400),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=20), inner,
                                                                 max_size=12),
    max_leaves=40,
), max_size=20))  # fmt: skip
def test_an_argument_summary_is_bounded_and_hides_secrets(args: dict[str, Any]) -> None:
    args = {**args, "api_key": "sk-live-123", "Password": "hunter2"}
    out = summarize(args)
    text = canonical_dumps(out)
    assert len(text) <= 2100
    assert "sk-live-123" not in text and "hunter2" not in text


def test_a_save_and_a_dispatcher_in_threads_never_see_half_a_save(make_store: Any) -> None:
    """Rows appear only with their session's committed row: a dispatcher taking rows while
    saves commit never takes one whose session is not stored."""
    store = make_store(outbox=True)
    stop = threading.Event()
    seen: list[str] = []

    def take() -> None:
        while not stop.is_set():
            for row in store.outbox.take("t", 50, 60_000):
                assert store.load(row.session_id).is_pending
                seen.append(row.key)

    thread = threading.Thread(target=take)
    thread.start()
    for i in range(20):
        store.save(paused_ops(f"s{i}"))
    deadline = time.monotonic() + 30
    while len(seen) < 20 and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join()
    assert len(seen) == len(set(seen)) == 20


def test_a_graph_run_by_the_engine_alone_or_with_its_log_off_is_told_too(make_store: Any) -> None:
    """No event says "paused" when a graph runs on the engine alone, or when the session
    keeps no log: a run that left the session pending is the pause. A decision recorded
    on it (nothing ran) is no new pause."""
    from intermission import END, FlowEngine, GraphSpec

    def gate(ctx: Any, node: Any) -> None:
        if ctx.get("ok") is None:
            ctx.session.pending(True, "gate")

    spec = GraphSpec("bare")
    spec.add_start().link_add("gate")
    spec.add_activity("gate").task(gate).link_add(END)
    spec.add_end()
    graph = spec.build()
    store = make_store(outbox=True)
    for sid, max_events in (("bare", 1000), ("quiet", 0)):
        s = InMemoryAgentSession(sid, max_events=max_events)
        FlowEngine().eval(graph, s.context)
        store.save(s)
    assert kinds(store) == [("bare", "pending"), ("quiet", "pending")]
    s = store.load("bare")
    decide_graph(s, "APPROVE", reviewer="ann")  # recorded, not yet applied: still pending
    store.save(s)
    assert kinds(store) == [("bare", "decided"), ("bare", "pending"), ("quiet", "pending")]
    s = store.load("quiet")
    store.save(s)  # nothing ran
    assert len(kinds(store)) == 3


def test_a_damaged_row_is_listed_and_goes_dead_without_stopping_the_others(
    tmp_path: Path,
) -> None:
    from intermission.notify import Notifier, Webhook

    store = SQLiteStore(tmp_path / "d.db", outbox=True)
    store.save(paused_ops("bad"))
    store.save(paused_ops("good"))
    with store._tx() as run:  # damaged outside intermission
        run("UPDATE im_outbox SET payload = '{not json', done = 'x' WHERE session_id = 'bad'")
    sent: list[str] = []

    class Catch(Webhook):
        def send(self, n: Any) -> None:
            sent.append(n.session_id)

    notifier = Notifier(store, [Catch("https://h.example/x", secret="0123456789abcdef0")])
    assert notifier.deliver_pending() == 1 and sent == ["good"]
    (dead,) = store.outbox.rows("dead")
    assert dead.session_id == "bad" and "unreadable notification" in (dead.last_error or "")
    store.close()


def test_a_slow_receiver_never_outlasts_the_lease_on_rows_not_tried_yet() -> None:
    """Past half of its lease, a dispatcher hands back the rows of its batch it has not
    tried: another one takes them at once instead of sending them a second time later."""
    from intermission.notify import Notifier, Webhook
    from intermission.stores import MemoryStore

    store = MemoryStore(outbox=True)
    for i in range(3):
        store.save(paused_ops(f"slow-{i}"))
    sent: list[str] = []

    class Slow(Webhook):
        def send(self, n: Any) -> None:
            time.sleep(0.6)  # longer than half the lease
            sent.append(n.session_id)

    notifier = Notifier(store, [Slow("https://h.example/x", secret="0123456789abcdef0")],
                        lease_s=1.0)  # fmt: skip
    assert notifier.deliver_pending() == 1 and len(sent) == 1
    rest = store.outbox.take("another", 10, 60_000)  # handed back: free now, not leased
    assert sorted(r.session_id for r in rest) == sorted({"slow-0", "slow-1", "slow-2"} - set(sent))
