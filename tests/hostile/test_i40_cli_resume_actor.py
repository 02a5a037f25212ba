"""Issue 40 hostile: ``python -m intermission resume`` that migrates a session (its table's
newer version migrates the paused one) or adopts it (``--adopt``) must put the CLI's
principal (the OS user, as ``--auth`` maps it) on the audit trail as who did it, as
``approve`` and ``migrate`` do. Found: both were recorded with no actor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.agents import _versioned as V

from intermission import InMemoryAgentSession
from intermission.stores import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.agents._versioned"


def _paused_v1(tmp_path: Path) -> Path:
    path = tmp_path / "app.sqlite"
    store = SQLiteStore(path)
    s = InMemoryAgentSession.of("s1")
    V.ops_v1().prompt("scale the service").session(s).call()
    store.save(s)
    store.close()
    V.RUNS.clear()
    return path


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    env["IM_EFFECT_FILE"] = str(tmp_path / "runs.jsonl")
    for key in ("INTERMISSION_STORE", "INTERMISSION_AUTH"):
        env.pop(key, None)
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args, "--store", str(tmp_path / "app.sqlite")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip


def _entries(path: Path, action: str) -> list[object]:
    store = SQLiteStore(path)
    try:
        return [e for e in store.audit("s1") if e.action == action]
    finally:
        store.close()


def test_cli_resume_that_migrates_records_who_migrated(tmp_path: Path) -> None:
    path = _paused_v1(tmp_path)
    done = _cli(tmp_path, "resume", "s1", "--agents", f"{MODULE}:V2")
    assert done.returncode == 0, done.stderr
    (migrated,) = _entries(path, "agent.migrated")
    assert migrated.actor, "a migration through the CLI names who ran it"  # type: ignore[attr-defined]
    assert migrated.via == "cli"  # type: ignore[attr-defined]
    assert not (tmp_path / "runs.jsonl").exists()  # the rewritten call waits for approval


def test_cli_resume_adopt_records_who_adopted(tmp_path: Path) -> None:
    path = _paused_v1(tmp_path)
    done = _cli(tmp_path, "resume", "s1", "--adopt", "--agents", f"{MODULE}:V2_ONLY_UNMIGRATING")
    assert done.returncode == 0, done.stderr
    (adopted,) = _entries(path, "agent.adopted")
    assert adopted.actor, "an adoption through the CLI names who adopted"  # type: ignore[attr-defined]
    assert adopted.via == "cli"  # type: ignore[attr-defined]
