"""R62 migrations through ``decide_and_resume`` on the durable stores (SQLite and
PostgreSQL): a raising upcaster leaves the stored row byte-identical, raises a typed
AgentMigrationError, keeps the approval open and puts no migration on the audit trail; an
unserved version is refused before anything is claimed; a migration that works is saved
with its audit entry in the same save."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.agents import _versioned as V

from intermission import (
    HITL,
    AgentMigrationError,
    AgentTable,
    AgentVersionError,
    HITLDecision,
    InMemoryAgentSession,
    Principal,
)
from intermission.stores import decide_and_resume


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)  # (the durable stores: their rows are what is compared)


@pytest.fixture
def paused(make_store: Any) -> Iterator[Any]:
    """A store holding session ``s`` paused on ops@1 for approval of ``scale``."""
    V.RUNS.clear()
    store = make_store()
    s = InMemoryAgentSession.of("s")
    V.ops_v1().prompt("scale the service").session(s).call()
    store.save(s)
    yield store
    V.RUNS.clear()


def _approve(s: Any) -> None:
    HITL.submit_all(s, {t.call_uuid: HITLDecision.approve() for t in HITL.pending_tasks(s)})


def test_a_raising_upcaster_leaves_the_stored_row_byte_identical(paused: Any) -> None:
    store = paused
    before = store.raw_row("s")
    trail = [r.model_dump() for r in store.audit("s")]
    table = AgentTable({"ops": [V.v2_raising()]})
    with pytest.raises(AgentMigrationError, match="upcaster exploded") as caught:
        decide_and_resume(store, "s", _approve, table, principal=Principal("carol"))
    assert (caught.value.from_version, caught.value.to_version) == ("1", "2")
    assert caught.value.session_id == "s"
    assert store.raw_row("s") == before  # byte for byte: the decision, the half change, none
    assert V.RUNS == []
    s = store.load("s")
    assert s.is_pending and s.agent_version == "1" and s.hitl.decisions == {}
    assert [t.args for t in HITL.pending_tasks(s)] == [{"replicas": 3}]
    assert s.context.get("half") is None
    assert [r.model_dump() for r in store.audit("s")] == trail  # no migration, no rewrite
    # the claim was released: the version that is served again resumes it
    out = decide_and_resume(store, "s", _approve, AgentTable({"ops": [V.ops_v1()]}))
    assert out.session.status == "done" and V.RUNS == [("1", {"replicas": 3})]


def test_an_unserved_version_is_refused_before_anything_is_claimed(paused: Any) -> None:
    store = paused
    before = store.raw_row("s")
    table = AgentTable({"ops": [V.ops_v2(migrate=None)]})
    with pytest.raises(AgentVersionError, match=r"ops@1.*ops@2") as caught:
        decide_and_resume(store, "s", _approve, table)
    assert caught.value.paused == "1" and caught.value.served == ["2"]
    assert store.raw_row("s") == before and V.RUNS == []
    with store.resume("s"):  # nobody holds the claim
        pass


def test_a_migration_is_saved_with_its_audit_entry(paused: Any) -> None:
    store = paused
    table = AgentTable({"ops": [V.ops_v2()]})
    out = decide_and_resume(store, "s", _approve, table, principal=Principal("carol"))
    assert out.session.is_pending and V.RUNS == []
    s = store.load("s")
    assert s.agent_version == "2"
    assert [t.args for t in HITL.pending_tasks(s)] == [{"replicas": 3, "zone": "eu-1"}]
    migrated = [r for r in store.audit("s") if r.action == "agent.migrated"]
    assert [(r.actor, r.reason) for r in migrated] == [("carol", "migrated ops 1 → 2")]
    assert store.verify_audit("s")
    done = decide_and_resume(store, "s", _approve, table, principal=Principal("carol"))
    assert done.session.status == "done"
    assert V.RUNS == [("2", {"replicas": 3, "zone": "eu-1"})]
