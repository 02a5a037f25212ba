"""The pause and the resume in different processes: the resume's trace links to the paused
one through what the session keeps; a rejection and a skip are recorded as calls not run;
a ledger replay after a crash is never reported as run again; a fork links to its origin.
Each step runs in an interpreter of its own (tests/otel/_proc.py) and writes its spans to a
file as they end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module
from tests.otel._spans import children, events, named, one, read_spans

PROC = Path(__file__).with_name("_proc.py")


@pytest.fixture(autouse=True)
def _needs_sdk() -> None:
    need_module("opentelemetry.sdk", "tracing tests need the otel extra (opentelemetry-sdk)")


def step(tmp: Path, name: str, sid: str, *arg: str, killed: bool = False) -> list[dict[str, Any]]:
    """Run one step in a new interpreter; the spans it exported."""
    spans = tmp / f"{name}-{sid}-{len(list(tmp.glob('*.jsonl')))}.jsonl"
    out = subprocess.run(
        [sys.executable, str(PROC), name, str(tmp / "s.db"), sid, str(spans), *arg],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if killed:
        assert out.returncode == -9, out.stderr
    else:
        assert out.returncode == 0 and out.stdout.strip() == "OK", out.stderr
    return read_spans(spans)


def transfers(tmp: Path) -> list[str]:
    path = tmp / "s.db.transfers"
    return path.read_text().splitlines() if path.exists() else []


def test_a_resume_in_another_process_links_to_the_paused_trace(tmp_path: Path) -> None:
    paused = step(tmp_path, "pause", "p1")
    root = one(paused, "invoke_agent bank")
    assert root["status"] == "UNSET" and root["attributes"]["gen_ai.conversation.id"] == "p1"
    (pause,) = events(root, "intermission.pause")
    pause_id = pause["intermission.pause.id"]
    assert pause["intermission.pause.interrupts"] == ["call_t"]
    assert pause["intermission.pause.tools"] == ["transfer"]
    (gen_paused,) = events(root, "gen_ai.agent.paused")  # (the opt-in proposal's shape)
    assert gen_paused == {"gen_ai.agent.execution.id": "p1", "gen_ai.agent.pause.id": pause_id,
                          "gen_ai.agent.pause.reason": "human_input"}  # fmt: skip
    assert not named(paused, "execute_tool transfer")  # nothing ran before the approval

    resumed = step(tmp_path, "resume", "p1")
    again = one(resumed, "invoke_agent bank")
    assert again["trace"] != root["trace"] and again["parent"] is None
    assert again["attributes"]["gen_ai.conversation.id"] == "p1"
    assert again["attributes"]["intermission.request.kind"] == "resume"
    assert again["attributes"]["intermission.pause.id"] == pause_id
    assert again["attributes"]["intermission.pause.duration_ms"] >= 0
    (link,) = again["links"]
    assert (link["trace"], link["span"]) == (root["trace"], root["span"])
    assert link["attributes"] == {"intermission.link.type": "resume",
                                  "intermission.pause.id": pause_id}  # fmt: skip
    (gen_resumed,) = events(again, "gen_ai.agent.resumed")
    assert gen_resumed["gen_ai.agent.resumed_from.type"] == "pause"
    assert gen_resumed["gen_ai.agent.resumed_from.id"] == pause_id
    (decision,) = events(again, "intermission.decision.applied")
    assert decision["intermission.decision.verdict"] == "approve"
    assert decision["intermission.decision.principal"] == "ann"
    ran = one(resumed, "execute_tool transfer")
    assert ran["parent"] == again["span"]
    assert ran["attributes"]["intermission.tool.executed"] is True
    assert ran["attributes"]["gen_ai.tool.call.id"] == "call_t"
    assert transfers(tmp_path) == ["alice 500"]


@pytest.mark.parametrize("verdict", ["reject", "skip"])
def test_a_call_a_person_said_no_to_is_an_execute_tool_span_not_run(
    tmp_path: Path, verdict: str
) -> None:
    step(tmp_path, "pause", "n1")
    resumed = step(tmp_path, "resume", "n1", verdict)
    root = one(resumed, "invoke_agent bank")
    (decision,) = events(root, "intermission.decision.applied")
    assert decision["intermission.decision.verdict"] == verdict
    said_no = one(resumed, "execute_tool transfer")
    assert said_no["parent"] == root["span"] and said_no["status"] == "UNSET"
    a = said_no["attributes"]
    assert a["intermission.tool.executed"] is False
    assert a["intermission.decision.verdict"] == verdict
    assert a["intermission.decision.principal"] == "ann"
    assert a["gen_ai.tool.call.id"] == "call_t" and a["gen_ai.tool.name"] == "transfer"
    assert a["intermission.effect.id"].startswith("effect-gen-")
    if verdict == "reject":
        assert a["intermission.decision.reason"] == "too much"
    assert transfers(tmp_path) == []


def test_a_ledger_replay_after_a_crash_is_not_reported_as_run_again(tmp_path: Path) -> None:
    step(tmp_path, "pause", "c1")
    crashed = step(tmp_path, "crash", "c1", killed=True)
    assert transfers(tmp_path) == ["alice 500"]  # it ran, then the process died unsaved
    ran = one(crashed, "execute_tool transfer")["attributes"]
    assert ran["intermission.tool.executed"] is True and "intermission.effect.replayed" not in ran
    replayed = step(tmp_path, "resume", "c1")
    assert transfers(tmp_path) == ["alice 500"]  # never twice
    span = one(replayed, "execute_tool transfer")
    a = span["attributes"]
    assert a["intermission.tool.executed"] is False
    assert a["intermission.effect.replayed"] is True
    assert a["intermission.effect.id"] == ran["intermission.effect.id"]
    assert [e["name"] for e in span["events"]] == ["intermission.effect.replayed"]
    assert span["status"] == "UNSET"
    # the crashed request never saved: the resume links to the pause, not to it
    paused_root = one(read_spans(sorted(tmp_path.glob("pause-c1-*.jsonl"))[0]), "invoke_agent bank")
    (link,) = one(replayed, "invoke_agent bank")["links"]
    assert link["span"] == paused_root["span"]


def test_a_fork_links_to_its_origin(tmp_path: Path) -> None:
    paused = step(tmp_path, "pause", "o1")
    origin = one(paused, "invoke_agent bank")
    forked = step(tmp_path, "fork", "o1", "o1-fork")
    root = one(forked, "invoke_agent bank")
    assert root["attributes"]["gen_ai.conversation.id"] == "o1-fork"
    assert root["attributes"]["intermission.fork.parent"] == "o1"
    assert isinstance(root["attributes"]["intermission.fork.checkpoint"], int)
    (link,) = root["links"]
    assert (link["trace"], link["span"]) == (origin["trace"], origin["span"])
    assert link["attributes"]["intermission.link.type"] == "fork"
    (gen_resumed,) = events(root, "gen_ai.agent.resumed")
    assert gen_resumed["gen_ai.agent.resumed_from.type"] == "checkpoint"
    assert children(forked, root)  # its model call and tool ran under it
