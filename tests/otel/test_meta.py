"""What extensions keep with a session (``session.meta``): saved in the snapshot only when
not empty, through every store, carried by forks; older snapshots load; a malformed entry
is a typed error; a record tracing cannot read is ignored, never trusted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.otel._spans import one

from intermission import InMemoryAgentSession, SnapshotSchemaError
from intermission.testing.conformance import paused_ops


def test_a_session_nobody_traced_stores_no_meta() -> None:
    s = paused_ops("plain")
    assert s.meta == {}
    assert '"meta"' not in s.to_json()
    assert InMemoryAgentSession.restore(s.to_json()).to_json() == s.to_json()


def test_meta_round_trips_through_every_store(traced: Any, make_store: Any) -> None:
    store = make_store()
    s = paused_ops("kept")
    record = s.meta["otel"]
    assert record["v"] == 1 and record["session"] == "kept" and record["status"] == "pending"
    store.save(s)
    loaded = store.load("kept")
    assert loaded.meta == s.meta and loaded.to_json() == s.to_json()
    with store.resume("kept") as again:
        assert again.meta["otel"] == record
    forked = store.fork("kept", "kept-2")
    assert forked.meta["otel"]["session"] == "kept"  # the origin's, until the fork runs


def test_an_old_snapshot_without_meta_loads() -> None:
    data = json.loads(paused_ops("old").to_json())
    data.pop("meta", None)
    s = InMemoryAgentSession.restore(data)
    assert s.meta == {} and s.is_pending


@pytest.mark.parametrize(
    "meta",
    [{"otel": 5}, {"otel": [1]}, {"": {"v": 1}}, {"otel": {"v": float("inf")}}, ["otel"]],
)
def test_a_malformed_meta_is_a_typed_error(meta: Any) -> None:
    data = json.loads(paused_ops("bad").to_json())
    data["meta"] = meta
    with pytest.raises(SnapshotSchemaError):
        InMemoryAgentSession.restore(data)


@pytest.mark.parametrize(
    "record",
    [
        {"v": 99, "trace": "1" * 32, "span": "2" * 16},  # a newer writer's
        {"v": 1, "trace": "0" * 32, "span": "2" * 16},  # an invalid trace id
        {"v": 1, "trace": "xyz", "span": "2" * 16},
        {"v": 1, "trace": "1" * 32},
        # ids no span context can carry: an OTLP exporter fails the whole batch on them
        {"v": 1, "trace": "f" * 33, "span": "2" * 16},
        {"v": 1, "trace": "1" * 32, "span": "f" * 17},
        {"v": 1, "trace": "-1", "span": "2" * 16},
        {"v": 1, "trace": "0x" + "1" * 30, "span": "2" * 16},
    ],
)
def test_a_record_tracing_cannot_read_makes_no_link(traced: Any, record: Any) -> None:
    from intermission import HITL, HITLDecision
    from intermission.examples import build_ops_agent

    data = json.loads(paused_ops("odd").to_json())
    data["meta"] = {"otel": {**record, "session": "odd", "status": "pending", "at": 0.0}}
    s = InMemoryAgentSession.restore(data)
    traced.clear()
    HITL.submit(s, HITL.pending_tasks(s)[0], HITLDecision.approve())
    build_ops_agent().prompt().session(s).call()
    root = one(traced.spans(), "invoke_agent ops")
    assert root["links"] == [] and "intermission.pause.duration_ms" not in root["attributes"]
    assert s.meta["otel"]["v"] == 1 and s.meta["otel"]["span"] == root["span"]


@pytest.mark.parametrize(
    "kwargs",
    [{"tracer_provider": "jaeger"}, {"tracer_provider": 5}, {"capture_content": "yes"},
     {"experimental": 1}],
)  # fmt: skip
def test_instrument_refuses_what_it_cannot_use_and_changes_nothing(kwargs: Any) -> None:
    import intermission.otel as otel
    from intermission import UsageError

    before = otel.is_instrumented()
    with pytest.raises(UsageError):
        otel.instrument(**kwargs)
    assert otel.is_instrumented() == before
