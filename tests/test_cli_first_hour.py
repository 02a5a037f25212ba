"""Issue 29, case 7: the CLI as a newcomer meets it. Refusals are plain language (no Python
call to make), ``show`` lists decisions and one call of a batch can be decided, a wrong
password is not "retry later", an unknown URL scheme is not a SQLite file, read-only
commands never create a store, ``serve`` says it is ready only once it listens (and a busy
port is one line), and ``--help`` carries no requirement ids."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
from tests._helpers import need_module, pg_dsn

from intermission import ServeError, StoreError, UsageError
from intermission.cli import build_parser, main
from intermission.stores import SQLiteStore, open_store

BATCH_APP = '''
from intermission import HITLInterceptor, InMemoryAgentSession, ReActAgent, ScriptedModel
from intermission import ToolCall, tool
from intermission.stores import SQLiteStore

@tool
def delete_user(user_id: int) -> str:
    """Delete a user account (really)."""
    with open("world.txt", "a") as f:
        f.write(f"deleted {user_id}\\n")
    return f"user {user_id} deleted"

def _script(messages, tools):
    last = max(i for i, m in enumerate(messages) if m.role == "user")
    seen = [m.content for m in messages[last:] if m.role == "tool"]
    if seen:
        return "Done: " + "; ".join(seen) + "."
    return [ToolCall("delete_user", {"user_id": 1}, "call-1"),
            ToolCall("delete_user", {"user_id": 2}, "call-2")]

def build_ops():
    return (ReActAgent.of(ScriptedModel(_script)).name("ops").tools(delete_user)
            .interceptor(HITLInterceptor().on_tool("delete_user")).build())

AGENTS = {"ops": build_ops}

if __name__ == "__main__":
    store = SQLiteStore("app.sqlite")
    s = InMemoryAgentSession.of("b-1")
    build_ops().prompt("delete users 1 and 2").session(s).call()
    store.save(s)
    store.close()
'''


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=120,
    )  # fmt: skip


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    return lines[0]


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    """A user's app with session b-1 paused on a batch of two tool calls."""
    (tmp_path / "app.py").write_text(BATCH_APP)
    subprocess.run([sys.executable, "app.py"], cwd=tmp_path, check=True, timeout=120)
    return tmp_path


def test_one_call_of_a_batch_is_decided_and_the_rest_keeps_waiting(batch: Path) -> None:
    store = SQLiteStore(str(batch / "app.sqlite"))
    listed = run("pending", "--store", "app.sqlite", cwd=batch).stdout
    assert re.search(r"^b-1 +ops +2 calls ", listed, re.M), listed
    shown = run("show", "b-1", "--store", "app.sqlite", cwd=batch).stdout
    assert "python -m intermission approve b-1 --call CALL --store app.sqlite" in shown
    # a call that is not in the batch: refused, nothing changes
    row = store.raw_row("b-1")
    error = one_line_error(run("--agents", "app:AGENTS", "approve", "b-1", "--call", "call-9",
                               "--store", "app.sqlite", cwd=batch))  # fmt: skip
    assert "'call-9' of session 'b-1' is not one of its calls (calls waiting: call-1, call-2" in (
        error
    )
    assert store.raw_row("b-1") == row
    done = run("--agents", "app:AGENTS", "approve", "b-1", "--call", "call-1", "--reviewer",
               "ann", "--store", "app.sqlite", cwd=batch)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert 'still waiting: call-2 delete_user({"user_id": 2})' in done.stdout
    assert not (batch / "world.txt").exists()  # the batch runs once every call is decided
    s = store.load("b-1")
    assert s.is_pending and [t.call_uuid for t in s.hitl.tasks if t.call_uuid == "call-2"]
    shown = run("show", "b-1", "--store", "app.sqlite", cwd=batch).stdout
    # ann is the display name typed; who decided is the OS user (user@host)
    by_ann = r"^decision: APPROVE by ann \(\S+@\S+\) at .* UTC: delete_user \(call-1\) \[recorded"
    assert re.search(by_ann, shown, re.M), shown
    again = one_line_error(run("--agents", "app:AGENTS", "approve", "b-1", "--call", "call-1",
                               "--store", "app.sqlite", cwd=batch))  # fmt: skip
    assert "call 'call-1' of session 'b-1' was decided already (calls waiting: call-2" in again
    done = run("--agents", "app:AGENTS", "reject", "b-1", "--call", "call-2", "--reason",
               "not 2", "--reviewer", "bo", "--store", "app.sqlite", cwd=batch)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("session b-1 done")
    assert (batch / "world.txt").read_text().splitlines() == ["deleted 1"]
    shown = run("show", "b-1", "--store", "app.sqlite", cwd=batch).stdout
    decisions = [line for line in shown.splitlines() if line.startswith("decision:")]
    assert len(decisions) == 2 and "APPROVE by ann" in decisions[0], shown
    assert "REJECT by bo" in decisions[1] and decisions[1].endswith("(call-2) — not 2")
    assert "answer:   Done: user 1 deleted; Rejected by the reviewer: not 2." in shown
    store.close()


def test_a_graph_approval_is_listed_as_one_and_call_is_refused_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "d.sqlite")
    assert main(["demo", "--store", store]) == 0
    capsys.readouterr()
    assert main(["pending", "--store", store]) == 0
    assert re.search(r"^change-001 +change +approval ", capsys.readouterr().out, re.M)
    assert main(["approve", "change-001", "--call", "c-1", "--store", store]) == 2
    assert "waits for an approval of the whole run, not for tool calls: leave out --call" in (
        capsys.readouterr().err
    )
    assert main(["reject", "change-001", "--reason", "no window", "--reviewer", "eve",
                 "--store", store]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["show", "change-001", "--store", store]) == 0
    out = capsys.readouterr().out
    by_eve = r"^decision: REJECT by eve \(\S+@\S+\) at .* UTC: the approval — no window$"
    assert re.search(by_eve, out, re.M), out


READ_ONLY = [
    ["pending"], ["show", "s-1"], ["approve", "s-1"], ["reject", "s-1", "--reason", "no"],
    ["resume", "s-1"], ["resolve", "s-1", "k", "--result", "1"], ["forget", "s-1", "k"],
    ["outbox"],
]  # fmt: skip


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: c[0])
def test_a_command_that_only_uses_a_store_never_creates_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    missing = tmp_path / "typo.sqlite"
    assert main([*command, "--store", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: there is no SQLite store at {str(missing)!r} (no such file); nothing was created"
    )
    assert not missing.exists() and list(tmp_path.iterdir()) == []


def test_an_empty_file_is_no_store_and_stays_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with pytest.raises(StoreError, match="holds no intermission store; nothing was created"):
        open_store(str(empty), create=False)
    assert empty.read_bytes() == b""
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database, but a file a typo named")
    with pytest.raises(StoreError, match="cannot open the SQLite store"):
        open_store(str(notes), create=False)
    assert notes.read_text() == "not a database, but a file a typo named"
    open_store("memory:", create=False).close()  # (a memory store is always new)
    open_store(str(empty)).close()  # the default still creates one


@pytest.mark.parametrize("target", ["mysql://u:p@db/x", "https://example.com/s.db", ""])
def test_a_store_url_of_another_kind_is_a_usage_error(tmp_path: Path, target: str) -> None:
    with pytest.raises(UsageError) as caught:
        open_store(target)
    if target:
        assert f"{target.split(':')[0]}:// is not a store intermission knows" in str(caught.value)
    error = one_line_error(run("pending", "--store", target, cwd=tmp_path))
    assert "no SQLite store" not in error and list(tmp_path.iterdir()) == []


def test_a_wrong_password_or_database_is_refused_for_good_not_retry_later() -> None:
    dsn = pg_dsn()
    need_module("psycopg", "the postgres extra (pip install intermission[postgres])")
    wrong = re.sub(r"://([^:@/]+):[^@]*@", r"://\1:not-the-password@", dsn)
    assert wrong != dsn, "the test DSN names a password"
    for target, says in ((wrong, "password authentication failed"),
                         (dsn.rsplit("/", 1)[0] + "/no_such_db_29", "does not exist")):  # fmt: skip
        with pytest.raises(StoreError) as caught:
            open_store(target)
        assert type(caught.value) is StoreError and says in str(caught.value)
        assert "check the user, password, database name and host" in str(caught.value)
        assert "not-the-password" not in str(caught.value)
        error = one_line_error(run("pending", "--store", target, cwd=Path.cwd()))
        assert "refused the connection" in error and "retry" not in error


def test_a_postgres_database_without_a_store_is_refused_by_read_only_commands() -> None:
    dsn = pg_dsn()
    need_module("psycopg", "the postgres extra (pip install intermission[postgres])")
    import psycopg

    schema = "im_nostore_29"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in dsn else "?"
    elsewhere = f"{dsn}{sep}options={quote(f'-csearch_path={schema}')}"
    try:
        error = one_line_error(run("pending", "--store", elsewhere, cwd=Path.cwd()))
        assert "the PostgreSQL database holds no intermission store; nothing was created" in error
        with psycopg.connect(dsn, autocommit=True) as conn:
            made = conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s",
                (schema,),
            ).fetchone()
        assert made == (0,)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_serve_on_a_busy_port_is_one_line_and_announces_nothing(tmp_path: Path) -> None:
    need_module("uvicorn", "the agui extra (pip install intermission[agui])")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        error = one_line_error(run("serve", "--store", "s.sqlite", "--port", str(port),
                                   cwd=tmp_path))  # fmt: skip
    assert error.startswith(f"error: cannot serve on 127.0.0.1:{port}: address already in use")
    assert "pick another port" in error
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ServeError) as caught:
            from intermission.agui import serve

            serve(lambda *a: None, "127.0.0.1", port)  # type: ignore[arg-type]
    assert isinstance(caught.value, OSError) and caught.value.port == port


def test_serve_says_where_it_serves_only_once_it_listens(tmp_path: Path) -> None:
    need_module("uvicorn", "the agui extra (pip install intermission[agui])")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "intermission", "serve", "--store", "s.sqlite", "--port", "0"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # (blocks until the announcement, or EOF if it died)
        found = re.match(r"serving AG-UI on (http://127\.0\.0\.1:(\d+)/) \(store s\.sqlite\)",
                         line)  # fmt: skip
        assert found is not None and found.group(2) != "0", (line, proc.poll())
        # announced: the server answers at once, no retry needed
        with urllib.request.urlopen(found.group(1), timeout=30) as page:
            assert page.status == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def test_help_speaks_plainly() -> None:
    parser = build_parser()
    texts = [parser.format_help()]
    sub = next(a for a in parser._actions if a.dest == "command")
    texts += [p.format_help() for p in sub.choices.values()]  # type: ignore[union-attr]
    for text in texts:
        assert not re.search(r"\bR\d{1,2}\b", text), text
        assert "seed" not in text.lower(), text
    approve = sub.choices["approve"].format_help()  # type: ignore[index]
    assert "--call CALL" in approve and "--agents" in approve
    assert "--agents" not in sub.choices["pending"].format_help()  # type: ignore[index]
