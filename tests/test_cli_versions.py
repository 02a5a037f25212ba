"""The command line's agent versions (R62), in real processes: ``versions [--json]``,
``pending --version``, the version ``show`` and ``pending`` name, and the one-line refusal
of a malformed ``--version``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, pg_dsn

from intermission.errors import _utc
from intermission.stores import SQLiteStore
from intermission.testing.conformance import paused_ops


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=60,
    )  # fmt: skip


SESSIONS = [("o1", "ops", "1"), ("o2", "ops", "1"), ("o3", "ops", "2"), ("b1", "billing", None)]


def _fill(store: Any) -> dict[str, float]:
    """The sessions above, paused; returns when each became pending."""
    for sid, agent, version in SESSIONS:
        s = paused_ops(sid)
        s.agent, s.agent_version = agent, version
        store.save(s)
    return {p.session_id: p.pending_since for p in store.pending()}


@pytest.fixture
def sqlite_store(tmp_path: Path) -> tuple[str, dict[str, float]]:
    path = str(tmp_path / "v.sqlite")
    store = SQLiteStore(path)
    try:
        return path, _fill(store)
    finally:
        store.close()


def test_versions_lists_paused_sessions_per_agent_version(
    sqlite_store: tuple[str, dict[str, float]], tmp_path: Path
) -> None:
    path, since = sqlite_store
    out = cli("versions", "--store", path, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["AGENT", "VERSION", "PAUSED", "OLDEST", "PAUSE"]
    rows = [line.split(maxsplit=3) for line in lines[1:]]
    assert rows == [
        ["billing", "-", "1", _utc(since["b1"])],
        ["ops", "1", "2", _utc(min(since["o1"], since["o2"]))],
        ["ops", "2", "1", _utc(since["o3"])],
    ]


def test_versions_json(sqlite_store: tuple[str, dict[str, float]], tmp_path: Path) -> None:
    path, since = sqlite_store
    out = cli("versions", "--json", "--store", path, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert [(e["agent"], e["version"], e["label"], e["paused"]) for e in listed] == [
        ("billing", None, "billing", 1),
        ("ops", "1", "ops@1", 2),
        ("ops", "2", "ops@2", 1),
    ]
    oldest = datetime.fromisoformat(listed[1]["oldest_pause"].replace("Z", "+00:00"))
    assert listed[1]["oldest_pause"].endswith("Z") and oldest.utcoffset() == timedelta(0)
    assert abs(oldest.timestamp() * 1000 - min(since["o1"], since["o2"])) < 1


def test_versions_of_an_empty_store(tmp_path: Path) -> None:
    path = str(tmp_path / "empty.sqlite")
    SQLiteStore(path).close()
    out = cli("versions", "--store", path, cwd=tmp_path)
    assert (out.returncode, out.stdout.strip()) == (0, "no paused sessions")
    out = cli("versions", "--json", "--store", path, cwd=tmp_path)
    assert (out.returncode, json.loads(out.stdout)) == (0, [])


def _listed(stdout: str) -> list[tuple[str, str]]:
    """(session, agent column) of each row ``pending`` printed."""
    lines = stdout.splitlines()
    assert lines[0].split()[:2] == ["SESSION", "AGENT"], stdout
    return [(line.split()[0], line.split()[1]) for line in lines[1:]]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--version", "ops@1"], [("o2", "ops@1"), ("o1", "ops@1")]),
        (["--version", "2"], [("o3", "ops@2")]),
        (["--version", "1", "--agent", "ops"], [("o2", "ops@1"), ("o1", "ops@1")]),
        ([], [("b1", "billing"), ("o3", "ops@2"), ("o2", "ops@1"), ("o1", "ops@1")]),
    ],
)
def test_pending_by_version(
    sqlite_store: tuple[str, dict[str, float]],
    tmp_path: Path,
    options: list[str],
    expected: list[tuple[str, str]],
) -> None:
    path, _ = sqlite_store
    out = cli("pending", *options, "--store", path, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert _listed(out.stdout) == expected


def test_pending_of_a_version_nobody_paused_under(
    sqlite_store: tuple[str, dict[str, float]], tmp_path: Path
) -> None:
    path, _ = sqlite_store
    out = cli("pending", "--version", "ops@9", "--store", path, cwd=tmp_path)
    assert (out.returncode, out.stdout.strip()) == (0, "no pending sessions")


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--version", "@"], "error: --version is 'VERSION' or 'AGENT@VERSION'"),
        (["--version", "ops@"], "error: --version is 'VERSION' or 'AGENT@VERSION'"),
        (["--version", "@1"], "error: --version is 'VERSION' or 'AGENT@VERSION'"),
        (["--version", "ops@1", "--agent", "billing"], "error: --version 'ops@1' names agent"),
    ],
)
def test_a_malformed_version_is_one_line_and_exit_2(
    tmp_path: Path, options: list[str], said: str
) -> None:
    # (refused before any store is opened: the store named does not exist)
    missing = str(tmp_path / "nothing-here.sqlite")
    out = cli("pending", *options, "--store", missing, cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith(said) and out.stderr.count("\n") == 1, out.stderr
    assert not Path(missing).exists()


def test_show_names_the_agent_version(
    sqlite_store: tuple[str, dict[str, float]], tmp_path: Path
) -> None:
    path, _ = sqlite_store
    out = cli("show", "o3", "--store", path, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    status = next(line for line in out.stdout.splitlines() if line.startswith("status:"))
    assert status.split("   ") == ["status:", "pending", "agent: ops@2", "store version: 1"]
    out = cli("show", "b1", "--store", path, cwd=tmp_path)  # (paused before versions)
    assert "   agent: billing   " in out.stdout


def test_versions_on_postgres(tmp_path: Path) -> None:
    store = fresh_pg()
    try:
        _fill(store)
    finally:
        store.close()
    url = pg_dsn()  # (the database fresh_pg emptied)
    out = cli("versions", "--json", "--store", url, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    labels = [(e["label"], e["paused"]) for e in listed]
    assert labels == [("billing", 1), ("ops@1", 2), ("ops@2", 1)]
    out = cli("pending", "--version", "ops@2", "--store", url, cwd=tmp_path)
    assert _listed(out.stdout) == [("o3", "ops@2")]
