"""A pause is traced only once its save committed (R60), seen by a real OTLP/HTTP receiver.

Two stale copies of one stored session, in a process traced from the environment: both
pause (or both decide), one save commits, the other loses compare-and-set. The trace
shows what the store keeps — one pause, one decision — and the losing copy's request
says it was not saved. A session of no store still traces its pause at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, need_module, pg_dsn
from tests.otel._collector import collector
from tests.otel._spans import events, named

SCRIPT = Path(__file__).with_name("_stale_copies.py")


def _target(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return str(tmp_path / "bank.db")
    fresh_pg().close()
    return pg_dsn()


def _run(target: str, scenario: str, sid: str, endpoint: str) -> dict[str, Any]:
    env = {
        **os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "INTERMISSION_OTEL": "1",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "stale-copies",
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(SCRIPT), target, scenario, sid],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    kept: dict[str, Any] = json.loads(done.stdout)
    assert kept["lost"] is True  # the second copy's save lost compare-and-set
    return kept


def _of(spans: list[dict[str, Any]], sid: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["attributes"].get("gen_ai.conversation.id") == sid]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_stale_copies_that_pause_leave_the_one_pause_the_store_keeps(
    kind: str, tmp_path: Path
) -> None:
    need_module("opentelemetry.exporter.otlp.proto.http", "the otlp extra")
    target = _target(kind, tmp_path)
    with collector() as received:
        kept = _run(target, "pause", "twins", received.url)
        spans = _of(received.spans(), "twins")
    roots = named(spans, "invoke_agent bank")
    assert len(roots) == 2  # both requests ran, and both are traced…
    pauses = [p for r in roots for p in events(r, "intermission.pause")]
    assert len(pauses) == 1  # …but only the pause the store keeps is one
    assert pauses[0]["intermission.pause.id"] == kept["pause"]
    (lost,) = [r for r in roots if not events(r, "intermission.pause")]
    assert lost["attributes"]["intermission.session.saved"] is False
    assert lost["attributes"]["intermission.session.status"] == "pending"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_stale_copies_that_decide_leave_the_one_decision_the_store_keeps(
    kind: str, tmp_path: Path
) -> None:
    need_module("opentelemetry.exporter.otlp.proto.http", "the otlp extra")
    target = _target(kind, tmp_path)
    with collector() as received:
        kept = _run(target, "decide", "votes", received.url)
        spans = _of(received.spans(), "votes")
    assert kept["decisions"] == ["approve"]
    recorded = named(spans, "intermission.decision.recorded")
    verdicts = [e["intermission.decision.verdict"] for r in recorded
                for e in events(r, "intermission.decision.recorded")]  # fmt: skip
    assert verdicts == ["approve"]  # bob's rejection on the losing copy is on no record
    # the first request (a fresh session, paused and saved) traced its pause as ever
    (root,) = named(spans, "invoke_agent bank")
    assert len(events(root, "intermission.pause")) == 1


def test_a_session_of_no_store_traces_its_pause_at_once(traced: Any) -> None:
    from intermission.testing.conformance import paused_ops

    s = paused_ops("mem")
    (root,) = named(traced.spans(), "invoke_agent ops")
    assert events(root, "intermission.pause")[0]["intermission.pause.id"] == s.meta["otel"]["pause"]
