"""A callable approver policy (``.approvers(lambda reviewer, task: ...)``) binds every way
a decision is made (R23c): the CLI, decide_and_resume with a plain ``HITL.submit_all``, and
HITL.submit on a session loaded from a store. Before, with no agent at hand the policy was
skipped (it lives in the agent, not the snapshot) and mallory's approval ran the tool.
Now the CLI and decide_and_resume pass the agent they resume; a task whose approvers are a
policy refuses any decision without that agent (fail closed); and the resume re-checks the
reviewer against the running agent's policy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.faults._helpers import lines
from tests.hitl._policy_agents import ops_agent

from intermission import (
    HITL,
    HITLDecision,
    HITLTask,
    InMemoryAgentSession,
    ReviewerNotAllowedError,
)
from intermission.principals import os_principal
from intermission.stores import SQLiteStore, decide_and_resume

AGENTS = "tests.hitl._policy_agents:AGENTS"


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects"
    monkeypatch.setenv("IM_EFFECT_FILE", str(path))
    return path


def _pending(store: Any, sid: str) -> None:
    s = InMemoryAgentSession.of(sid)
    ops_agent().prompt("delete 1001").session(s).call()
    assert s.is_pending
    store.save(s)


def cli(
    *args: str, cwd: Path, effects: Path, allowed: str = "alice"
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "IM_EFFECT_FILE": str(effects),
        "IM_ALLOWED": allowed,
    }  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "intermission", "--agents", AGENTS, *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=120,
    )  # fmt: skip


def test_the_cli_refuses_a_reviewer_the_policy_does_not_allow(
    tmp_path: Path, effects: Path
) -> None:
    """The CLI decides as its OS user: ``--reviewer alice`` is a display name, and does not
    make the OS user alice."""
    path = str(tmp_path / "p.sqlite")
    store = SQLiteStore(path)
    _pending(store, "s")
    row = store.raw_row("s")
    me = os_principal().name
    for verb in (["approve"], ["reject", "--reason", "no"]):
        for shown in ("mallory", "alice"):
            out = cli(*verb, "s", "--reviewer", shown, "--store", path, cwd=tmp_path,
                      effects=effects)  # fmt: skip
            assert out.returncode == 2, out.stdout + out.stderr
            assert out.stderr.startswith("error: ") and f"{me!r} may not decide" in out.stderr
    assert store.raw_row("s") == row and lines(effects) == 0
    ok = cli("approve", "s", "--reviewer", "alice", "--store", path, cwd=tmp_path,
             effects=effects, allowed=me)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0] == "session s done" and lines(effects) == 1
    store.close()


def test_decide_and_resume_checks_the_policy_of_the_agent_it_resumes(
    make_store: Any, effects: Path
) -> None:
    store = make_store()
    _pending(store, "s")
    row = store.raw_row("s")

    def as_(reviewer: str) -> Any:
        return lambda s: HITL.submit_all(
            s, {t.call_uuid: HITLDecision.approve().reviewer(reviewer) for t in s.hitl.tasks}
        )

    with pytest.raises(ReviewerNotAllowedError, match="'mallory' may not decide"):
        decide_and_resume(store, "s", as_("mallory"), ops_agent())
    with pytest.raises(ReviewerNotAllowedError):  # a factory of agents by name: the same
        decide_and_resume(store, "s", as_("mallory"), lambda name: ops_agent())
    assert store.raw_row("s") == row and lines(effects) == 0
    out = decide_and_resume(store, "s", as_("alice"), ops_agent())
    assert out.response.content == "Done: user 1001 deleted." and lines(effects) == 1


def test_a_policy_task_refuses_every_decision_without_its_agent(make_store: Any) -> None:
    """Fail closed: no agent at hand means nobody can be judged allowed, alice included."""
    store = make_store()
    _pending(store, "s")
    s = store.load("s")
    (task,) = HITL.pending_tasks(s)
    assert task.approver_policy and task.approvers is None  # the policy is not in the row
    before = s.to_json()
    for refused in (
        lambda: HITL.submit(s, task, HITLDecision.approve().reviewer("alice")),
        lambda: HITL.submit_all(s, {task.call_uuid: HITLDecision.reject("no")}),
        lambda: HITL.approve_all(s, reviewer="alice"),
        lambda: HITL.reject_all(s, "no", reviewer="alice"),
    ):
        with pytest.raises(ReviewerNotAllowedError, match="pass the agent"):
            refused()
    assert s.to_json() == before
    with pytest.raises(ReviewerNotAllowedError, match="'mallory' may not decide"):
        HITL.approve_all(s, reviewer="mallory", agent=ops_agent())
    assert s.to_json() == before
    (record,) = HITL.approve_all(s, reviewer="alice", agent=ops_agent())
    assert record.reviewer == "alice"


def test_the_resume_voids_a_decision_its_policy_does_not_allow(
    make_store: Any, effects: Path
) -> None:
    """Defense in depth: mallory's approval, recorded against a laxer instance, is not
    applied by the agent whose policy refuses her; the call waits again."""
    store = make_store()
    _pending(store, "s")
    s = store.load("s")
    HITL.approve_all(s, reviewer="mallory", agent=ops_agent(lambda reviewer, task: True))
    store.save(s)
    with store.resume("s") as s:
        ops_agent().prompt().session(s).call()
    after = store.load("s")
    assert after.is_pending and after.hitl.decisions == {} and lines(effects) == 0
    assert [t.tool_name for t in HITL.pending_tasks(after)] == ["delete_user"]
    decided = [e for e in after.events if e.kind == "hitl_decided"]
    assert decided == []


def test_a_task_from_an_older_snapshot_has_no_policy_flag() -> None:
    old = HITLTask.model_validate({"call_uuid": "c", "tool_name": "t"})
    assert old.approver_policy is False
