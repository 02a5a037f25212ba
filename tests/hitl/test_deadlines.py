"""Issue 24.1 / R23b: a decision after its deadline is refused (DeadlinePassedError) and
changes nothing — through the API on every store, the CLI and the widgets; the expired
task stays visible until the resume that rejects it as ``system:deadline``. Before, a late
approval was accepted and the next resume ran the tool.

Time: deadlines are stamped by the session's FakeClock in 2023, so the wall clock (what a
session loaded from a store is judged by) is past them; no test sleeps or times anything."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.faults._helpers import lines
from tests.faults._race_agents import ops_agent

from intermission import (
    HITL,
    DeadlinePassedError,
    FakeClock,
    HITLDecision,
    HITLInterceptor,
    HITLTask,
    InMemoryAgentSession,
    InvalidDecisionError,
    check_deadline,
    decide_graph,
)
from intermission.examples import build_change_graph
from intermission.stores import SQLiteStore
from intermission.testing.workers import append_effect

PAST = 1_700_000_000_000.0  # 2023-11-14: every deadline stamped from here has passed
AGENTS = "tests.faults._race_agents:DEADLINE_AGENTS"


def _late_tool_session(store: Any, sid: str) -> None:
    s = InMemoryAgentSession(sid, clock=FakeClock(start_ms=PAST, step_ms=0))
    ops_agent().prompt("delete 1001").session(s).call()
    assert s.is_pending
    store.save(s)


def _late_graph_session(store: Any, sid: str, effect_file: Path) -> None:
    s = InMemoryAgentSession(sid, clock=FakeClock(start_ms=PAST, step_ms=0))
    graph = build_change_graph(append_effect(str(effect_file)), deadline_ms=200)
    graph.prompt("upgrade").session(s).call()
    assert s.is_pending and s.context.get("approval.deadline") == PAST + 200
    store.save(s)


def test_a_late_tool_approval_is_refused_on_every_store(
    make_store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    effects = tmp_path / "effects"
    monkeypatch.setenv("IM_EFFECT_FILE", str(effects))
    store = make_store()
    _late_tool_session(store, "late")
    s = store.load("late")
    before, row = s.to_json(), store.raw_row("late")
    (task,) = HITL.expired_tasks(s)  # visible as expired before anyone resumes
    assert store.pending()[0].deadline_ms == task.deadline_ms == PAST + 200
    with pytest.raises(DeadlinePassedError) as caught:
        HITL.submit(s, task, HITLDecision.approve().reviewer("alice"))
    err = caught.value
    assert isinstance(err, InvalidDecisionError)  # `except InvalidDecisionError` still works
    assert (err.session_id, err.call_uuid, err.deadline_ms) == ("late", task.call_uuid, PAST + 200)
    assert err.now_ms > err.deadline_ms and err.approval is None
    assert "had to be decided by 2023-11-14 22:13:20.200 UTC" in str(err)
    for late in (
        lambda: HITL.submit_all(s, {task.call_uuid: HITLDecision.reject("no")}),
        lambda: HITL.approve_all(s, reviewer="alice"),
        lambda: HITL.reject_all(s, "too late", reviewer="bob"),
        lambda: check_deadline(s, task.call_uuid),
        lambda: check_deadline(s),
    ):
        with pytest.raises(DeadlinePassedError):
            late()
    assert s.to_json() == before and store.raw_row("late") == row
    assert HITL.expired_tasks(store.load("late")) == [task]
    # the resume rejects it as system:deadline, and the tool never runs
    with store.resume("late") as s:
        response = ops_agent().prompt().session(s).call()
    assert response.content == "Rejected: the approval deadline passed." and response.is_abnormal
    (decided,) = [e for e in store.load("late").events if e.kind == "hitl_decided"]
    assert decided.decision.reviewer == "system:deadline"  # type: ignore[union-attr]
    assert lines(effects) == 0 and store.pending() == []


def test_a_late_graph_approval_is_refused_on_every_store(make_store: Any, tmp_path: Path) -> None:
    effects = tmp_path / "effects"
    store = make_store()
    _late_graph_session(store, "g", effects)
    s = store.load("g")
    before, row = s.to_json(), store.raw_row("g")
    assert store.pending()[0].deadline_ms == PAST + 200
    with pytest.raises(DeadlinePassedError) as caught:
        decide_graph(s, "APPROVE", reviewer="alice")
    assert caught.value.approval == "approval.decision" and caught.value.call_uuid is None
    assert caught.value.deadline_ms == PAST + 200
    with pytest.raises(DeadlinePassedError):
        decide_graph(s, "REJECT", reviewer="bob", reason="no")
    with pytest.raises(DeadlinePassedError):
        check_deadline(s)
    assert s.to_json() == before and store.raw_row("g") == row
    with store.resume("g") as s:
        graph = build_change_graph(append_effect(str(effects)), deadline_ms=200)
        response = graph.prompt().session(s).call()  # (the session's own agent)
    assert response.content == "Change rejected: Rejected: the approval deadline passed."
    assert s.context.get("approval.operator") == "system:deadline"
    assert lines(effects) == 0 and store.load("g").status == "done"


@settings(max_examples=60, deadline=None)
@given(
    offset=st.integers(-5_000, 5_000),
    verdict=st.sampled_from(["approve", "reject", "skip"]),
)
def test_a_decision_is_refused_exactly_from_the_deadline_on(offset: int, verdict: str) -> None:
    """For any decision time: refused (nothing changed) iff it is at or after the deadline."""
    s = InMemoryAgentSession("p", clock=FakeClock(start_ms=PAST, step_ms=0))
    ops_agent().prompt("go").session(s).call()
    (task,) = HITL.pending_tasks(s)
    assert task.deadline_ms is not None
    s.clock = FakeClock(start_ms=task.deadline_ms + offset, step_ms=0)  # the injected clock
    before = s.to_json()
    decision = HITLDecision(verdict, comment="why")  # type: ignore[arg-type]
    if offset >= 0:
        with pytest.raises(DeadlinePassedError):
            HITL.submit(s, task, decision)
        assert s.to_json() == before
    else:
        record = HITL.submit(s, task, decision)
        assert record.verdict == verdict and record.time_ms == task.deadline_ms + offset
        # decided in time: not late any more, and a retry of the same decision is a no-op
        check_deadline(s)
        s.clock = FakeClock(start_ms=task.deadline_ms + 1, step_ms=0)
        assert HITL.submit(s, task, decision) == record


def test_a_graph_decision_in_time_stands_after_the_deadline() -> None:
    clock = FakeClock(start_ms=PAST, step_ms=0)
    s = InMemoryAgentSession("g", clock=clock)
    graph = build_change_graph(lambda change_id: f"applied {change_id}", deadline_ms=200)
    graph.prompt("upgrade").session(s).call()
    clock.advance(199)
    decide_graph(s, "APPROVE", reviewer="alice")
    clock.advance(10)
    check_deadline(s)  # decided in time
    decide_graph(s, "APPROVE", reviewer="alice")  # the same again: a no-op
    assert graph.prompt().session(s).call().content.startswith("Change executed")


def test_on_expire_wait_makes_the_deadline_a_reminder() -> None:
    """``on_expire="wait"``: the task shows as expired and stays decidable."""
    from intermission import ReActAgent, ScriptedModel, ToolCall, tool

    @tool
    def delete_user(user_id: int) -> str:
        """Delete a user."""
        return f"user {user_id} deleted"

    model = ScriptedModel([[ToolCall("delete_user", {"user_id": 1})], "done"])
    hitl = HITLInterceptor(on_expire="wait").on_tool("delete_user", deadline_ms=200)
    clock = FakeClock(start_ms=PAST, step_ms=0)
    agent = ReActAgent.of(model).name("w").tools(delete_user).interceptor(hitl).build()
    s = InMemoryAgentSession("w", clock=clock)
    agent.prompt("go").session(s).call()
    clock.advance(1000)
    (task,) = HITL.expired_tasks(s)
    assert task.on_expire == "wait" and task.decide_by_ms is None
    check_deadline(s)  # nothing binding
    HITL.submit(s, task, HITLDecision.approve())
    assert agent.prompt().session(s).call().content == "done"


def test_a_task_from_an_older_snapshot_counts_its_deadline() -> None:
    old = HITLTask(call_uuid="c", tool_name="t", deadline_ms=5.0)  # no on_expire field
    assert old.on_expire is None and old.decide_by_ms == 5.0
    assert old.model_copy(update={"on_expire": "wait"}).decide_by_ms is None


# -- the CLI -----------------------------------------------------------------------------
def cli(*args: str, cwd: Path, effects: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "IM_EFFECT_FILE": str(effects),
    }  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "intermission", "--agents", AGENTS, *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["tool", "graph"])
def test_a_late_approval_through_the_cli_exits_2_and_changes_nothing(
    kind: str, tmp_path: Path
) -> None:
    path, effects = str(tmp_path / "late.sqlite"), tmp_path / "effects"
    store = SQLiteStore(path)
    sid = f"{kind}-late"
    if kind == "tool":
        _late_tool_session(store, sid)
    else:
        _late_graph_session(store, sid, effects)
    row = store.raw_row(sid)
    approve = cli("approve", sid, "--reviewer", "alice", "--store", path, cwd=tmp_path,
                  effects=effects)  # fmt: skip
    assert approve.returncode == 2, approve.stdout + approve.stderr
    assert approve.stderr.startswith("error: ") and "had to be decided by" in approve.stderr
    assert "nothing was changed" in approve.stderr and "Traceback" not in approve.stderr
    reject = cli("reject", sid, "--reason", "no", "--store", path, cwd=tmp_path,
                 effects=effects)  # fmt: skip
    assert reject.returncode == 2 and "had to be decided by" in reject.stderr
    assert store.raw_row(sid) == row and lines(effects) == 0
    show = cli("show", sid, "--store", path, cwd=tmp_path, effects=effects)
    assert "[expired: the next resume rejects it]" in show.stdout
    pending = cli("pending", "--store", path, cwd=tmp_path, effects=effects)
    assert f"{sid} " in pending.stdout and pending.stdout.rstrip().endswith("[expired]")
    # the resume rejects it as system:deadline; nothing ran
    resumed = cli("resume", sid, "--store", path, cwd=tmp_path, effects=effects)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[0] == f"session {sid} done"
    assert resumed.stdout.splitlines()[-1] == (
        "Rejected: the approval deadline passed."
        if kind == "tool"
        else "Change rejected: Rejected: the approval deadline passed."
    )
    assert lines(effects) == 0 and store.pending() == []
    store.close()


# -- the widgets (code twins and clicks) ------------------------------------------------
@pytest.mark.parametrize("how", ["code", "click"])
@pytest.mark.parametrize("kind", ["tool", "graph"])
def test_every_widget_refuses_a_late_decision_and_shows_it(
    kind: str, how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from intermission.notebook import ApprovalWidget, HITLPanel, Inbox

    effects = tmp_path / "effects"
    monkeypatch.setenv("IM_EFFECT_FILE", str(effects))
    store = SQLiteStore(tmp_path / "w.sqlite")
    sid = f"{kind}-late"
    # (the agent that made the late session: its approval step has the deadline)
    graph = build_change_graph(append_effect(str(effects)), deadline_ms=200)
    inbox = Inbox(store, {"ops": ops_agent, "change": lambda: graph}, poll_s=None)
    if kind == "tool":
        _late_tool_session(store, sid)
        widgets: list[Any] = [
            HITLPanel(ops_agent(), store.load(sid), store=store, reviewer="alice"),
        ]
    else:
        _late_graph_session(store, sid, effects)
        widgets = [ApprovalWidget(graph, store.load(sid), store=store, reviewer="alice")]
    row = store.raw_row(sid)
    inbox.refresh()
    widgets.append(inbox.open_session(sid))
    for widget in widgets:
        if kind == "tool":
            (uuid,) = widget.rows
            assert "expired" in widget.calls[0]["state"]
            approve: Any = partial(widget.approve, uuid)
            click: Any = partial(widget.click, "decide", call_uuid=uuid, verdict="approve")
        else:
            assert "expired" in widget.request
            approve = widget.approve
            click = partial(widget.click, "approve")
        if how == "code":
            with pytest.raises(DeadlinePassedError):
                approve()
        else:
            click()
            widget.wait()
            assert isinstance(widget.runner.error, DeadlinePassedError)
            assert "Not recorded: " in widget.status and "Error" not in widget.status
            assert "had to be decided by" in widget.status
    assert store.raw_row(sid) == row and lines(effects) == 0
    inbox.refresh()
    assert ">expired</span>" in inbox.table  # still listed, as expired
    inbox.close()
    store.close()


# -- one clock (the adversary's repro 01) ------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    agent_start=st.integers(0, 4_000_000_000_000),
    session_start=st.none() | st.integers(0, 4_000_000_000_000),
    offset=st.integers(-5_000, 5_000),
    via_store=st.booleans(),
)
def test_a_task_refused_as_late_is_rejected_by_the_next_resume(
    agent_start: int, session_start: int | None, offset: int, via_store: bool
) -> None:
    """Whatever clocks the agent and the session carry (a notebook's FakeClock on the agent,
    the wall clock of a session loaded from a store), the deadline is stamped, judged and
    expired by one clock: a decision refused as late is never followed by a resume that
    suspends again (before, it was, and the session was stranded)."""
    from intermission.stores import MemoryStore

    agent = ops_agent(clock=FakeClock(start_ms=agent_start, step_ms=1))
    clock = None if session_start is None else FakeClock(start_ms=session_start, step_ms=0)
    s = InMemoryAgentSession("p", clock=clock) if clock else InMemoryAgentSession.of("p")
    agent.prompt("delete 1001").session(s).call()
    (task,) = HITL.pending_tasks(s)
    assert task.deadline_ms is not None
    store = MemoryStore()
    if via_store:
        store.save(s)
        s = store.load("p")  # the wall clock from here on
    elif clock is not None:
        s.clock = FakeClock(start_ms=max(0, task.deadline_ms + offset), step_ms=0)
    try:
        HITL.submit(s, task, HITLDecision.approve().reviewer("alice"))
        refused = False
    except DeadlinePassedError:
        refused = True
    if via_store:
        store.save(s)
        with store.resume("p") as s:
            response = agent.prompt().session(s).call()
    else:
        response = agent.prompt().session(s).call()
    assert not s.is_pending  # never stranded: applied or rejected, one or the other
    if refused:
        assert response.content == "Rejected: the approval deadline passed."
    else:
        assert response.content == "Done: user 1001 deleted."


# -- a graph decision counts only if recorded before the deadline (repro 04) -------------
def test_a_late_decision_written_into_the_context_is_rejected_at_resume(
    make_store: Any, tmp_path: Path
) -> None:
    """``approval.decision`` is the documented key; written by hand years after the
    deadline (no ``approval.time``, or a forged late one) it is not a decision in time:
    decide_graph and check_deadline still refuse, and the resume rejects as
    system:deadline. Before, the resume ran the change."""
    effects = tmp_path / "effects"
    store = make_store()
    for sid, time in (("untimed", None), ("forged", PAST + 200)):
        _late_graph_session(store, sid, effects)
        s = store.load(sid)
        s.context.put("approval.decision", "APPROVE")
        s.context.put("approval.operator", "mallory")
        s.context.put("approval.comment", "late but keen")
        if time is not None:
            s.context.put("approval.time", time)
        before = s.to_json()
        for late in (lambda: decide_graph(s, "APPROVE", reviewer="alice"),  # noqa: B023
                     lambda: check_deadline(s)):  # noqa: B023  # fmt: skip
            with pytest.raises(DeadlinePassedError):
                late()
        assert s.to_json() == before
        store.save(s)
        with store.resume(sid) as s:
            graph = build_change_graph(append_effect(str(effects)), deadline_ms=200)
            response = graph.prompt().session(s).call()
        assert response.content == "Change rejected: Rejected: the approval deadline passed."
        after = store.load(sid)
        assert after.context.get("approval.decision") == "REJECT"
        assert after.context.get("approval.operator") == "system:deadline"
        assert after.context.get("approval.comment") is None and after.status == "done"
    assert lines(effects) == 0


@settings(max_examples=60, deadline=None)
@given(
    how=st.sampled_from(["decide_graph", "put", "put-timed"]),
    written=st.integers(0, 400),
    resumed=st.integers(0, 400),
)
def test_a_graph_decision_applies_iff_recorded_before_the_deadline_or_resumed_in_time(
    how: str, written: int, resumed: int
) -> None:
    """For any time of writing and of resuming (200 ms deadline): the decision is applied
    when it was recorded (``approval.time``) before the deadline, or the resume itself
    comes before it; otherwise the resume rejects it as system:deadline."""
    clock = FakeClock(start_ms=PAST, step_ms=0)
    s = InMemoryAgentSession("g", clock=clock)
    ran: list[str] = []
    graph = build_change_graph(lambda change_id: ran.append(change_id) or "ok", deadline_ms=200)
    graph.prompt("upgrade").session(s).call()
    deadline = PAST + 200
    clock.advance(written)
    now = clock.now_ms()
    recorded: float | None = None
    if how == "decide_graph":
        if now >= deadline:
            with pytest.raises(DeadlinePassedError):
                decide_graph(s, "APPROVE", reviewer="alice")
        else:
            decide_graph(s, "APPROVE", reviewer="alice")
            recorded = now
    else:
        s.context.put("approval.decision", "APPROVE")
        if how == "put-timed":
            s.context.put("approval.time", now)
            recorded = now
    clock.advance(max(0, resumed - written))
    in_time = (recorded is not None and recorded < deadline) or clock.now_ms() < deadline
    response = graph.prompt().session(s).call()
    decided = how != "decide_graph" or recorded is not None
    if decided and in_time:
        assert ran == ["change-001"] and response.content.startswith("Change executed")
    else:
        assert ran == [] and s.context.get("approval.operator") == "system:deadline"
