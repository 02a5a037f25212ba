"""The CLI round trip in real processes: demo, pending, approve, show (issue 5)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from intermission.cli import main
from intermission.principals import os_principal
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
    # the OS user decided; --reviewer alice is a display name (never the identity). No
    # identity file maps it: user@host, asserted, no roles (OS groups grant none)
    me = os_principal()
    assert session.status == "done" and session.context["approval.operator"] == me.name
    assert session.context["approval.by"] == {"name": me.name, "via": "cli", "display": "alice"}
    assert session.requester is not None and session.requester.name == me.name  # the demo asked
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
    assert err[0].startswith(
        "error: session 'change-001' is done: nothing waits for a decision (someone may have "
        f"resumed it already); its last decision was REJECT by {os_principal().name} at "
    ) and err[0].endswith(" UTC; nothing was changed")  # names what decided it (issue 24)
    assert "store.claim" not in err[0]  # plain language: no Python call to make (issue 29)
    assert err[1:] == ["error: no stored session 'missing'"]


def test_cli_approves_a_react_agents_tool_call_paused_in_another_process(tmp_path: Path) -> None:
    # the agent is built anew by the CLI process: its scripted model must go on with its
    # next reply, not ask for the approved tool again
    (tmp_path / "ops_app.py").write_text(
        "from intermission import (HITLInterceptor, InMemoryAgentSession, ReActAgent,\n"
        "                          ScriptedModel, ToolCall, tool)\n"
        "from intermission.stores import SQLiteStore\n"
        "@tool\n"
        "def delete_user(user_id: int) -> str:\n"
        "    '''Delete a user account.'''\n"
        "    return f'user {user_id} deleted'\n"
        "def build():\n"
        "    call = ToolCall('delete_user', {'user_id': 7})\n"
        "    model = ScriptedModel([[call], 'User 7 deleted.'])\n"
        "    return (ReActAgent.of(model).name('ops').tools(delete_user)\n"
        "            .interceptor(HITLInterceptor().on_tool('delete_user')).build())\n"
        "AGENTS = {'ops': build}\n"
        "if __name__ == '__main__':\n"
        "    import sys\n"
        "    s = InMemoryAgentSession.of('ops-1')\n"
        "    build().prompt('delete user 7').session(s).call()\n"
        "    SQLiteStore(sys.argv[1]).save(s)\n"
    )
    store = str(tmp_path / "ops.sqlite")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    subprocess.run([sys.executable, "ops_app.py", store], cwd=tmp_path, env=env, check=True)
    approve = subprocess.run(
        [sys.executable, "-m", "intermission", "--agents", "ops_app:AGENTS",
         "approve", "ops-1", "--reviewer", "bob", "--store", store],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60,
    )  # fmt: skip
    assert approve.returncode == 0, approve.stderr
    assert approve.stdout.splitlines() == ["session ops-1 done", "User 7 deleted."]
    session = SQLiteStore(store).load("ops-1")
    ends = [e for e in session.events if e.kind == "tool_call_end"]
    assert session.status == "done" and len(ends) == 1 and ends[0].observation == "user 7 deleted"
