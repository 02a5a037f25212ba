"""R62 agent versions, in one process on a memory store: what a pause records, which
version an AgentTable resumes a session on (pinned; migrated only when its own is not
served or when asked), refusals that change nothing, migrations that rewrite a pending
call (its approval — votes too — starts over) and are audited by whom, and ``.adopt()``
on the audit trail."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.agents import _versioned as V

from intermission import (
    HITL,
    AgentMigrationError,
    AgentTable,
    AgentVersionError,
    GraphSpec,
    HITLDecision,
    InMemoryAgentSession,
    IntermissionError,
    Principal,
    ReActAgent,
    ScriptedModel,
    TeamAgent,
    UnknownTaskError,
    UsageError,
)
from intermission.agents._base import RELEASE
from intermission.audit import noted
from intermission.examples import build_change_graph
from intermission.hitl.deciding import deciding_as
from intermission.stores import MemoryStore, decide_and_resume

ZONED = {"replicas": 3, "zone": "eu-1"}


@pytest.fixture(autouse=True)
def _runs() -> None:
    V.RUNS.clear()


def _paused_on(agent: Any, sid: str = "s") -> InMemoryAgentSession:
    s = InMemoryAgentSession.of(sid)
    agent.prompt("scale the service").session(s).call()
    assert s.is_pending
    return s


def _stored(agent: Any, sid: str = "s") -> MemoryStore:
    store = MemoryStore()
    store.save(_paused_on(agent, sid))
    return store


def _approve(s: Any) -> None:
    HITL.submit_all(s, dict.fromkeys([t.call_uuid for t in HITL.pending_tasks(s)],
                                     HITLDecision.approve()))  # fmt: skip


def _actions(store: MemoryStore, sid: str = "s") -> list[str]:
    return [e.action for e in store.audit(sid)]


# --- what a pause records ---------------------------------------------------------------


def test_a_react_pause_records_name_version_fingerprint_and_release() -> None:
    v1 = V.ops_v1()
    s = _paused_on(v1)
    assert (s.agent, s.agent_version, s.agent_fingerprint) == ("ops", "1", v1.fingerprint)
    assert s.release == RELEASE
    assert v1.version == v1.declared_version == "1"
    snap = s.to_json()
    again = InMemoryAgentSession.restore(json.loads(snap))
    assert (again.agent_version, again.release) == ("1", RELEASE)


def test_an_unlabelled_agent_runs_sessions_on_its_fingerprint() -> None:
    plain = V.ops_v1(label=None)
    assert plain.declared_version is None and plain.version == plain.fingerprint
    s = _paused_on(plain)
    assert s.agent_version == plain.fingerprint == s.agent_fingerprint
    # the table pins it to that version as to any other
    table = AgentTable({"ops": [plain, V.ops_v2()]})
    assert table.versions("ops") == [plain.fingerprint, "2"]
    assert table.for_session(s) is plain


def _team(*, graph_version: str | None = None, own: str | None = None) -> TeamAgent:
    spec: GraphSpec = build_change_graph().spec
    if graph_version is not None:
        spec.version(graph_version)
    builder = TeamAgent.of().name("change").graph(spec)
    if own is not None:
        builder = builder.version(own)
    return builder.build()


def test_a_team_and_its_graph_give_the_version_a_pause_records() -> None:
    for team, expected in (
        (_team(own="7"), "7"),
        (_team(graph_version="3"), "3"),
        (_team(graph_version="3", own="4"), "4"),  # the builder's word wins
    ):
        s = InMemoryAgentSession.of("t")
        team.prompt("upgrade").session(s).call()
        assert s.is_pending
        assert (s.agent, s.agent_version, s.release) == ("change", expected, RELEASE)
        assert s.agent_fingerprint == team.fingerprint
    unlabelled = _team()
    assert unlabelled.version == unlabelled.fingerprint
    with pytest.raises(IntermissionError):
        GraphSpec("g").version("a@b")


# --- which version runs a session -------------------------------------------------------


def test_a_new_session_starts_on_the_newest_version() -> None:
    table = AgentTable({"ops": [V.ops_v1, V.ops_v2]})
    assert table.newest("ops") is table.get("ops") is table("ops")
    s = _paused_on(table.newest("ops"))
    assert s.agent_version == "2"
    assert [t.args for t in s.hitl.tasks] == [{"replicas": 3, "zone": "us-1"}]
    assert table.served() == [("ops", "1"), ("ops", "2")]


def test_a_paused_session_resumes_on_its_own_version_while_both_are_served() -> None:
    store = _stored(V.ops_v1())
    table = AgentTable({"ops": [V.ops_v1(), V.ops_v2()]})
    assert table.for_session(store.load("s")).version == "1"
    out = decide_and_resume(store, "s", _approve, table)
    assert out.session.status == "done"
    assert V.RUNS == [("1", {"replicas": 3})]  # v1's tool, once; v2's never
    assert out.session.agent_version == "1"
    assert "agent.migrated" not in _actions(store)


def test_an_unserved_version_is_refused_before_any_tool_runs_changing_nothing() -> None:
    store = _stored(V.ops_v1())
    before = store.raw_row("s")
    snap = store.load("s").to_json()
    table = AgentTable({"ops": [V.ops_v2(migrate=None)]})
    with pytest.raises(AgentVersionError) as caught:
        table.for_session(store.load("s"))
    err = caught.value
    assert (err.paused, err.served, err.session_id) == ("1", ["2"], "s")
    assert "ops@1" in str(err) and "ops@2" in str(err)
    assert not table.serves(store.load("s"))
    with pytest.raises(AgentVersionError, match=r"ops@1.*ops@2"):
        decide_and_resume(store, "s", _approve, table)
    # a plain resume with that agent is refused the same way
    s = store.load("s")
    with pytest.raises(AgentVersionError):
        table.newest("ops").prompt().session(s).call()
    assert s.to_json() == snap
    assert V.RUNS == []
    assert store.raw_row("s") == before
    assert store.load("s").to_json() == snap and store.load("s").is_pending


def test_a_migration_under_the_claim_is_audited_by_the_decider_and_its_approval_starts_over() -> (
    None
):
    store = _stored(V.ops_v1())
    table = AgentTable({"ops": [V.ops_v2()]})  # v1 gone: v2 migrates its sessions
    carol = Principal("carol", {"sre"})
    out = decide_and_resume(store, "s", _approve, table, principal=carol)
    s = out.session
    assert V.RUNS == []  # carol approved the old arguments: void, nothing ran
    assert s.is_pending and s.agent_version == "2"
    assert s.agent_fingerprint == table("ops").fingerprint
    assert [t.args for t in HITL.pending_tasks(s)] == [ZONED]
    assert s.hitl.decisions == {} and s.context.get("migrated.to") == "2"
    trail = store.audit("s")
    (migrated,) = [e for e in trail if e.action == "agent.migrated"]
    assert migrated.actor == "carol" and migrated.roles == ["sre"]
    assert migrated.reason == "migrated ops 1 → 2"
    assert migrated.detail == {"agent": "ops", "from": "1", "to": "2"}
    assert [e.action for e in trail].count("task.rewritten") == 1
    # the stored session is the migrated one; the next approval runs the new arguments once
    assert store.load("s").agent_version == "2"
    again = decide_and_resume(store, "s", _approve, table, principal=carol)
    assert again.session.status == "done"
    assert V.RUNS == [("2", ZONED)]
    assert _actions(store).count("agent.migrated") == 1


def test_an_approval_addressed_to_the_call_before_its_rewrite_is_refused() -> None:
    # a reviewer who saw the old arguments (a card, `show`, a widget row opened before the
    # migration) approves by call UUID: the rewritten call has another, so nothing is
    # approved that the reviewer never saw, and the same effect keeps its effect id
    store = _stored(V.ops_v1())
    before = store.load("s")
    (old,) = [t.call_uuid for t in before.hitl.tasks]
    effect = before.traces["ops"].effect_ids[old]
    table = AgentTable({"ops": [V.ops_v1(), V.ops_v2()]})
    with store.resume("s") as s:
        table.migrate(s, to="2")
    migrated = store.load("s")
    (task,) = migrated.hitl.tasks
    assert task.call_uuid == f"{old}.r1" and task.args == ZONED
    assert migrated.traces["ops"].effect_ids == {task.call_uuid: effect}

    def stale(s: Any) -> None:
        HITL.submit(s, old, HITLDecision.approve())

    with pytest.raises(UnknownTaskError):
        decide_and_resume(store, "s", stale, table)
    assert V.RUNS == [] and store.load("s").hitl.decisions == {}
    decide_and_resume(store, "s", _approve, table)
    assert V.RUNS == [("2", ZONED)]


def test_rewritten_arguments_void_the_votes_of_a_quorum() -> None:
    store = _stored(V.ops_v1(quorum=True))
    alice, bob, carol, dave = (Principal(n) for n in ("alice", "bob", "carol", "dave"))
    v1_table = AgentTable({"ops": [V.ops_v1(quorum=True)]})
    first = decide_and_resume(store, "s", _approve, v1_table, principal=alice)
    assert first.waiting is not None  # one vote of two
    (task,) = store.load("s").hitl.tasks
    assert [v.actor.name for v in task.votes if v.actor] == ["alice"]
    # bob's vote completes the approval of the old arguments; the migration voids all of it
    v2_table = AgentTable({"ops": [V.ops_v2(quorum=True)]})
    out = decide_and_resume(store, "s", _approve, v2_table, principal=bob)
    s = out.session
    assert V.RUNS == []
    (task,) = s.hitl.tasks
    assert task.args == ZONED and task.votes == [] and s.hitl.decisions == {}
    (rewritten,) = [e for e in store.audit("s") if e.action == "task.rewritten"]
    assert rewritten.detail["voided"] >= 2  # alice's and bob's votes (and their decision)
    # one vote on the new arguments decides nothing; two do, and the tool runs once
    assert decide_and_resume(store, "s", _approve, v2_table, principal=carol).waiting is not None
    done = decide_and_resume(store, "s", _approve, v2_table, principal=dave)
    assert done.session.status == "done" and V.RUNS == [("2", ZONED)]


def test_table_migrate_moves_a_session_when_both_versions_are_served() -> None:
    s = _paused_on(V.ops_v1())
    table = AgentTable({"ops": [V.ops_v1(), V.ops_v2()]})
    assert table.for_session(s).version == "1"  # nothing migrates unless asked
    with deciding_as(Principal("erin")):
        target = table.migrate(s, to="2")
    assert target is table.version("ops", "2") and s.agent_version == "2"
    assert [t.args for t in s.hitl.tasks] == [ZONED]
    (entry,) = [e for e in noted(s) if e.action == "agent.migrated"]
    assert entry.actor == "erin"
    assert table.for_session(s) is target
    assert table.migrate(s, to="2") is target  # on it already: nothing changes
    assert [e.action for e in noted(s)].count("agent.migrated") == 1
    target.prompt().session(s).call()  # pauses again on the new arguments
    _approve(s)
    target.prompt().session(s).call()
    assert s.status == "done" and V.RUNS == [("2", ZONED)]


def test_table_migrate_refuses_what_it_cannot_do_changing_nothing() -> None:
    s = _paused_on(V.ops_v1())
    snap = s.to_json()
    table = AgentTable({"ops": [V.ops_v1(), V.ops_v2(migrate=None)]})
    with pytest.raises(AgentMigrationError, match=r"ops@3.*not served.*ops@1, ops@2"):
        table.migrate(s, to="3")
    with pytest.raises(AgentMigrationError, match="does not migrate from version '1'"):
        table.migrate(s, to="2")
    raising = AgentTable({"ops": [V.ops_v1(), V.v2_raising()]})
    with pytest.raises(AgentMigrationError, match="upcaster exploded") as caught:
        raising.migrate(s, to="2")
    assert (caught.value.from_version, caught.value.to_version) == ("1", "2")
    assert s.to_json() == snap and s.context.get("half") is None
    assert not [e for e in noted(s) if e.action in ("agent.migrated", "task.rewritten")]


def test_a_plain_resume_by_a_migrating_version_migrates_first() -> None:
    s = _paused_on(V.ops_v1())
    v2 = V.ops_v2()
    v2.prompt().session(s).call()
    assert s.is_pending and s.agent_version == "2"
    assert [t.args for t in HITL.pending_tasks(s)] == [ZONED]
    assert [e.action for e in noted(s)].count("agent.migrated") == 1


# --- the table's input ------------------------------------------------------------------


def test_agent_table_input_errors_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="twice"):
        AgentTable({"ops": [V.ops_v1(), V.ops_v1()]}).agents("ops")
    with pytest.raises(UsageError, match="named 'ops'"):
        AgentTable({"deploy": [V.ops_v1()]}).agents("deploy")
    with pytest.raises(UsageError, match="lists no agent"):
        AgentTable({"ops": []})
    with pytest.raises(UsageError):
        AgentTable([V.ops_v1()])  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="not an agent"):
        AgentTable({"ops": [42]}).agents("ops")
    with pytest.raises(UsageError, match="raised RuntimeError"):
        AgentTable({"ops": [lambda: (_ for _ in ()).throw(RuntimeError("no"))]}).agents("ops")


# --- for_session never hands a session to another version unasked ----------------------

LABELS = ["1", "2", "3", "4", "5"]


def _agent(label: str, migrates: list[str]) -> Any:
    builder = ReActAgent.of(ScriptedModel(["ok"])).name("ops").version(label)
    for old in migrates:
        if old != label:
            builder = builder.migrates_from(old, lambda s: None)
    return builder.build()


@st.composite
def _tables(draw: Any) -> tuple[list[tuple[str, list[str]]], str]:
    labels = draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=4, unique=True))
    entries = [(v, draw(st.lists(st.sampled_from([*LABELS, "9"]), max_size=3))) for v in labels]
    paused = draw(st.sampled_from([*LABELS, "9"]))
    return entries, paused


@settings(max_examples=60, deadline=None)
@given(case=_tables())
def test_for_session_returns_the_own_version_or_a_migrating_one_or_refuses(
    case: tuple[list[tuple[str, list[str]]], str],
) -> None:
    entries, paused = case
    table = AgentTable({"ops": [_agent(v, m) for v, m in entries]})
    session = SimpleNamespace(session_id="p", agent="ops", agent_version=paused,
                              agent_fingerprint=None)  # fmt: skip
    labels = [v for v, _ in entries]
    migrating = [v for v, m in entries if paused in m and v != paused]
    try:
        agent = table.for_session(session)
    except AgentVersionError as exc:
        assert paused not in labels and not migrating
        assert exc.paused == paused and exc.served == labels
        return
    if paused in labels:
        assert agent.version == paused  # pinned, even when a newer one migrates from it
    else:
        assert paused in agent.migrations and agent.version == migrating[-1]  # the newest


# --- adopting is on the record ----------------------------------------------------------


def test_adopt_writes_an_agent_adopted_entry_naming_who() -> None:
    store = _stored(V.ops_v1())
    table = AgentTable({"ops": [V.ops_v2(migrate=None)]})
    out = decide_and_resume(store, "s", lambda s: None, table, adopt=True,
                            principal=Principal("frank"))  # fmt: skip
    assert out.session.agent_version == "2"
    (adopted,) = [e for e in store.audit("s") if e.action == "agent.adopted"]
    assert adopted.actor == "frank" and adopted.target == "ops"
    assert adopted.detail["from_version"] == "1" and adopted.detail["version"] == "2"
    assert "ops@1" in (adopted.reason or "") and "ops@2" in (adopted.reason or "")
    # a plain request's adopt() notes it too
    s = _paused_on(V.ops_v1(), "t")
    V.ops_v2(migrate=None).prompt().session(s).adopt().call()
    assert [e.action for e in noted(s)].count("agent.adopted") == 1
