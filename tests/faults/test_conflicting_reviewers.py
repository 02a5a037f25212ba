"""Issue 13.2 / R39: the first decision wins. alice approves (saved, not yet applied); bob's
reject — through the CLI, the API or the Inbox — is refused with DecisionConflictError
naming alice, and nothing changes. Before R39 bob's reject wrote ``approval.decision =
REJECT`` next to alice's approved tool call, resumed, ran the tool and exited 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.faults._helpers import tally

from intermission import (
    HITL,
    DecisionConflictError,
    HITLDecision,
    InMemoryAgentSession,
    decide_graph,
)
from intermission.examples import build_ops_agent
from intermission.stores import SQLiteStore


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=120,
    )  # fmt: skip


def _alice_approved_ops(store: Any, sid: str) -> None:
    s = InMemoryAgentSession.of(sid)
    build_ops_agent().prompt("delete user 1001").session(s).call()
    store.save(s)
    s = store.load(sid)
    (task,) = HITL.pending_tasks(s)
    HITL.submit(s, task, HITLDecision.approve().reviewer("alice").comment("ticket 42"))
    store.save(s)  # saved, not yet applied


def _ran_tools(store: Any, sid: str) -> int:
    return sum(e.kind == "tool_call_end" for e in store.load(sid).events)


def test_bob_rejecting_after_alice_approved_a_tool_call_is_refused_by_the_cli(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "ops.sqlite")
    store = SQLiteStore(path)
    _alice_approved_ops(store, "ops-1")
    before = store.raw_row("ops-1")
    bob = cli("reject", "ops-1", "--reason", "do NOT delete", "--reviewer", "bob",
              "--store", path, cwd=tmp_path)  # fmt: skip
    assert bob.returncode == 2, bob.stdout
    assert "already decided: approve by alice" in bob.stderr and "deleted" not in bob.stdout
    assert store.raw_row("ops-1") == before and _ran_tools(store, "ops-1") == 0
    # carol agrees with alice: the same decision is no conflict; the approval is applied
    carol = cli("approve", "ops-1", "--reviewer", "carol", "--store", path, cwd=tmp_path)
    assert carol.returncode == 0, carol.stderr
    assert carol.stdout.splitlines()[-1] == "Done: user 1001 deleted (Note: ticket 42)."
    done = store.load("ops-1")
    (decided,) = [e for e in done.events if e.kind == "hitl_decided"]
    assert decided.decision.reviewer == "alice" and decided.decision.comment == "ticket 42"
    # bob once more: nothing is left to decide or resume
    late = cli("reject", "ops-1", "--reason", "too late", "--store", path, cwd=tmp_path)
    assert late.returncode == 2 and "nothing waits for a decision" in late.stderr
    assert _ran_tools(store, "ops-1") == 1
    store.close()
    tally("bob after alice: tool call, CLI", trials=1, effects=1, expected=1, refused=2)


def test_bob_rejecting_after_alice_approved_a_graph_is_refused_by_the_cli(tmp_path: Path) -> None:
    path = str(tmp_path / "change.sqlite")
    assert cli("demo", "--store", path, cwd=tmp_path).returncode == 0
    store = SQLiteStore(path)
    s = store.load("change-001")
    decide_graph(s, "APPROVE", reviewer="alice")
    store.save(s)
    before = store.raw_row("change-001")
    bob = cli("reject", "change-001", "--reason", "no", "--reviewer", "bob", "--store", path,
              cwd=tmp_path)  # fmt: skip
    assert bob.returncode == 2
    assert "the approval of session 'change-001' was already decided: APPROVE by alice" in (
        bob.stderr
    )
    assert store.raw_row("change-001") == before
    store.close()
    tally("bob after alice: graph, CLI", trials=1, effects=0, expected=0, refused=1)


@pytest.mark.parametrize("how", ["api", "inbox-code", "inbox-click"])
def test_bob_rejecting_after_alice_is_refused_by_the_api_and_the_inbox(
    how: str, make_store: Any
) -> None:
    store = make_store()
    _alice_approved_ops(store, "ops-2")
    before = store.load("ops-2").to_json()
    if how == "api":
        s = store.load("ops-2")
        with pytest.raises(DecisionConflictError, match="approve by alice"):
            HITL.reject_all(s, "do NOT delete", reviewer="bob")
        with pytest.raises(DecisionConflictError):
            decide_graph(s, "REJECT", reviewer="bob", reason="do NOT delete")
        assert s.to_json() == before
    else:
        from intermission.notebook import Inbox

        inbox = Inbox(store, {"ops": build_ops_agent})
        widget = inbox.open_session("ops-2")
        if how == "inbox-code":
            with pytest.raises(DecisionConflictError, match="approve by alice"):
                widget.reject_all("do NOT delete", reviewer="bob")
        else:
            widget.click("all", verdict="reject", reviewer="bob", reason="do NOT delete")
            widget.wait()
            assert isinstance(widget.runner.error, DecisionConflictError)
            assert "approve by alice" in widget.status
            assert "Your Reject all was not recorded" in widget.lost
    assert store.load("ops-2").to_json() == before and _ran_tools(store, "ops-2") == 0
    tally(f"bob after alice: {how}", trials=1, effects=0, expected=0, refused=1)
