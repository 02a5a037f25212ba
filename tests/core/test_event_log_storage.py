"""The event log's stored text: incremental, lazy, and always the canonical encoding."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests._helpers import linear

from intermission import (
    FlowEngine,
    InMemoryAgentSession,
    NotSerializableError,
    SnapshotSchemaError,
)
from intermission._json import canonical_dumps
from intermission.stores import SQLiteStore
from intermission.stores.rows import row_of, session_from


def _graph(n: int) -> Any:
    return linear(n, f"line{n}").build()


def _full_encoding(session: InMemoryAgentSession) -> str:
    """What encoding the whole log from scratch gives."""
    return canonical_dumps(session.events.stored_forms())


def _reload(session: InMemoryAgentSession) -> InMemoryAgentSession:
    """Through one chunk, as the memory store keeps it."""
    row = row_of(session)
    log = session.events
    return session_from(row.state_json, [(len(log), log.stored_json())], 1, {})


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_canonical_dumps_is_json_dumps_with_sorted_keys(value: Any) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_dumps(value) == expected


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan"), [1e308 * 10]])
def test_canonical_dumps_refuses_what_is_not_json(bad: Any) -> None:  # R42
    with pytest.raises(NotSerializableError):
        canonical_dumps(bad)


def _seen(session: InMemoryAgentSession) -> list[tuple[Any, ...]]:
    return [(e.seq, e.kind, e.node_id) for e in session.events]  # type: ignore[union-attr]


@settings(max_examples=150, deadline=None)
@given(
    runs=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=6),
    max_events=st.integers(min_value=1, max_value=40),
    reads=st.lists(st.booleans(), min_size=6, max_size=6),
    reloads=st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_stored_log_equals_a_full_encoding_across_saves_loads_and_trims(
    runs: list[int], max_events: int, reads: list[bool], reloads: list[bool]
) -> None:
    """Saves append chunks and keep the text incremental; whatever the trims, reloads,
    reads and re-saves of one object in between, the text equals encoding the whole log
    anew and loading (from one chunk or from the store's chunks) keeps every event."""
    engine = FlowEngine()
    store = SQLiteStore(":memory:")
    session = InMemoryAgentSession("p", max_events=max_events)
    try:
        for i, n in enumerate(runs):
            session.context.trace.clear()
            engine.eval(_graph(n), session.context)
            if reads[i]:  # reading parses a lazily loaded log first
                assert len(list(session.events)) == len(session.events)
            before = _seen(session)
            assert session.events.stored_json() == _full_encoding(session)
            assert len(before) <= max_events  # the bound holds through every path
            assert _seen(_reload(session)) == before
            store.save(session)
            if reloads[i]:
                session = store.load("p")
                assert _seen(session) == before
        assert _seen(store.load("p")) == _seen(session)
        assert session.to_json() == InMemoryAgentSession.restore(session.to_json()).to_json()
    finally:
        store.close()


def test_a_loaded_log_is_parsed_only_when_read_and_bad_text_is_a_typed_error() -> None:
    session = InMemoryAgentSession.of("lazy")
    FlowEngine().eval(_graph(2), session.context)
    row = row_of(session)
    text = session.events.stored_json()
    broken = session_from(row.state_json, [(8, text.replace("node_start", "nope"))], 1, {})
    assert len(broken.events) == 8  # the count is known without parsing
    assert broken.is_pending is False and broken.context["count"] == 2
    with pytest.raises(SnapshotSchemaError) as info:
        list(broken.events)
    assert info.value.path.startswith("events.")
    garbage = session_from(row.state_json, [(1, "[{")], 1, {})
    with pytest.raises(SnapshotSchemaError):
        garbage.events.kinds()


def test_appending_to_a_loaded_log_does_not_parse_it() -> None:
    session = InMemoryAgentSession.of("append")
    engine = FlowEngine()
    graph = _graph(1)
    engine.eval(graph, session.context)
    loaded = _reload(session)
    loaded.context.trace.clear()
    engine.eval(graph, loaded.context)
    # the stored prefix stays text: a resume pays for the events it adds
    assert loaded.events._unparsed is not None
    text = loaded.events.stored_json()
    assert loaded.events._unparsed is not None
    assert text == _full_encoding(loaded)
    assert [e.seq for e in loaded.events] == list(range(1, 13))  # type: ignore[union-attr]


def test_clear_and_trim_reset_the_stored_text() -> None:
    session = InMemoryAgentSession("t", max_events=2)
    FlowEngine().eval(_graph(1), session.context)
    assert len(session.events) == 2
    assert session.events.stored_json() == _full_encoding(session)
    session.events.clear()
    assert session.events.stored_json() == "[]"


def _rich_sessions() -> list[InMemoryAgentSession]:
    from intermission import HITL, HITLDecision
    from intermission.examples import build_change_graph, build_ops_agent
    from intermission.hitl.graph import decide_graph
    from intermission.testing.conformance import paused_change, paused_ops

    out = [InMemoryAgentSession.of("empty"), paused_ops("ops"), paused_change("change")]
    for sid, resume in (("ops-decided", False), ("ops-approved", True)):
        decided = paused_ops(sid)
        for task in HITL.pending_tasks(decided):
            HITL.submit(decided, task, HITLDecision.approve().comment("fine"))
        if resume:  # to the end: tool results in the history
            build_ops_agent().prompt().session(decided).call()
        out.append(decided)
    approved = paused_change("change-approved")
    decide_graph(approved, "APPROVE", reviewer="ana")
    build_change_graph().prompt().session(approved).call()  # the ledger holds the effect
    out.append(approved)
    bounded = InMemoryAgentSession("bounded", max_events=7, max_messages=3)
    FlowEngine().eval(_graph(5), bounded.context)
    bounded.pending(True, "why")
    out.append(bounded)
    return out


def test_the_one_pass_encoding_equals_the_model_snapshot() -> None:
    """Saves encode the session in one pass; it gives the text of the validated model."""
    from intermission.core.snapshot import canonical, layout, session_data

    sessions = _rich_sessions()
    assert sessions[5].ledger and sessions[3].hitl.decisions and sessions[1].traces
    for session in sessions:
        text = session.to_json()
        assert text == layout(canonical(session_data(session)))
        assert json.loads(text) == json.loads(canonical_dumps(canonical(session_data(session))))
        assert text == session.snapshot().to_json()
        assert InMemoryAgentSession.restore(text).to_json() == text
