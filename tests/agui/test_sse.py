"""``Last-Event-ID`` parsing: ours (``seq.k`` or ``seq``, ASCII digits) or None, for any text."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from starlette.testclient import TestClient  # noqa: E402

from intermission.agui import agui_app  # noqa: E402
from intermission.agui.sse import parse_cursor  # noqa: E402
from intermission.stores import MemoryStore  # noqa: E402

from .agents import AGENTS  # noqa: E402


@given(st.text(max_size=50))
def test_any_last_event_id_is_a_cursor_or_none(text: str) -> None:
    cursor = parse_cursor(text)
    if cursor is not None:
        assert f"{cursor[0]}.{cursor[1]}" in (text.strip(), f"{text.strip()}.0")


@given(st.integers(0, 10**15), st.integers(0, 10**6))
def test_our_ids_round_trip(seq: int, k: int) -> None:
    assert parse_cursor(f"{seq}.{k}") == (seq, k)
    assert parse_cursor(str(seq)) == (seq, 0)


def test_unicode_digits_are_not_a_cursor_and_not_a_500() -> None:
    for text in ("\u00b2", "1.\u00b3", "\u00b9", "\u0663", "\uff11.2"):
        assert parse_cursor(text) is None
    client = TestClient(agui_app(AGENTS, MemoryStore()), base_url="http://127.0.0.1")
    r = client.post("/agents/ops", json={"threadId": "T", "runId": "r1", "messages": [
        {"id": "u", "role": "user", "content": "go"}]})  # fmt: skip
    assert r.status_code == 200
    for raw in (b"\xb2", b"1.\xb3", b"\xb9"):
        r = client.get("/threads/T/events", headers=[(b"Last-Event-ID", raw)])
        assert r.status_code == 200 and "RUN_STARTED" in r.text


def test_replayed_events_are_byte_identical_to_the_live_stream(tmp_path: Any) -> None:
    """``pair`` proposes ``refund({"order": .., "amount": ..})``: the SQLite store need not
    keep that key order, and the replay must still send the live stream's very bytes."""
    from intermission.stores import SQLiteStore

    store = SQLiteStore(tmp_path / "s.db")
    try:
        client = TestClient(agui_app(AGENTS, store), base_url="http://127.0.0.1")
        live = client.post("/agents/pair", json={"threadId": "P", "runId": "r1", "messages": [
            {"id": "u", "role": "user", "content": "go"}]})  # fmt: skip
        assert "TOOL_CALL_ARGS" in live.text
        assert client.get("/threads/P/events").text == live.text
    finally:
        store.close()
