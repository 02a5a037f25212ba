"""R62 through the CLI, as subprocesses on a SQLite file: with ``--agents`` serving
``{"ops": [v1, v2]}`` a session paused on v1 is approved and run by v1 (pinned);
``migrate ID --to 2`` moves it on purpose (its call rewritten, its approval open again,
the migration audited as the OS user) and ``approve`` then runs v2's tool once with the new
arguments; an unserved version, a target not served, one that does not migrate and an
upcaster that raises are each one line on stderr, exit 2, with the stored row unchanged
and no tool run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.agents import _versioned as V

from intermission import InMemoryAgentSession
from intermission.stores import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
MODULE = "tests.agents._versioned"


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """A SQLite store holding ``s1`` paused on ops@1 for approval of ``scale``."""
    store = SQLiteStore(tmp_path / "app.sqlite")
    s = InMemoryAgentSession.of("s1")
    V.ops_v1().prompt("scale the service").session(s).call()
    store.save(s)
    store.close()
    V.RUNS.clear()
    return tmp_path


def cli(app: Path, *args: str, agents: str = "AGENTS") -> subprocess.CompletedProcess[str]:
    """``python -m intermission`` on this worktree's code (PYTHONPATH passed through)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    env["IM_EFFECT_FILE"] = str(app / "runs.jsonl")
    env.pop("INTERMISSION_STORE", None)
    env.pop("INTERMISSION_AUTH", None)
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args, "--agents", f"{MODULE}:{agents}",
         "--store", str(app / "app.sqlite")],
        capture_output=True, text=True, cwd=app, env=env, timeout=120,
    )  # fmt: skip


def runs(app: Path) -> list[Any]:
    path = app / "runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def row(app: Path) -> Any:
    store = SQLiteStore(app / "app.sqlite")
    try:
        return store.raw_row("s1")
    finally:
        store.close()


def stored(app: Path) -> Any:
    store = SQLiteStore(app / "app.sqlite")
    try:
        return store.load("s1"), store.audit("s1")
    finally:
        store.close()


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert done.stdout == ""
    return lines[0]


def test_approve_with_both_versions_served_runs_the_paused_version(app: Path) -> None:
    done = cli(app, "approve", "s1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "session s1 done"
    assert runs(app) == [["1", {"replicas": 3}]]
    s, trail = stored(app)
    assert s.agent_version == "1" and "agent.migrated" not in [r.action for r in trail]


def test_migrate_then_approve_runs_the_new_version_once_with_the_new_arguments(
    app: Path,
) -> None:
    moved = cli(app, "migrate", "s1", "--to", "2")
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.splitlines()[0] == (
        "migrated session s1: ops 1 → 2 (the call scale's approval starts over)"
    )
    assert moved.stderr == "" and runs(app) == []
    s, trail = stored(app)
    assert s.is_pending and s.agent_version == "2"
    assert [t.args for t in s.hitl.tasks] == [{"replicas": 3, "zone": "eu-1"}]
    (migrated,) = [r for r in trail if r.action == "agent.migrated"]
    assert migrated.via == "cli" and migrated.actor  # the OS user running the command
    assert migrated.reason == "migrated ops 1 → 2"
    again = cli(app, "migrate", "s1", "--to", "2")  # on it already: nothing changes
    assert again.returncode == 0 and "already" in again.stdout
    approved = cli(app, "approve", "s1")
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.splitlines()[0] == "session s1 done"
    assert runs(app) == [["2", {"replicas": 3, "zone": "eu-1"}]]
    assert [r.action for r in stored(app)[1]].count("agent.migrated") == 1


@pytest.mark.parametrize("command", ["approve", "resume"])
def test_an_unserved_version_is_one_line_exit_2_and_nothing_runs(app: Path, command: str) -> None:
    before = row(app)
    line = one_line_error(cli(app, command, "s1", agents="V2_ONLY_UNMIGRATING"))
    assert "ops@1" in line and "ops@2" in line and "nothing was changed" in line
    assert runs(app) == [] and row(app) == before


@pytest.mark.parametrize(
    ("agents", "to", "said"),
    [
        ("AGENTS", "3", "ops@3: that version is not served here (served: ops@1, ops@2)"),
        ("V2_ONLY_UNMIGRATING", "2", "ops@2 does not migrate from version '1'"),
        ("V2_RAISING", "2", "failed: RuntimeError: upcaster exploded"),
        ("AGENTS", "1", "ops@1 already"),
    ],
)
def test_migrate_refusals_are_one_line_exit_2_and_leave_the_row(
    app: Path, agents: str, to: str, said: str
) -> None:
    before = row(app)
    done = cli(app, "migrate", "s1", "--to", to, agents=agents)
    if to == "1":  # (its own version: said, exit 0, nothing written)
        assert done.returncode == 0 and said in done.stdout
    else:
        line = one_line_error(done)
        assert said in line and "nothing was changed" in line
    assert row(app) == before and runs(app) == []
    _, trail = stored(app)
    assert not [r for r in trail if r.action in ("agent.migrated", "task.rewritten")]


def test_resume_with_only_v1_served_stays_pinned(app: Path) -> None:
    done = cli(app, "resume", "s1", agents="V1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("session s1 pending")  # no decision yet: it waits again
    assert runs(app) == [] and stored(app)[0].agent_version == "1"
