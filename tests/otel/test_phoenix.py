"""Where a person looks: a session paused in one process and approved and resumed in
another (through the CLI) is exported over OTLP/HTTP to Arize Phoenix, a real trace
collector and UI running on 127.0.0.1, and read back through its REST API: two traces of
one conversation, the resumed one joined to the paused one, the decision on its side.

Phoenix (PyPI ``arize-phoenix``) lives in an environment of its own, ``.venv-phoenix``
(``make phoenix``; ``INTERMISSION_PHOENIX`` may name another ``phoenix`` program). Phoenix
keeps no span links (its OTLP decoder drops them), so the join is read from the attributes
every resumed root carries beside its link: ``intermission.link.trace_id`` / ``.span_id``.
The link itself is checked in tests/otel/test_across_processes.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need, need_module

from intermission.principals import os_principal

REPO = Path(__file__).resolve().parents[2]
PHOENIX = Path(os.environ.get("INTERMISSION_PHOENIX", REPO / ".venv-phoenix" / "bin" / "phoenix"))
START_S = 420.0
"""How long Phoenix may take to start (its first start migrates its database; CI is busy)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read().decode())


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    need(PHOENIX.exists(), f"the Phoenix test needs {PHOENIX} (make phoenix)")
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = _free_port(), _free_port()
    env = {
        **os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }  # fmt: skip
    log = (work / "phoenix.log").open("w")
    proc = subprocess.Popen(
        [str(PHOENIX), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while True:
            if proc.poll() is not None:
                pytest.fail("Phoenix exited: " + (work / "phoenix.log").read_text()[-2000:])
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"Phoenix did not start in {START_S:g} s")
            time.sleep(1.0)
        yield base
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _is_request(span: dict[str, Any]) -> bool:
    """A request's root (not a decision noted outside one, which is a span of its own)."""
    return bool(span["name"].startswith("invoke_"))


def _spans(base: str, project: str, want: int) -> list[dict[str, Any]]:
    """The project's spans once ``want`` traces have their roots there (bounded wait)."""
    deadline = time.monotonic() + 120
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            found = _get(f"{base}/v1/projects/{project}/spans?limit=1000")["data"]
        except OSError:
            found = []
        roots = [s for s in found if s["parent_id"] is None and _is_request(s)]
        if len({s["context"]["trace_id"] for s in roots}) >= want:
            return found
        time.sleep(0.5)
    pytest.fail(f"Phoenix holds {len(found)} spans of project {project}, not {want} traces")


def test_a_pause_and_a_resume_in_two_processes_are_two_joined_traces_in_phoenix(
    phoenix: str, tmp_path: Path
) -> None:
    need_module("opentelemetry.exporter.otlp.proto.http", "the otlp extra")
    project = "intermission-" + uuid.uuid4().hex[:8]
    env = {
        **os.environ, "INTERMISSION_OTEL": "1",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{phoenix}/v1/traces",
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
        "OTEL_SERVICE_NAME": "intermission-test",
    }  # fmt: skip
    store = str(tmp_path / "bank.db")
    paused = subprocess.run(
        [sys.executable, str(REPO / "tests/otel/_phoenix_agents.py"), store, "t-1"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert paused.returncode == 0 and paused.stdout.strip() == "OK", paused.stderr
    approved = subprocess.run(
        [sys.executable, "-m", "intermission", "--agents", "tests.otel._phoenix_agents:AGENTS",
         "approve", "t-1", "--reviewer", "ann", "--store", store],
        env=env, capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert approved.returncode == 0, approved.stderr
    assert "session t-1 done" in approved.stdout

    spans = _spans(phoenix, project, 2)
    tops = sorted((s for s in spans if s["parent_id"] is None), key=lambda s: s["start_time"])
    roots = [r for r in tops if _is_request(r)]
    assert [r["name"] for r in roots] == ["invoke_agent bank", "invoke_agent bank"]
    # the CLI's decisions, recorded before the resume runs: spans of their own (audit notes)
    noted = [r for r in tops if not _is_request(r)]
    assert noted and {r["name"] for r in noted} == {"intermission.decision.recorded"}
    first, second = roots
    assert first["context"]["trace_id"] != second["context"]["trace_id"]
    for root in roots:
        assert root["attributes"]["gen_ai.conversation.id"] == "t-1"
        assert root["status_code"] == "UNSET"  # a pause is not an error
    (pause,) = [e for e in first["events"] if e["name"] == "intermission.pause"]
    pause_id = pause["attributes"]["intermission.pause.id"]
    assert pause["attributes"]["intermission.pause.tools"] == ["transfer"]
    a = second["attributes"]
    assert a["intermission.link.trace_id"] == first["context"]["trace_id"]
    assert a["intermission.link.span_id"] == first["context"]["span_id"]
    assert a["intermission.link.type"] == "resume" and a["intermission.pause.id"] == pause_id
    assert a["intermission.pause.duration_ms"] >= 0
    decisions = [e for e in second["events"] if e["name"] == "intermission.decision.applied"]
    (decision,) = decisions
    assert decision["attributes"]["intermission.decision.verdict"] == "approve"
    # the CLI decides as the OS user (--reviewer is only a display name)
    assert decision["attributes"]["intermission.decision.principal"] == os_principal().name
    assert not [e for e in first["events"] if e["name"] == "intermission.decision.applied"]
    tools = [s for s in spans if s["name"] == "execute_tool transfer"]
    assert len(tools) == 1 and tools[0]["context"]["trace_id"] == second["context"]["trace_id"]
    assert tools[0]["attributes"]["intermission.tool.executed"] is True
    assert tools[0]["parent_id"] == second["context"]["span_id"]
