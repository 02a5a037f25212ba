"""Snapshot limits agree (R50, issue 20 case 11): what a store saves, ``restore`` and
``put_snapshot`` accept — a session with a 40 MB tool output passes through its own
snapshot on every store — and past the one limit every store's save and every loader
refuse with the same typed error, which names the limit and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from intermission import (
    HITL,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    SnapshotTooLargeError,
    limits,
    tool,
)
from intermission.messages import ToolCall
from intermission.testing.conformance import paused_ops

OUTPUT = "GET /health 200 0.4ms\n" * (40_000_000 // 22)  # 40 MB of logs


def _logs_agent() -> Any:
    @tool
    def dump_logs(service: str) -> str:
        """The service's logs."""
        return OUTPUT

    @tool
    def restart(service: str) -> str:
        """Restart the service."""
        return f"{service} restarted"

    def script(messages: list[Any], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m for m in messages[last_user:] if m.role == "tool"]
        if not seen:
            return [ToolCall("dump_logs", {"service": "api"})]
        if len(seen) == 1:
            return [ToolCall("restart", {"service": "api"})]
        return f"read {len(seen[0].content)} characters; {seen[1].content}"

    return (
        ReActAgent.of(ScriptedModel(script)).name("logs").tools(dump_logs, restart)
        .interceptor(HITLInterceptor().on_tool("restart")).build()
    )  # fmt: skip


@pytest.fixture(scope="module")
def big_paused() -> str:
    s = InMemoryAgentSession("big")
    _logs_agent().prompt("why is the api slow?").session(s).call()
    assert s.is_pending
    text = s.to_json()
    assert len(text) > 64 * 1024 * 1024  # past the old 64 MiB loader limit
    return text


def test_a_40_mb_tool_output_passes_through_its_own_snapshot(
    make_store: Any, big_paused: str
) -> None:
    store = make_store()
    store.put_snapshot(big_paused)  # a loader takes what to_json() wrote …
    loaded = store.load("big")
    again = loaded.to_json()
    assert again == big_paused
    copy = InMemoryAgentSession.restore(again)  # … and what a store loaded
    assert copy.to_json() == big_paused
    # it resumes from the store, and what the store then holds still passes through
    agent = _logs_agent()
    with store.resume("big") as s:
        HITL.approve_all(s, reviewer="alice")
        answer = agent.prompt().session(s).call()
    assert answer.content == f"read {len(OUTPUT)} characters; api restarted"
    done = store.load("big").to_json()
    other = make_store()
    other.put_snapshot(done)
    assert other.load("big").to_json() == done == InMemoryAgentSession.restore(done).to_json()


def test_past_the_limit_every_save_and_loader_refuse_alike(
    make_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = paused_ops("lim")
    size = len(s.to_json())
    store = make_store()
    monkeypatch.setattr(limits, "MAX_SNAPSHOT_TEXT", size - 1)
    for refused in (
        lambda: store.save(s),
        lambda: store.put_snapshot(s.to_json()),
        lambda: store.put_snapshot(s.to_json().encode()),
        lambda: InMemoryAgentSession.restore(s.to_json()),
        lambda: InMemoryAgentSession.restore(s.to_json().encode("utf-16")),
    ):
        with pytest.raises(SnapshotTooLargeError, match="MAX_SNAPSHOT_TEXT") as err:
            refused()
        assert (err.value.size, err.value.limit) == (size, size - 1)
    assert store.count() == 0 and s.store_version == 0  # nothing was written
    # at the limit exactly, all of them take it
    monkeypatch.setattr(limits, "MAX_SNAPSHOT_TEXT", size)
    assert InMemoryAgentSession.restore(s.to_json()).to_json() == s.to_json()
    assert store.save(s) == 1
    # a later save that appends to the stored log counts the whole snapshot too
    loaded = store.load("lim")
    HITL.approve_all(loaded, reviewer="alice")
    from intermission.examples import build_ops_agent

    build_ops_agent().prompt().session(loaded).call()
    grown = len(loaded.to_json())
    monkeypatch.setattr(limits, "MAX_SNAPSHOT_TEXT", grown - 1)
    with pytest.raises(SnapshotTooLargeError) as err:
        store.save(loaded)
    assert err.value.size == grown and err.value.session_id == "lim"
    assert store.load("lim").store_version == 1 and store.load("lim").is_pending
    monkeypatch.setattr(limits, "MAX_SNAPSHOT_TEXT", grown)
    assert store.save(loaded) == 2
    assert len(store.load("lim").to_json()) == grown
