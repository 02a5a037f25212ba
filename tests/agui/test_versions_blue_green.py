"""Blue-green on one store (R62): two real ``serve`` processes on one PostgreSQL store, the
old serving ``ops@1``, the new ``ops@2``. A paused ``ops@1`` session is resumed only by the
server that serves its version: the new one refuses it (``RUN_ERROR`` ``AGENT_VERSION``,
naming both) before any of its code runs — the tool does not run, the approval stays open —
and its listing marks it "waiting for ops@1, not served here"; the old server then completes
it, the tool running once. New sessions on the new server are ``ops@2``. A new server whose
``ops@2`` migrates from ``1`` takes the old session over: migrated under the claim, on the
audit trail, then resumed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module, pg_dsn

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")
need_module("psycopg", "the postgres extra (pip install 'intermission[postgres]')")

from intermission.agui.interrupts import open_interrupts  # noqa: E402
from intermission.stores.open import open_store  # noqa: E402

from ._server import Server, effects, types  # noqa: E402

AGENTS = "tests.agui.versions_agents"
TOKEN = "blue-green-token"


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[tuple[str, Path, list[Server]]]:
    from tests._helpers import fresh_pg

    dsn = pg_dsn()
    fresh_pg().close()
    started: list[Server] = []
    try:
        yield dsn, tmp_path / "effects.log", started
    finally:
        for s in started:
            s.stop()


def _serve(world: tuple[str, Path, list[Server]], table: str) -> Server:
    dsn, log, started = world
    server = Server(dsn, log, TOKEN, agents=f"{AGENTS}:{table}")
    started.append(server)
    return server


def _start(server: Server, thread: str) -> str:
    """A new thread on ``server`` that pauses on its one approval; the interrupt's id."""
    events = server.run("ops", {"threadId": thread, "runId": f"{thread}-r1",
                                "messages": [{"id": f"{thread}-u1", "role": "user",
                                              "content": "delete user 1001"}]})  # fmt: skip
    assert types(events)[-1] == "RUN_FINISHED", types(events)
    (interrupt,) = events[-1][1]["outcome"]["interrupts"]
    return str(interrupt["id"])


def _approve(server: Server, thread: str, iid: str, run: str) -> list[tuple[str, Any]]:
    resume = [{"interruptId": iid, "status": "resolved", "payload": {"approved": True},
               "metadata": {"via": "console"}}]  # fmt: skip
    return server.run("ops", {"threadId": thread, "runId": run, "resume": resume})


def _listed(server: Server, thread: str) -> dict[str, Any]:
    (item,) = [i for i in server.get("/interrupts")["interrupts"] if i["threadId"] == thread]
    return item


def test_a_v1_session_is_resumed_only_by_the_server_serving_v1(
    pg: tuple[str, Path, list[Server]],
) -> None:
    dsn, log, _ = pg
    old, new = _serve(pg, "V1"), _serve(pg, "V2")
    iid = _start(old, "bg-1")
    store = open_store(dsn)
    try:
        paused = store.load("bg-1")
        assert (paused.agent, paused.agent_version) == ("ops", "1")

        # the new server lists it as another version's, not decidable here
        item = _listed(new, "bg-1")
        assert (item["version"], item["served"]) == ("ops@1", False)
        assert item["waiting"].startswith("waiting for ops@1, not served here")
        mine = _listed(old, "bg-1")
        assert (mine["version"], mine["served"]) == ("ops@1", True)
        assert "waiting" not in mine
        thread = new.get("/threads/bg-1")
        assert (thread["version"], thread["served"]) == ("ops@1", False)

        # approving it through the new server is refused before any of its code runs
        refused = _approve(new, "bg-1", iid, "bg-1-new")
        assert types(refused)[-1] == "RUN_ERROR", types(refused)
        error = refused[-1][1]
        assert error["code"] == "AGENT_VERSION"
        assert "ops@1" in error["message"] and "ops@2" in error["message"]
        assert effects(log, "bg-1") == []
        after = store.load("bg-1")
        assert after.status == "pending" and after.agent_version == "1"
        assert [i.id for i in open_interrupts(after)] == [iid]  # the approval stays open
        assert after.hitl.decisions == {}
        assert after.events.next_seq == paused.events.next_seq  # nothing was written
        assert [i["interrupt"]["id"] for i in new.get("/interrupts")["interrupts"]] == [iid]

        # the old server completes it: the tool runs once, as v1
        done = _approve(old, "bg-1", iid, "bg-1-old")
        assert types(done)[-1] == "RUN_FINISHED", types(done)
        assert done[-1][1].get("outcome", {}).get("type") != "interrupt"
        assert effects(log, "bg-1") == ["v1 delete_user 1001"]
        final = store.load("bg-1")
        assert final.status != "pending" and final.agent_version == "1"

        # the new server, asked again, changes nothing and runs nothing
        again = _approve(new, "bg-1", iid, "bg-1-new-again")
        assert types(again)[-1] == "RUN_ERROR"
        assert effects(log, "bg-1") == ["v1 delete_user 1001"]
    finally:
        store.close()


def test_new_sessions_on_the_new_server_are_v2(pg: tuple[str, Path, list[Server]]) -> None:
    dsn, log, _ = pg
    old, new = _serve(pg, "V1"), _serve(pg, "V2")
    iid = _start(new, "bg-2")
    store = open_store(dsn)
    try:
        assert store.load("bg-2").agent_version == "2"
        item = _listed(old, "bg-2")  # the old server: not its version
        assert (item["version"], item["served"]) == ("ops@2", False)
        refused = _approve(old, "bg-2", iid, "bg-2-old")
        assert refused[-1][1]["code"] == "AGENT_VERSION"
        assert effects(log, "bg-2") == []
        done = _approve(new, "bg-2", iid, "bg-2-new")
        assert types(done)[-1] == "RUN_FINISHED"
        assert effects(log, "bg-2") == ["v2 delete_user 1001"]
    finally:
        store.close()


def test_a_new_server_that_migrates_v1_takes_the_session_over(
    pg: tuple[str, Path, list[Server]],
) -> None:
    dsn, log, _ = pg
    old, new = _serve(pg, "V1"), _serve(pg, "V2_MIGRATING")
    iid = _start(old, "bg-3")
    store = open_store(dsn)
    try:
        item = _listed(new, "bg-3")
        assert (item["version"], item["served"]) == ("ops@1", True)  # it migrates it
        done = _approve(new, "bg-3", iid, "bg-3-new")
        assert types(done)[-1] == "RUN_FINISHED", done[-1]
        assert effects(log, "bg-3") == ["v2 delete_user 1001"]
        s = store.load("bg-3")
        assert s.agent_version == "2" and s.context["ops.schema"] == 2
        (migrated,) = [r for r in store.audit("bg-3") if r.action == "agent.migrated"]
        assert migrated.reason == "migrated ops 1 → 2"
        assert migrated.actor == "token-holder"
        # the decision was recorded, then the session migrated (a migration that rewrites
        # the call voids it), both under the new server's claim
        actions = [r.action for r in store.audit("bg-3")]
        assert actions.index("decision.recorded") < actions.index("agent.migrated"), actions
    finally:
        store.close()


def test_a_server_serving_both_versions_runs_each_session_on_its_own(
    pg: tuple[str, Path, list[Server]],
) -> None:
    dsn, log, _ = pg
    old, both = _serve(pg, "V1"), _serve(pg, "BOTH")
    first = _start(old, "bg-4")
    second = _start(both, "bg-5")  # a new one: the newest version
    store = open_store(dsn)
    try:
        assert store.load("bg-5").agent_version == "2"
        assert _listed(both, "bg-4")["served"] is True
        assert types(_approve(both, "bg-4", first, "bg-4-both"))[-1] == "RUN_FINISHED"
        assert types(_approve(both, "bg-5", second, "bg-5-both"))[-1] == "RUN_FINISHED"
        assert effects(log, "bg-4") == ["v1 delete_user 1001"]  # pinned: nothing migrated
        assert effects(log, "bg-5") == ["v2 delete_user 1001"]
        assert not [r for r in store.audit("bg-4") if r.action == "agent.migrated"]
    finally:
        store.close()
