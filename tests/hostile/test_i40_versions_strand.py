"""Issue 40 hostile: ``versions`` is how an operator knows a version can be retired
(README, "Deploying with paused sessions"). A session whose request ended resumably but not
on an approval (its model failed: status ``paused``) is still pinned to its version — a
server without that version refuses to resume it (AgentVersionError) — so ``versions``
must count it. Found: ``versions`` counts status ``pending`` only, says there is nothing
on ops@1, and retiring ops@1 then strands the session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.hostile._i40_agents import ops

from intermission import InMemoryAgentSession
from intermission.stores import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    env["IM_EFFECT_FILE"] = str(tmp_path / "runs.jsonl")
    for key in ("INTERMISSION_STORE", "INTERMISSION_AUTH", "IM_MODEL_DOWN"):
        env.pop(key, None)
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args, "--store", str(tmp_path / "app.sqlite")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip


def test_versions_counts_a_resumable_session_pinned_to_its_version(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "app.sqlite")
    s = InMemoryAgentSession.of("s1")
    os.environ["IM_MODEL_DOWN"] = "1"
    try:
        try:
            ops("1").prompt("look").session(s).call()
        except RuntimeError:
            pass
    finally:
        del os.environ["IM_MODEL_DOWN"]
    assert (s.status, s.agent, s.agent_version) == ("paused", "ops", "1")
    store.save(s)
    store.close()

    # a server of ops@2 only refuses it: it is pinned to ops@1
    refused = _cli(tmp_path, "resume", "s1", "--agents", "tests.hostile._i40_agents:V2")
    assert refused.returncode == 2 and "ops@1" in refused.stderr, refused.stderr

    listed = _cli(tmp_path, "versions", "--json")
    assert listed.returncode == 0, listed.stderr
    counts = {(c["agent"], c["version"]): c for c in json.loads(listed.stdout)}
    assert ("ops", "1") in counts, f"versions hides a session pinned to ops@1: {listed.stdout}"
