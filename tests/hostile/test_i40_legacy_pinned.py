"""Issue 40 hostile: a store written by an earlier release, its session paused before
fingerprints or versions were recorded (fixtures schema1-3, schema5), approved through
the CLI with ``--agents`` serving the legacy agent as it was and a labelled v2 beside it
(``delete_user`` gained ``hard: bool = True``). The approved call must run on the agent
that made it — the legacy one, still served — not on v2's code with an argument the
reviewer never saw. Found: the table picked the newest version (v2 ran, hard=True)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "legacy" / "fixtures"
INDEX = json.loads((FIXTURES / "fixtures.json").read_text())
UNFINGERPRINTED = sorted(n for n, v in INDEX.items() if v["fingerprint"] is None)


@pytest.mark.parametrize("name", UNFINGERPRINTED)
def test_a_legacy_session_runs_on_the_legacy_agent_not_the_newest(
    name: str, tmp_path: Path
) -> None:
    path = tmp_path / "legacy.sqlite"
    shutil.copyfile(FIXTURES / INDEX[name]["sqlite"], path)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    env["IM_EFFECT_FILE"] = str(tmp_path / "runs.jsonl")
    for key in ("INTERMISSION_STORE", "INTERMISSION_AUTH"):
        env.pop(key, None)
    done = subprocess.run(
        [sys.executable, "-m", "intermission", "approve", "paused", "--agents",
         "tests.hostile._i40_agents:LEGACY_BOTH", "--store", str(path)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "runs.jsonl").exists(), "v2's tool ran the legacy approval"
    assert "user 1001 deleted." in done.stdout
