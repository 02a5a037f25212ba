"""Without a token, a web page the reviewer's browser opens cannot drive the server: a
cross-origin form or ``no-cors`` fetch (``text/plain``), a DNS-rebound page (a foreign
``Host``) and a foreign ``Origin`` are refused before anything is read or stored."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from starlette.testclient import TestClient  # noqa: E402

from intermission.agui import agui_app  # noqa: E402
from intermission.errors import SessionNotFoundError  # noqa: E402
from intermission.stores import MemoryStore  # noqa: E402

from .agents import AGENTS  # noqa: E402

BODY = {"threadId": "T", "runId": "r1", "messages": [{"id": "u", "role": "user", "content": "go"}],
        "state": {}, "tools": [], "context": [], "forwardedProps": {}}  # fmt: skip


def _client(**kw: Any) -> tuple[TestClient, MemoryStore]:
    store = MemoryStore()
    return TestClient(agui_app(AGENTS, store, **kw), base_url="http://127.0.0.1:8000"), store


def _nothing_stored(store: MemoryStore) -> None:
    with pytest.raises(SessionNotFoundError):
        store.load("T")


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded",
                                  "multipart/form-data; boundary=x", None])  # fmt: skip
def test_a_run_that_is_not_json_is_415_and_stores_nothing(kind: str | None) -> None:
    client, store = _client()
    headers = {"Content-Type": kind} if kind else {}
    r = client.post("/agents/ops", content=json.dumps(BODY).encode(), headers=headers)
    assert r.status_code == 415 and r.json()["error"]
    _nothing_stored(store)


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8000", "127.0.0.1.evil"])
def test_a_foreign_host_is_403_without_a_token(host: str) -> None:
    client, store = _client()
    for r in (client.get("/interrupts", headers={"Host": host}),
              client.post("/agents/ops", json=BODY, headers={"Host": host})):  # fmt: skip
        assert r.status_code == 403, r.text
    _nothing_stored(store)


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:9999", "null"])
def test_a_foreign_origin_is_403_without_a_token(origin: str) -> None:
    client, store = _client()
    r = client.post("/agents/ops", json=BODY, headers={"Origin": origin})
    assert r.status_code == 403, r.text
    _nothing_stored(store)


def test_local_names_same_origin_and_configured_origins_are_served() -> None:
    client, _ = _client(origins=["http://ui.example:3000"])
    for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000", "LOCALHOST"):
        assert client.get("/interrupts", headers={"Host": host}).status_code == 200
    r = client.post("/agents/ops", json=BODY, headers={"Origin": "http://127.0.0.1:8000"})
    assert r.status_code == 200 and "RUN_STARTED" in r.text
    r = client.get("/interrupts", headers={"Origin": "http://ui.example:3000"})
    assert r.status_code == 200
    named, _ = _client(hosts=["reviews.internal"])
    assert named.get("/interrupts", headers={"Host": "reviews.internal:8000"}).status_code == 200


def test_with_a_token_the_bearer_is_the_check_but_json_is_still_required() -> None:
    client, store = _client(token="s3cret")
    auth = {"Authorization": "Bearer s3cret", "Host": "reviews.example.com"}
    assert client.get("/interrupts", headers=auth).status_code == 200
    r = client.post("/agents/ops", content=json.dumps(BODY), headers={**auth,
                    "Content-Type": "text/plain"})  # fmt: skip
    assert r.status_code == 415
    _nothing_stored(store)


@pytest.mark.parametrize("thread", ["a/b", "/", "..", ".", "x\x7f"])
def test_a_thread_id_no_route_can_address_is_refused_before_it_is_stored(thread: str) -> None:
    client, store = _client()
    r = client.post("/agents/ops", json={**BODY, "threadId": thread})
    assert r.status_code == 422 and "threadId" in r.json()["error"]
    with pytest.raises(Exception):  # noqa: B017 - not stored, whatever the store says
        store.load(thread)
    assert store.pending(limit=10) == []


def test_thread_ids_with_other_url_characters_round_trip() -> None:
    from urllib.parse import quote

    client, _ = _client()
    # ("%" too, under uvicorn: the TestClient decodes the path twice)
    for thread in ("a?b#c", "a b", "..a", "\u00e9\\", "a;b"):
        r = client.post("/agents/ops", json={**BODY, "threadId": thread})
        assert r.status_code == 200 and "RUN_FINISHED" in r.text
        got = client.get(f"/threads/{quote(thread, safe='')}")
        assert got.status_code == 200 and got.json()["threadId"] == thread


def test_an_agent_served_under_another_name_is_refused_at_construction() -> None:
    from intermission.errors import UsageError

    with pytest.raises(UsageError, match=r"agents\['helper'\].*named 'ops'"):
        agui_app({"helper": AGENTS["ops"]}, MemoryStore())
    agui_app({"ops": AGENTS["ops"], "change": AGENTS["change"]}, MemoryStore())


def test_interrupts_are_paged_with_a_next_cursor_never_cut_short() -> None:
    client, _ = _client()
    threads = {f"p{n}" for n in range(7)}
    for t in threads:
        assert client.post("/agents/ops", json={**BODY, "threadId": t}).status_code == 200
    seen: list[str] = []
    url: str | None = "/interrupts?limit=3"
    pages = 0
    while url:
        page = client.get(url).json()
        pages += 1
        assert len(page["interrupts"]) <= 3
        seen += [x["threadId"] for x in page["interrupts"]]
        url = f"/interrupts?limit=3&after={page['next']}" if page["next"] else None
    assert pages == 3 and sorted(seen) == sorted(threads)
    whole = client.get("/interrupts").json()
    assert whole["next"] is None and len(whole["interrupts"]) == 7
    for bad in ("limit=0", "limit=x", "limit=%C2%B2", "limit=100000", "after=%%%",
                "after=bm9wZQ", "after=W10"):  # fmt: skip
        r = client.get(f"/interrupts?{bad}")
        assert r.status_code == 400 and r.json()["error"], bad
