"""Issue 27, case 9 through the CLI, as a subprocess. A user's session — agent ``ops`` or
``change`` made by the user's own code — is never resumed with the bundled example of the
same name: without ``--agents`` the CLI refuses it in one line, exit 2, and changes
nothing (before: "done", exit 0, the user's tool never ran, the ledger said the effect
completed). ``--agents`` works before or after the command, the ``intermission`` script
finds modules in the current directory like ``python -m`` does, a bad ``--agents`` is one
line and exit 2, and ``--adopt`` hands a session to another agent on purpose."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests._helpers import need_module

from intermission.stores import SQLiteStore

APP = '''
import sys
from intermission import (END, GraphSpec, HITLInterceptor, InMemoryAgentSession, ReActAgent,
                          ScriptedModel, TeamAgent, ToolCall, tool)
from intermission.examples import change_approval_task
from intermission.stores import SQLiteStore

def _world(what):
    with open("world.txt", "a") as f:
        f.write(what + "\\n")

@tool
def delete_user(user_id: int) -> str:
    """Delete a user account (really)."""
    _world(f"deleted {user_id}")
    return f"user {user_id} deleted"

@tool
def audit(entry: str) -> str:
    """Audit log."""
    return "ok"

def _script(messages, tools):
    last = max(i for i, m in enumerate(messages) if m.role == "user")
    seen = [m.content for m in messages[last:] if m.role == "tool"]
    return f"Done: {seen[-1]}." if seen else [ToolCall("delete_user", {"user_id": 1001})]

def build_ops(*extra):
    return (ReActAgent.of(ScriptedModel(_script)).name("ops").tools(delete_user, *extra)
            .interceptor(HITLInterceptor().on_tool("delete_user")).build())

@tool
def apply_change(change_id: str) -> str:
    """Apply a change (really)."""
    _world(f"applied {change_id}")
    return f"applied {change_id}"

def build_change():
    proposal = (ReActAgent.of(ScriptedModel(["plan"] * 100)).name("proposal_agent")
                .output_key("change.proposal").build())
    def exe(messages, tools):
        seen = [m for m in messages if m.role == "tool"]
        return "executed" if seen else [ToolCall("apply_change", {"change_id": "c-1"})]
    executor = ReActAgent.of(ScriptedModel(exe)).name("executor_agent").tools(apply_change).build()
    spec = GraphSpec("change")
    spec.add_start().link_add("proposal_agent")
    spec.add_agent(proposal).link_add("approval")
    spec.add_activity("approval").task(change_approval_task).link_add("route")
    spec.add_exclusive("route").link_add(
        "executor_agent", when=lambda ctx: ctx.get("approval.decision") == "APPROVE"
    ).link_add(END)
    spec.add_agent(executor).link_add(END)
    spec.add_end()
    return TeamAgent.of().name("change").graph(spec).build()

AGENTS = {"ops": build_ops, "change": build_change}
WIDER = {"ops": lambda: build_ops(audit)}
NOT_A_MAPPING = [build_ops]
def _broken():
    raise RuntimeError("no database configured")
BROKEN = {"ops": _broken}
NOT_AN_AGENT = {"ops": lambda: 42}

if __name__ == "__main__":
    store = SQLiteStore(sys.argv[1])
    for sid, agent, prompt in (("s-1", build_ops(), "delete user 1001"),
                               ("c-1", build_change(), "upgrade")):
        s = InMemoryAgentSession.of(sid)
        agent.prompt(prompt).session(s).call()
        store.save(s)
'''


def run(*args: str, cwd: Path, script: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m intermission ...`` (or the ``intermission`` script) in ``cwd``, with
    no PYTHONPATH: modules there are found because the CLI looks in the current dir."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [script] if script else [sys.executable, "-m", "intermission"]
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def _make_app(where: Path) -> Path:
    (where / "app.py").write_text(APP)
    subprocess.run([sys.executable, "app.py", "app.sqlite"], cwd=where, check=True, timeout=120)
    return where


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """The user's app with its two paused sessions (for tests that change them)."""
    return _make_app(tmp_path)


@pytest.fixture(scope="module")
def untouched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same, shared by the tests that must change nothing."""
    return _make_app(tmp_path_factory.mktemp("untouched"))


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    return lines[0]


def _world(app: Path) -> list[str]:
    path = app / "world.txt"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize(
    ("sid", "command"),
    [("s-1", "approve"), ("s-1", "reject"), ("s-1", "resume"), ("c-1", "approve"),
     ("c-1", "resume")],
)  # fmt: skip
def test_without_agents_a_users_session_is_refused_and_unchanged(
    untouched: Path, sid: str, command: str
) -> None:
    app = untouched
    store = SQLiteStore(str(app / "app.sqlite"))
    row = store.raw_row(sid)
    extra = ["--reason", "no"] if command == "reject" else []
    error = _one_line_error(run(command, sid, "--store", "app.sqlite", *extra, cwd=app))
    assert f"session {sid!r} was made by agent" in error and "--agents" in error
    assert "nothing was changed" in error
    assert store.raw_row(sid) == row and _world(app) == []  # no example tool ran either
    assert store.load(sid).is_pending
    store.close()


def test_agents_after_the_command_and_from_the_current_directory(app: Path) -> None:
    done = run("approve", "s-1", "--reviewer", "ann", "--store", "app.sqlite",
               "--agents", "app:AGENTS", cwd=app)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["session s-1 done", "Done: user 1001 deleted."]
    done = run("--agents", "app:AGENTS", "approve", "c-1", "--store", "app.sqlite", cwd=app)
    assert done.returncode == 0, done.stderr
    assert _world(app) == ["deleted 1001", "applied c-1"]


def test_the_console_script_finds_modules_in_the_current_directory(app: Path) -> None:
    script = Path(sys.executable).with_name("intermission")
    if not script.exists():
        pytest.fail(f"the console script is not installed next to {sys.executable}")
    done = run("approve", "s-1", "--store", "app.sqlite", "--agents", "app:AGENTS",
               cwd=app, script=str(script))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _world(app) == ["deleted 1001"]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("app", "takes module:ATTR"),
        ("no_such_module:AGENTS", "cannot import 'no_such_module'"),
        ("app:MISSING", "has no attribute 'MISSING'"),
        ("app:NOT_A_MAPPING", "is a list, not a mapping"),
        ("app:BROKEN", "the factory for 'ops' raised RuntimeError: no database configured"),
        ("app:NOT_AN_AGENT", "gives a int, not an agent"),
        ("app:_world", "calling _world raised TypeError"),
    ],
)
def test_a_bad_agents_option_is_one_line_and_exit_2(untouched: Path, spec: str, says: str) -> None:
    app = untouched
    before = ["--agents", spec, "approve", "s-1", "--store", "app.sqlite"]
    after = ["resume", "s-1", "--store", "app.sqlite", "--agents", spec]
    args = before if len(spec) % 2 else after  # (either place, one run each)
    error = _one_line_error(run(*args, cwd=app))
    assert says in error and _world(app) == []


def test_an_agents_module_that_fails_to_import_is_one_line(untouched: Path) -> None:
    (untouched / "broken_import.py").write_text("raise KeyError('OPS_TOKEN')\n")
    error = _one_line_error(run("resume", "s-1", "--agents", "broken_import:X", cwd=untouched))
    assert "importing 'broken_import' failed: KeyError" in error


def test_adopt_hands_a_session_to_another_agent_on_purpose(app: Path) -> None:
    refused = _one_line_error(
        run("approve", "s-1", "--store", "app.sqlite", "--agents", "app:WIDER", cwd=app)
    )
    assert "belongs to agent 'ops'" in refused and "--adopt" in refused
    error = _one_line_error(run("approve", "s-1", "--store", "app.sqlite", "--adopt", cwd=app))
    assert "--adopt needs --agents" in error
    done = run("approve", "s-1", "--store", "app.sqlite", "--agents", "app:WIDER", "--adopt",
               cwd=app)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _world(app) == ["deleted 1001"]
    store = SQLiteStore(str(app / "app.sqlite"))
    assert json.loads(store.load("s-1").to_json())["agent_fingerprint"] != json.loads(
        store.load("c-1").to_json()
    ).get("agent_fingerprint")
    store.close()


def test_the_demo_s_own_sessions_still_run_without_agents(tmp_path: Path) -> None:
    assert run("demo", "--store", "d.sqlite", cwd=tmp_path).returncode == 0
    done = run("approve", "change-001", "--reviewer", "ann", "--store", "d.sqlite", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("session change-001 done"), done.stderr


def test_a_session_from_before_fingerprints_is_not_the_examples_to_take(tmp_path: Path) -> None:
    """Who made a session saved before fingerprints were recorded cannot be told: the
    bundled examples leave it alone (your own agents, via --agents, take it)."""
    assert run("demo", "--store", "d.sqlite", cwd=tmp_path).returncode == 0
    store = SQLiteStore(str(tmp_path / "d.sqlite"))
    s = store.load("change-001")
    s.agent_fingerprint = None  # as stored before this field
    store.save(s)
    row = store.raw_row("change-001")
    error = _one_line_error(run("approve", "change-001", "--store", "d.sqlite", cwd=tmp_path))
    assert "without --agents only the demo's sessions are run" in error
    assert store.raw_row("change-001") == row
    done = run("approve", "change-001", "--store", "d.sqlite",
               "--agents", "intermission.examples:AGENTS", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    store.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_without_agents_does_not_run_a_users_session(app: Path) -> None:
    need_module("starlette", "the agui extra (pip install intermission[agui])")
    import httpx

    bad = run("serve", "--store", "app.sqlite", "--agents", "app:BROKEN", cwd=app)
    assert "the factory for 'ops' raised" in _one_line_error(bad)
    store = SQLiteStore(str(app / "app.sqlite"))
    row = store.raw_row("s-1")
    port = _free_port()
    log = app / "serve.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "intermission", "serve", "--store", "app.sqlite",
             "--port", str(port)],
            cwd=app, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/threads/s-1", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        (interrupt,) = httpx.get(f"{url}/threads/s-1", timeout=10).json()["interrupts"]
        body = {
            "threadId": "s-1", "runId": "r-2", "messages": [], "state": {}, "tools": [],
            "context": [], "forwardedProps": {},
            "resume": [{"interruptId": interrupt["interrupt"]["id"], "status": "resolved",
                        "payload": {"approved": True}}],
        }  # fmt: skip
        answer = httpx.post(f"{url}/agents/ops", json=body, timeout=60,
                            headers={"Accept": "text/event-stream"})  # fmt: skip
        kinds = [json.loads(line[5:])["type"] for line in answer.text.splitlines()
                 if line.startswith("data:")]  # fmt: skip
        assert kinds[-1] == "RUN_ERROR" and "RUN_FINISHED" not in kinds, answer.text
        assert "AgentMismatch" in answer.text or "belongs to agent" in answer.text
        assert store.raw_row("s-1") == row and _world(app) == []
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        store.close()
    assert "demo's sessions only" in log.read_text()


COPIED = '''
"""The user's ops agent, started from intermission's example (its file kept the name)."""
import sys
from intermission import HITLInterceptor, InMemoryAgentSession, ReActAgent, tool
from intermission.examples import _after_tool
from intermission.messages import ToolCall
from intermission.stores import SQLiteStore

def build_ops_agent(user_id: int = 1001) -> ReActAgent:
    @tool
    def delete_user(user_id: int) -> str:
        """Delete a user account (for real, here)."""
        with open("world.txt", "a") as f:
            f.write(f"deleted {user_id}\\n")
        return f"user {user_id} deleted"

    model = _after_tool(lambda obs: f"Done: {obs}.", ToolCall("delete_user", {"user_id": user_id}))
    return (ReActAgent.of(model).name("ops").tools(delete_user)
            .interceptor(HITLInterceptor().on_tool("delete_user")).build())

AGENTS = {"ops": build_ops_agent}

if __name__ == "__main__":
    store = SQLiteStore(sys.argv[1])
    s = InMemoryAgentSession.of("s-1")
    build_ops_agent().prompt("delete user 1001").session(s).call()
    store.save(s)
'''


def test_a_users_examples_module_copied_from_the_bundled_one_is_not_the_bundled_one(
    tmp_path: Path,
) -> None:
    """A fingerprint names a tool's code by its module's last name, and the body is not
    hashed: a user's ``examples.py`` adapted from the bundled example (same function
    names, a real tool body) had the bundled example's fingerprint. Before: ``approve``
    without ``--agents`` resumed the user's session with the bundled example — "done",
    exit 0, the user's tool never ran."""
    (tmp_path / "examples.py").write_text(COPIED)
    subprocess.run([sys.executable, "examples.py", "app.sqlite"], cwd=tmp_path, check=True,
                   timeout=120)  # fmt: skip
    store = SQLiteStore(str(tmp_path / "app.sqlite"))
    row = store.raw_row("s-1")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    error = _one_line_error(run("approve", "s-1", "--store", str(tmp_path / "app.sqlite"),
                                cwd=elsewhere))  # fmt: skip
    assert "not by the bundled example 'ops'" in error and "nothing was changed" in error
    assert store.raw_row("s-1") == row and _world(tmp_path) == []
    done = run("approve", "s-1", "--store", "app.sqlite", "--agents", "examples:AGENTS",
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("session s-1 done") and _world(tmp_path) == ["deleted 1001"]
    store.close()
