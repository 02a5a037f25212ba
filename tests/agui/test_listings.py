"""Issue 27.4 and 27.5 through the AG-UI server (``python -m intermission serve``, raw HTTP):
``GET /interrupts`` survives unreadable rows (200, the others listed, the bad ones named
with why), lists threads stuck on an effect of unknown outcome, whose effect
``POST /threads/{id}/effects`` resolves; and its ``next`` cursor never skips or repeats a
thread that stays open while others are inserted, deleted and decided in part.

Before: one bad row made the listing a 503 that hid the 299 good threads; a stuck thread
was listed nowhere; a full pass missed threads decided in part."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, need_module, pg_dsn

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

import httpx  # noqa: E402
from tests.stores._threads import THREADS, decide_one, paused_pairs  # noqa: E402
from tests.stores.test_listings import crashed_mid_effect, damage  # noqa: E402

from intermission.stores import SQLiteStore  # noqa: E402

from ._server import Server  # noqa: E402

KEY = "change-001/execute"


def _store(kind: str, tmp_path: Path) -> tuple[Any, str]:
    if kind == "sqlite":
        path = str(tmp_path / "s.db")
        return SQLiteStore(path, synchronous="NORMAL"), path
    return fresh_pg(), pg_dsn()


def _pass(server: Server, limit: int, between: Any = None) -> tuple[list[Any], list[Any]]:
    """Every page of GET /interrupts, following ``next``; ``between()`` runs after each."""
    pages: list[Any] = []
    path = f"/interrupts?limit={limit}"
    while path:
        r = httpx.get(server.url + path, headers=server.headers(), timeout=120)
        assert r.status_code == 200, r.text
        pages.append(r.json())
        if between is not None:
            between()
        cursor = pages[-1]["next"]
        path = f"/interrupts?limit={limit}&after={cursor}" if cursor else ""
    return pages, [u for p in pages for u in p["unreadable"]]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_interrupts_lists_the_readable_threads_and_names_the_unreadable(
    kind: str, tmp_path: Path
) -> None:
    store, target = _store(kind, tmp_path)
    ids = [f"t{i:04d}" for i in range(300)]
    paused_pairs(store, ids)
    bad = {ids[3]: "cut", ids[120]: "newer", ids[250]: "edited"}
    for sid, how in bad.items():
        damage(store, sid, how)
    server = Server(target, tmp_path / "effects.log")
    try:
        pages, unreadable = _pass(server, limit=100)
        listed = [i["threadId"] for p in pages for i in p["interrupts"]]
        assert Counter(listed) == dict.fromkeys(set(ids) - set(bad), 2)  # two interrupts each
        why = {u["threadId"]: u["why"] for u in unreadable}
        assert sorted(why) == sorted(bad)
        assert "shorter than the one saved" in why[ids[3]]
        assert "snapshot schema 2" in why[ids[120]]
        assert "schema_version 7 is not supported" in why[ids[250]]  # found when loaded
    finally:
        server.stop()
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_stuck_thread_is_listed_and_its_effect_resolved_over_http(
    kind: str, tmp_path: Path
) -> None:
    store, target = _store(kind, tmp_path)
    log = tmp_path / "effects.log"
    server = Server(target, log, token="t0k3n")
    thread = "stuck-" + uuid.uuid4().hex[:8]
    try:
        start = {"threadId": thread, "runId": "r1",
                 "messages": [{"id": "u1", "role": "user", "content": "go"}]}  # fmt: skip
        (interrupt,) = server.run("change", start)[-1][1]["outcome"]["interrupts"]
        crashed_mid_effect(store, thread)  # its runner died inside the effect
        (stuck,) = server.get("/interrupts")["stuck"]
        assert (stuck["threadId"], stuck["agent"], stuck["key"]) == (thread, "change", KEY)
        assert "outcome was never recorded" in stuck["why"]
        url = f"{server.url}/threads/{thread}/effects"
        body = {"key": KEY, "action": "forget", "reviewer": "ann"}
        assert httpx.post(url, json=body, timeout=60).status_code == 401  # authorised alike
        auth = server.headers()
        form = httpx.post(url, content="key=x", timeout=60,
                          headers={**auth, "Content-Type": "text/plain"})  # fmt: skip
        assert form.status_code == 415
        for wrong in ({**body, "action": "guess"}, {**body, "reviewer": ""},
                      {"key": KEY, "action": "resolve", "reviewer": "ann"}):  # fmt: skip
            assert httpx.post(url, json=wrong, headers=auth, timeout=60).status_code == 422
        assert store.load(thread).ledger[KEY].status == "started"  # refused: unchanged
        done = httpx.post(url, json=body, headers=auth, timeout=60)
        assert done.status_code == 200, done.text
        assert done.json() == {"threadId": thread, "key": KEY, "status": "failed",
                               "threadStatus": "pending"}  # fmt: skip
        again = httpx.post(url, json=body, headers=auth, timeout=60)
        assert again.status_code == 409 and "nothing to resolve" in again.json()["error"]
        assert server.get("/interrupts")["stuck"] == []
        record = store.load(thread).context.get("effects.resolved")[-1]
        # the token's principal records it; the name the reviewer typed is a display note
        assert (record["reviewer"], record.get("display"), record["via"], record["outcome"]) == (
            "token-holder",
            "ann",
            "console",
            "forgotten",
        )
        # resumable: approving runs the forgotten effect, once
        resume = [{"interruptId": interrupt["id"], "status": "resolved",
                   "payload": {"approved": True}}]  # fmt: skip
        events = server.run("change", {"threadId": thread, "runId": "r2", "resume": resume})
        assert events[-1][1]["type"] == "RUN_FINISHED", events[-1]
        assert [line for line in log.read_text().splitlines() if "graph apply" in line] == [
            "graph apply change-001"
        ]
    finally:
        server.stop()
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_next_cursor_never_skips_a_thread_that_stays_open(kind: str, tmp_path: Path) -> None:
    store, target = _store(kind, tmp_path)
    rng = random.Random(5)
    steady = [f"s{i:05d}" for i in range(THREADS)]
    churn = [f"c{i:05d}" for i in range(THREADS // 10)]
    paused_pairs(store, steady + churn)
    born = [0]

    def meanwhile() -> None:
        for sid in rng.sample(steady, 6):
            decide_one(store, sid)  # one interrupt of two decided: the thread stays open
        paused_pairs(store, [f"n{born[0]:05d}"])
        born[0] += 1
        if churn:
            store.delete(churn.pop(rng.randrange(len(churn))))
        if churn:
            decide_one(store, rng.choice(churn))

    server = Server(target, tmp_path / "effects.log")
    try:
        pages, unreadable = _pass(server, limit=50, between=meanwhile)
        assert unreadable == []
        per_page = [{i["threadId"] for i in p["interrupts"]} for p in pages]
        seen = Counter(t for threads in per_page for t in threads)
        missing = [s for s in steady if seen[s] == 0]
        assert not missing and all(n == 1 for n in seen.values()), (len(missing), missing[:5])
    finally:
        server.stop()
        store.close()


def test_the_replay_of_a_thread_whose_log_cannot_be_read_is_an_error_not_a_cut_stream(
    tmp_path: Path,
) -> None:
    """Before: ``GET /threads/{id}/events`` answered 200 and the stream broke after its
    headers (uvicorn: "response already started"), so a replaying client saw a thread with
    no events, or a connection error to retry forever, instead of the one-line error that
    ``GET /threads/{id}`` gives."""
    from starlette.testclient import TestClient

    from intermission.agui import agui_app
    from intermission.testing.conformance import paused_change

    store = SQLiteStore(str(tmp_path / "s.db"))
    store.save(paused_change("ok"))
    store.save(paused_change("bad"))
    with store._tx() as run:  # one event's kind edited by hand: valid JSON, not an event
        run("UPDATE im_events SET events = replace(events, '\"kind\":\"team_start\"', "
            "'\"kind\":\"team_stort\"') WHERE session_id = 'bad'")  # fmt: skip
    app = agui_app({}, store)
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        good = client.get("/threads/ok/events")
        assert good.status_code == 200 and good.text.count("\n\n") > 3
        for path in ("/threads/bad", "/threads/bad/events"):
            answer = client.get(path)
            assert answer.status_code == 503 and "team_stort" in answer.json()["error"], path
    store.close()
