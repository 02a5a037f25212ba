"""The CLI round trip in real processes: demo, pending, approve, show (issue 5)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from intermission.cli import main
from intermission.stores import SQLiteStore


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=60,
    )  # fmt: skip


def test_cli_round_trip(tmp_path: Path) -> None:
    store = str(tmp_path / "demo.sqlite")
    demo = cli("demo", "--store", store, cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert "session change-001 is pending: Change plan awaits human review" in demo.stdout
    assert "python -m intermission approve change-001" in demo.stdout
    pending = cli("pending", "--store", store, cwd=tmp_path)
    assert "change-001" in pending.stdout and "Change plan awaits human review" in pending.stdout
    approve = cli("approve", "change-001", "--reviewer", "alice", "--store", store, cwd=tmp_path)
    assert approve.returncode == 0, approve.stderr
    assert "session change-001 done" in approve.stdout
    assert cli("pending", "--store", store, cwd=tmp_path).stdout.strip() == "no pending sessions"
    session = SQLiteStore(store).load("change-001")
    assert session.status == "done" and session.context["approval.operator"] == "alice"
    assert session.context["change.result"] == "applied change-001"
    assert session.ledger["change-001/execute"].status == "completed"


def test_cli_reject_path_and_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "r.sqlite")
    assert main(["demo", "--store", store]) == 0
    assert main(["reject", "change-001", "--reason", "no window", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "Change rejected: no window" in out
    assert main(["approve", "change-001", "--store", store]) == 2
    assert main(["show", "missing", "--store", store]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: session 'change-001' is not waiting for a decision",
        "error: no stored session 'missing'",
    ]
