"""Issue 39, attacked: a store written by intermission from before the audit trail (its
sources checked out of git at the commit before the trail), opened by this one: migrated
(several processes at once), and a session decided then is not passed as intact — it has
no records — but ``--verify`` says the likelier story, and names its unnamed reviewer as
such (it said "the decision of None"). Through the CLI, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

from tests._helpers import need
from tests.stores.test_audit_missing import sql, target

__all__ = ["target"]

BEFORE_THE_TRAIL = "1d5e84f^"  # (the commit before audit.py was added)
ROOT = Path(__file__).resolve().parents[2]


def _old_sources(into: Path) -> Path:
    archive = into / "old.tar"
    try:
        with archive.open("wb") as out:
            subprocess.run(["git", "archive", BEFORE_THE_TRAIL, "src"], cwd=ROOT, stdout=out,
                           check=True, timeout=120, stderr=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        need(False, "the pre-trail store test needs the git history of intermission (a clone)")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _run(src: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": src}
    env.pop("INTERMISSION_AUDIT_KEY", None)
    return subprocess.run([sys.executable, "-m", "intermission", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120)  # fmt: skip


def test_a_session_decided_before_the_trail_says_so(target: str, tmp_path: Path) -> None:
    old = str(_old_sources(tmp_path))
    new = os.pathsep.join(sys.path)
    if target.startswith("postgresql://"):  # (the old schema from scratch)
        run = sql(target)
        tables = [t for (t,) in run("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        if tables:
            run("DROP TABLE IF EXISTS " + ", ".join(tables) + " CASCADE")
    assert _run(old, "demo", "--store", target, cwd=tmp_path).returncode == 0
    decided = _run(old, "approve", "change-001", "--store", target, cwd=tmp_path)
    assert decided.returncode == 0, decided.stderr
    opened = [
        subprocess.Popen([sys.executable, "-m", "intermission", "pending", "--store", target],
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": new},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]  # fmt: skip
    for p in opened:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    checked = _run(new, "audit", "change-001", "--verify", "--store", target, cwd=tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    out = checked.stdout
    assert "no record of the decision of an unnamed reviewer (APPROVE)" in out, out
    assert "decided before its store kept an audit trail" in out, out
    assert "None" not in out
