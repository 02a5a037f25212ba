"""History (R43) and forks (R44): checkpoints at request ends and nodes, bounded and
compact, stored; forks from any checkpoint, independent of their parent; effects shared by
a family, previewed by a dry-run fork, separate on request."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import change_graph, fresh_pg, pg_dsn

from intermission import (
    FlowEngine,
    InMemoryAgentSession,
    SessionStateError,
    UsageError,
    decide_graph,
)
from intermission.examples import build_change_graph
from intermission.testing.conformance import paused_change
from intermission.testing.workers import append_effect


def paused() -> InMemoryAgentSession:
    s = InMemoryAgentSession.of("c")
    FlowEngine().eval(change_graph(), s.context)
    return s


def test_every_request_end_is_a_checkpoint_with_where_it_stood() -> None:
    team = build_change_graph(lambda cid: f"applied {cid}")
    s = InMemoryAgentSession.of("change-001")
    team.prompt("Upgrade").session(s).call()
    (pause,) = s.history
    assert (pause.index, pause.status, pause.positions) == (0, "pending", ["approval"])
    assert pause.pending_reason == "Change plan awaits human review"
    assert pause.events == len(s.events)
    decide_graph(s, "APPROVE", reviewer="alice")
    team.prompt().session(s).call()
    done = s.history[-1]
    assert (done.index, done.status, done.positions, done.pending_reason) == (1, "done", [], None)
    # stored with the session, compactly: the newest checkpoint patches nothing
    data = json.loads(s.to_json())["history"]
    assert len(data["marks"]) == 2 and "back" not in data["marks"][-1]
    assert len(json.dumps(data["marks"][-1])) < 80
    assert InMemoryAgentSession.restore(s.to_json()).history == s.history


def test_errors_and_stopped_streams_end_requests_too_and_nodes_on_request() -> None:
    def boom(ctx: Any, node: Any) -> None:
        raise RuntimeError("no")

    from intermission import END, GraphSpec

    spec = GraphSpec("boom")
    spec.add_start().link_add("x")
    spec.add_activity("x").task(boom).link_add(END)
    spec.add_end()
    s = InMemoryAgentSession.of("b")
    with pytest.raises(RuntimeError):
        FlowEngine().eval(spec, s.context)
    assert [c.status for c in s.history] == ["failed"]
    nodes = InMemoryAgentSession.of("n")
    FlowEngine(checkpoints="node").eval(change_graph(), nodes.context)
    assert [c.positions for c in nodes.history] == [
        ["start"], ["proposal"], ["approval"], ["approval"]
    ]  # three node entries, then the request end (pending at the gate)
    assert [c.status for c in nodes.history][-1] == "pending"


def test_history_is_bounded_and_keeps_counting() -> None:
    s = InMemoryAgentSession("b", max_checkpoints=3)
    spec = change_graph()
    for _ in range(5):
        FlowEngine().eval(spec, s.context)  # pends at the gate every time
    assert [c.index for c in s.history] == [2, 3, 4]
    assert InMemoryAgentSession.restore(s.to_json()).history == s.history
    with pytest.raises(UsageError, match=r"keeps 2\.\.4"):
        s.fork("f", at=0)


def test_max_checkpoints_zero_switches_history_off_for_good() -> None:
    s = InMemoryAgentSession("off", max_checkpoints=0)
    FlowEngine().eval(change_graph(), s.context)
    assert s.history == [] and json.loads(s.to_json())["history"] == {"marks": [], "max": 0}
    again = InMemoryAgentSession.restore(s.to_json())  # still off after a reload
    FlowEngine().eval(change_graph(), again.context)
    assert again.history == [] and again.to_json().count('"marks":[]') == 1
    with pytest.raises(SessionStateError, match="max_checkpoints=0"):
        again.fork("f")


def test_a_fork_is_an_independent_session_from_its_checkpoint() -> None:
    s = paused()
    decide_graph(s, "APPROVE", reviewer="alice")
    FlowEngine().eval(change_graph(), s.context)
    before = s.to_json()
    fork = s.fork("what-if", at=0)  # back to the pause, before alice's decision
    assert fork.parent == ("c", 0) and fork.is_pending
    assert fork.context.get("approval.decision") is None
    assert [e.seq for e in fork.events] == [e.seq for e in s.events][: s.history[0].events]
    decide_graph(fork, "REJECT", reviewer="bob", reason="too risky")  # decide differently
    FlowEngine().eval(change_graph(), fork.context)
    assert fork.context["change.result"] == "change rejected: too risky"
    assert s.to_json() == before  # the parent never changes
    again = s.fork("again", at=s.history[0])  # a Checkpoint works as well as its index
    assert again.to_json() != fork.to_json() and again.is_pending
    with pytest.raises(SessionStateError, match="no checkpoint"):
        InMemoryAgentSession.of("new").fork("x")
    with pytest.raises(UsageError):
        s.fork("c")  # (its own id)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    from intermission.stores import MemoryStore, SQLiteStore

    if request.param == "memory":
        made: Any = MemoryStore()
    elif request.param == "sqlite":
        made = SQLiteStore(tmp_path / "f.db")
    else:
        made = fresh_pg()
    yield made
    made.close()


def _approve_and_resume(store: Any, sid: str, effect: Any) -> str:
    s = store.load(sid)
    decide_graph(s, "APPROVE", reviewer="alice")
    store.save(s)
    with store.resume(sid) as s:
        response = build_change_graph(effect).prompt().session(s).call()
    return str(response.content)


def test_a_family_of_forks_that_all_approve_runs_the_effect_once(
    store: Any, tmp_path: Path
) -> None:
    effect = append_effect(str(tmp_path / "effect.log"))
    store.save(paused_change("root"))
    forks = [store.fork("root", f"f{i}") for i in range(3)]
    assert [f.parent for f in forks] == [("root", 0)] * 3
    assert store.history("f1")[-1].index == 0
    answers = {_approve_and_resume(store, sid, effect) for sid in ("f0", "f1", "f2", "root")}
    assert answers == {"Change executed: applied change-001"}  # the recorded result, reused
    assert (tmp_path / "effect.log").read_text().count("change-001") == 1
    entry = store.load("f2").ledger["change-001/execute"]
    assert entry.status == "completed" and entry.by == "f0"  # where it ran
    store.delete("f0")  # the family keeps its ledger while any member is left
    assert store.load("f1").ledger["change-001/execute"].status == "completed"


def test_separate_forks_run_their_own_effects(store: Any, tmp_path: Path) -> None:
    effect = append_effect(str(tmp_path / "effect.log"))
    store.save(paused_change("root"))
    for i in range(3):
        store.fork("root", f"s{i}", effects="separate")
        _approve_and_resume(store, f"s{i}", effect)
    assert (tmp_path / "effect.log").read_text().count("change-001") == 3


def test_a_dry_run_fork_runs_no_tool_and_no_effect_and_says_so(store: Any, tmp_path: Path) -> None:
    log = tmp_path / "effect.log"
    store.save(paused_change("root"))
    preview = store.fork("root", "preview", effects="dry-run")
    answer = _approve_and_resume(store, "preview", append_effect(str(log)))
    assert not log.exists()  # nothing touched the world
    done = store.load("preview")
    (end,) = [e for e in done.events if e.kind == "tool_call_end"]
    assert end.error == "dry_run" and end.observation.startswith("[dry run] not run: apply_change(")
    assert "change_id" in end.observation and answer.startswith("Change executed: [dry run]")
    assert done.effects == "dry-run" and preview.parent == ("root", 0)
    # the real family is untouched: approving the original runs the effect, once
    assert _approve_and_resume(store, "root", append_effect(str(log))).endswith("change-001")
    assert log.read_text().count("change-001") == 1
    # a dry run after the effect ran reports the recorded result, not a skip
    after = store.fork("root", "late-preview", at=0, effects="dry-run")
    assert after.ledger["change-001/execute"].status == "completed"


def _resume_fork(target: str, sid: str, effect_path: str) -> str:
    from intermission.stores import open_store

    store = open_store(target)
    try:
        return _approve_and_resume(store, sid, append_effect(effect_path, pause_s=0.3))
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_forks_resumed_at_once_in_two_processes_run_the_effect_once(
    kind: str, tmp_path: Path
) -> None:
    from intermission.stores import open_store

    target = str(tmp_path / "two.db") if kind == "sqlite" else (fresh_pg().close() or pg_dsn())
    store = open_store(target)
    store.save(paused_change("root"))
    store.fork("root", "a")
    store.fork("root", "b")
    store.close()
    log = tmp_path / "effect.log"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        answers = pool.starmap(_resume_fork, [(target, "a", str(log)), (target, "b", str(log))])
    assert answers == ["Change executed: applied change-001"] * 2  # one ran, one waited
    assert log.read_text().count("change-001") == 1


def test_a_loaded_session_reads_its_checkpoint_base_from_the_stored_text(tmp_path: Path) -> None:
    """The base state of a loaded session's newest checkpoint is parsed from the stored
    text, not dumped from the session again: the two must be the same state, for every
    kind of session (graph, ReAct with tasks and messages, team), on every store."""
    from intermission.core.history import core_text
    from intermission.examples import build_ops_agent
    from intermission.stores import MemoryStore, SQLiteStore

    ops = build_ops_agent()
    made = []
    s1 = InMemoryAgentSession.of("g")
    FlowEngine().eval(change_graph(), s1.context)
    made.append(s1)
    s2 = InMemoryAgentSession.of("ops")
    ops.prompt("delete user 1001").session(s2).call()
    made.append(s2)
    s3 = InMemoryAgentSession.of("team")
    build_change_graph(lambda c: c).prompt("go").session(s3).call()
    made.append(s3)
    for store in (MemoryStore(), SQLiteStore(str(tmp_path / "b.sqlite"))):
        for s in made:
            store.save(InMemoryAgentSession.restore(s.to_json()))
            loaded = store.load(s.session_id)
            base = loaded._history._base_state()
            assert base == json.loads(core_text(loaded)), s.session_id
            assert loaded.history == s.history
        store.close()
    for s in made:  # and from a snapshot's text
        again = InMemoryAgentSession.restore(s.to_json())
        assert again._history._base_state() == json.loads(core_text(again))
