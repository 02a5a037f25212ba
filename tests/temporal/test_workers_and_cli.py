"""Workers as separate processes (one killed inside the approved tool, another finishing
it) and the CLI deciding a workflow's approval, against a real dev server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.temporal.conftest import ROOT, cli
from tests.temporal.test_workflow_decisions import ALICE, actions, lines, started

from intermission import Actor

pytestmark = pytest.mark.timeout(300)


def worker_process(url: str, queue: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """``python -m intermission worker`` serving the test agents; returns once it serves."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "intermission", "worker", "--store", url,
         "--agents", "tests.temporal.agents:AGENTS", "--task-queue", queue],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("worker on "), first
    return proc


@pytest.fixture
def bare_store(server: str, queue: str, effects: Path) -> Iterator[Any]:
    """A TemporalStore with no worker in this process."""
    from intermission.stores import open_store

    s = open_store(server, task_queue=queue)
    yield s
    s.close()


def test_a_worker_killed_inside_the_approved_tool_is_replaced_and_the_effect_happens_once(
    server: str, queue: str, bare_store: Any, effects: Path, tmp_path: Path
) -> None:
    slow = tmp_path / "slow"
    slow.write_text("wait inside the tool")
    env = {"IM_TEMPORAL_SLOW": str(slow)}
    first = worker_process(server, queue, env)
    second = None
    try:
        started(bare_store, "ops", "t-killed")
        outcome: list[Any] = []
        decider = threading.Thread(
            target=lambda: outcome.append(bare_store.decide("t-killed", "approve", principal=ALICE))
        )
        decider.start()
        marker = Path(str(slow) + ".started")
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert time.monotonic() < deadline, "the approved tool never started"
            time.sleep(0.05)
        assert marker.read_text() == str(first.pid)
        os.killpg(first.pid, signal.SIGKILL)  # inside the tool, before its effect
        first.wait(10)
        slow.unlink()
        killed_at = time.monotonic()
        second = worker_process(server, queue, env)
        decider.join(90)
        assert not decider.is_alive(), "the decision never came back"
        assert time.monotonic() - killed_at < 60  # replaced within a minute
        assert outcome[0].status == "done"
        # the effect happened once, by the second worker
        assert lines(effects) == [f"ops:7:{second.pid}"]
        assert actions(bare_store, "t-killed").count("effect.finished") == 1
    finally:
        for proc in (first, second):
            if proc is not None:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(20)
                assert proc.stdout is not None
                proc.stdout.close()


def test_the_cli_lists_shows_decides_and_audits_a_workflow(
    server: str, queue: str, store: Any, effects: Path, tmp_path: Path
) -> None:
    started(store, "ops", "t-cli-a")
    started(store, "quorum", "t-cli-q", requester=Actor(name="carol", authenticated=True))
    time.sleep(1.5)  # (visibility is eventually consistent)
    q = ["--store", f"{server}?task_queue={queue}"]  # (the sessions of this test's queue)
    listed = cli("pending", *q)
    assert listed.returncode == 0, listed.stderr
    assert "t-cli-a" in listed.stdout and "t-cli-q" in listed.stdout
    shown = cli("show", "t-cli-a", *q)
    assert shown.returncode == 0 and "delete_user" in shown.stdout, shown.stderr

    # an asserted OS user may not count toward a quorum: refused by the validator, exit 2
    refused = cli("approve", "t-cli-q", *q)
    assert refused.returncode == 2
    assert "nothing was changed" in refused.stderr or "refused" in refused.stderr.lower()

    rejected = cli("reject", "t-cli-a", "--reason", "not today", *q)
    assert rejected.returncode == 0, rejected.stderr
    assert "done" in rejected.stdout
    assert lines(effects) == []
    audited = cli("audit", "t-cli-a", "--verify", *q)
    assert audited.returncode == 0, audited.stderr
    assert "chain intact" in audited.stdout
    trail = cli("audit", "t-cli-q", *q)
    assert '"decision.refused"' in trail.stdout
