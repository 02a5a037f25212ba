"""Hostile input for every request the AG-UI app takes (in process): any body gets a 4xx
or an SSE stream of valid AG-UI events ending in RUN_FINISHED or RUN_ERROR, never a
traceback; any resume that is refused leaves the stored session exactly as it was."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from starlette.testclient import TestClient  # noqa: E402

from intermission.agui import agui_app  # noqa: E402
from intermission.stores import MemoryStore  # noqa: E402

from ._server import parse_sse  # noqa: E402
from .agents import AGENTS  # noqa: E402

LOCAL = "http://127.0.0.1"

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def paused() -> Any:
    store = MemoryStore()
    client = TestClient(agui_app(AGENTS, store), base_url=LOCAL)
    r = client.post(
        "/agents/ops",
        json={
            "threadId": "T",
            "runId": "r1",
            "messages": [{"id": "u", "role": "user", "content": "go"}],
        },
    )
    (iid,) = [i["id"] for i in parse_sse(r.text)[-1][1]["outcome"]["interrupts"]]
    return client, store, iid


def _answer(r: Any) -> list[Any]:
    assert "Traceback" not in r.text
    if r.status_code != 200:
        assert 400 <= r.status_code < 500 and r.json()["error"], (r.status_code, r.text)
        return []
    events = parse_sse(r.text)
    assert events and events[-1][1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    return events


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=JSON)
def test_any_json_body_gets_a_4xx_or_a_valid_stream(paused: Any, body: Any) -> None:
    client, store, _ = paused
    before = store.load("T").to_json()
    _answer(
        client.post(
            "/agents/ops", content=json.dumps(body), headers={"Content-Type": "application/json"}
        )
    )
    assert store.load("T").to_json() == before


def _paused_session() -> tuple[Any, Any, str]:
    store = MemoryStore()
    client = TestClient(agui_app(AGENTS, store), base_url=LOCAL)
    start = {
        "threadId": "T",
        "runId": "r1",
        "messages": [{"id": "u", "role": "user", "content": "go"}],
    }
    r = client.post("/agents/ops", json=start)
    (iid,) = [i["id"] for i in parse_sse(r.text)[-1][1]["outcome"]["interrupts"]]
    return client, store, iid


@settings(max_examples=120, deadline=None)
@given(
    payload=JSON
    | st.fixed_dictionaries(
        {"approved": st.booleans()},
        optional={"reason": JSON | st.text(max_size=5), "editedArgs": JSON, "extra": JSON},
    ),
    status=st.sampled_from(["resolved", "cancelled", "maybe", None]),
    metadata=st.none() | st.dictionaries(st.sampled_from(["reviewer", "x"]), JSON, max_size=2),
    other_id=st.booleans(),
)
def test_a_resume_is_applied_whole_or_refused_with_nothing_changed(
    payload: Any, status: Any, metadata: Any, other_id: bool
) -> None:
    client, store, iid = _paused_session()
    before = store.load("T").to_json()
    entry = {"interruptId": "nope" if other_id else iid, "status": status, "payload": payload}
    if metadata is not None:
        entry["metadata"] = metadata
    body = {"threadId": "T", "runId": "r", "messages": [], "resume": [entry]}
    events = _answer(client.post("/agents/ops", json=body))
    after = store.load("T")
    if not events or events[-1][1]["type"] == "RUN_ERROR":
        assert after.to_json() == before
        return
    # accepted: the one decision asked for was recorded and applied, nothing else
    (decided,) = [e.decision for e in after.events if e.kind == "hitl_decided"]
    approved = status == "resolved" and payload["approved"] is True
    assert decided.verdict == ("approve" if approved else "reject")
    assert after.status == "done" and not other_id


def test_paths_the_store_refuses_are_a_4xx(paused: Any) -> None:
    client, _, _ = paused
    for path in ("/threads/a%00b", "/threads/a%00b/events", "/threads/%20/events"):
        r = client.get(path)
        assert 400 <= r.status_code < 500 and "Traceback" not in r.text, (path, r.text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cursor=st.one_of(
        JSON.map(json.dumps),
        st.sampled_from(
            [
                "[" * 5000,
                f'[1{"0" * 400}, "T"]',
                '[NaN, "T"]',
                '[1e999, "T"]',
                '[true, "T"]',
                '[-Infinity, "T"]',
            ]
        ),
    )
)
def test_any_after_cursor_gets_a_page_or_a_400(paused: Any, cursor: str) -> None:
    """Before: a hand-made ``after`` cursor holding a deeply nested array or an integer no
    float holds was a 500 (RecursionError, OverflowError), not the 400 every other bad
    cursor gets."""
    import base64

    client = paused[0]
    raw = base64.urlsafe_b64encode(cursor.encode()).decode().rstrip("=")
    r = client.get("/interrupts", params={"after": raw})
    assert r.status_code in (200, 400), (cursor[:80], r.status_code, r.text[:200])
    if r.status_code == 400:
        assert r.json()["error"] == "after is the next cursor of an earlier page"
