"""Issue 29: edges a newcomer hits with the CLI. The commands it prints can be pasted into a
shell whatever the session id or store path holds (spaces, quotes, non-ASCII); a store
file that cannot be written is said so, not called an outage to wait for; a folder given
as the store is named as one."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests._helpers import need_module

from intermission import StoreError
from intermission.cli import main
from intermission.stores import SQLiteStore, open_store


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


@pytest.mark.parametrize("sid", ["my change ü", "it's $HOME; rm -rf"])
def test_the_commands_demo_prints_run_as_pasted(tmp_path: Path, sid: str) -> None:
    (tmp_path / "my stores ü").mkdir()
    store = "my stores ü/demo store.sqlite"
    done = run([sys.executable, "-m", "intermission", "demo", "--session", sid,
                "--store", store], tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    approve = next(
        line.strip() for line in done.stdout.splitlines()
        if line.strip().startswith("python -m intermission approve ")
    )  # fmt: skip
    argv = shlex.split(approve)  # as a POSIX shell reads the pasted line
    assert argv[:4] == ["python", "-m", "intermission", "approve"]
    assert argv[4] == sid and argv[argv.index("--store") + 1] == store
    pasted = run([sys.executable, *argv[1:]], tmp_path)
    assert pasted.returncode == 0, pasted.stderr
    assert "done" in pasted.stdout


def _make_read_only(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``path`` a file this process cannot write. Root writes a chmod 444 file anyway,
    so there the file is made immutable; where the file system cannot do that, SQLite's
    ``query_only`` gives the same refusal (SQLITE_READONLY) on every connection."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        path.parent.chmod(0o555)
        return
    chattr = shutil.which("chattr")
    if chattr and subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode == 0:
        return
    opened = SQLiteStore._open

    def read_only_open(self: SQLiteStore) -> sqlite3.Connection:
        conn = opened(self)
        conn.execute("PRAGMA query_only = ON")
        return conn

    monkeypatch.setattr(SQLiteStore, "_open", read_only_open)


def _writable_again(path: Path) -> None:
    if os.geteuid() != 0:
        path.parent.chmod(0o755)
        path.chmod(0o644)
    elif chattr := shutil.which("chattr"):
        subprocess.run([chattr, "-i", str(path)], capture_output=True)


def test_a_read_only_store_is_refused_as_such_not_as_an_outage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "ro" / "demo.sqlite"
    store.parent.mkdir()
    assert main(["demo", "--store", str(store)]) == 0
    capsys.readouterr()
    _make_read_only(store, monkeypatch)
    try:
        assert main(["approve", "change-001", "--reviewer", "alice", "--store", str(store)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: the SQLite store {str(store)!r} cannot be written"), err
        assert "writable" in err and "\n" not in err
        assert "connection was lost" not in err and "retry when" not in err
        assert main(["show", "change-001", "--store", str(store)]) == 0  # reading still works
        assert "status:   pending" in capsys.readouterr().out
    finally:
        monkeypatch.undo()
        _writable_again(store)
    assert main(["approve", "change-001", "--reviewer", "alice", "--store", str(store)]) == 0
    assert "done" in capsys.readouterr().out  # nothing had changed; now it can be decided


@pytest.mark.parametrize("command", [["demo"], ["pending"], ["show", "change-001"]])
def test_a_folder_as_the_store_is_named_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    assert main([*command, "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: {str(tmp_path)!r} is a directory, not a SQLite store: name a file in it "
        "(say store.sqlite)"
    )
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_while_the_store_is_locked_exits_130_without_a_traceback(tmp_path: Path) -> None:
    store = tmp_path / "locked.sqlite"
    assert main(["demo", "--store", str(store)]) == 0
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process is writing, for a long while
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cli = subprocess.Popen(
        [sys.executable, "-m", "intermission", "pending", "--store", str(store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env,
        # as a terminal starts it, with ^C's default action (a harness that runs the tests
        # in the background, as CI's does, hands its children SIGINT ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        fds = Path(f"/proc/{cli.pid}/fd")
        for _ in range(1200):  # until the CLI has the file open: it waits for the lock then
            if cli.poll() is not None or any(
                str(store) in os.path.realpath(fd) for fd in _listdir(fds)
            ):
                break
            time.sleep(0.05)
        assert cli.poll() is None, cli.communicate()
        cli.send_signal(signal.SIGINT)  # the person presses ^C
    finally:
        holder.execute("COMMIT")  # sqlite's busy wait returns; Python sees the ^C
        holder.close()
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


def _listdir(path: Path) -> list[str]:
    try:
        return [str(p) for p in path.iterdir()]
    except OSError:  # the process ended meanwhile
        return []


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["approve", "s-1", "--wait", "-1"], "--wait is a finite number from 0 to 3600, not -1"),
        (["resume", "s-1", "--wait", "nan"], "--wait is a finite number from 0 to 3600, not nan"),
        (["sweep", "--every", "0"], "--every is a finite number from 0.01 to 86400, not 0"),
        (["sweep", "--every", "-5"], "--every is a finite number from 0.01 to 86400, not -5"),
        (["serve", "--drain", "inf"], "--drain is a finite number from 0 to 86400, not inf"),
        (["serve", "--sweep-every", "-1"], "--sweep-every is a finite number from 0 to 86400"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_a_bad_number_of_seconds_is_named_by_its_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    store = tmp_path / "app.sqlite"
    assert main([*argv, "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {says}"), err
    assert "\n" not in err and "_s " not in err  # no Python parameter (wait_s) named
    assert not store.exists()  # refused before any store was opened


@pytest.mark.parametrize("option", ["sslmode=bogus", "channel_binding=x", "gssencmode=x"])
def test_a_postgres_url_with_a_bad_option_is_refused_for_good_not_retry_later(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    need_module("psycopg", "the postgres extra (pip install intermission[postgres])")
    target = f"postgresql://u:p@127.0.0.1:5432/x?{option}"  # libpq refuses it before connecting
    with pytest.raises(StoreError) as caught:
        open_store(target)
    assert type(caught.value) is StoreError  # not StoreUnavailableError: waiting changes nothing
    assert main(["pending", "--store", target]) == 2
    err = capsys.readouterr().err.strip()
    assert f"invalid {option.split('=')[0]} value" in err and "\n" not in err
    assert "retry when the database is back" not in err, err


WITHOUT_HTTPX = """
import sys
sys.modules["httpx"] = None  # as if the notify extra was not installed
from intermission.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_notify_without_its_extra_says_so_and_spends_no_attempt(tmp_path: Path) -> None:
    store = tmp_path / "app.sqlite"
    SQLiteStore(store, outbox=True).close()
    assert main(["demo", "--store", str(store)]) == 0  # a pause: one notification waits
    config = tmp_path / "notify.yaml"
    config.write_text("targets:\n  - type: slack\n    url_env: SLACK_URL\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["SLACK_URL"] = "http://127.0.0.1:9/hook"
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_HTTPX, "notify", "--once", "--config", str(config),
         "--store", str(store)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.strip() == (
        "error: 'httpx' is not installed: pip install 'intermission[notify]'"
    ), done.stderr
    opened = SQLiteStore(store, create=False)
    try:
        (row,) = opened.outbox.rows()  # type: ignore[attr-defined]
        assert row.attempts == 0 and row.status == "pending"  # still waits, untouched
    finally:
        opened.close()


@pytest.mark.parametrize(
    "command", [["demo"], ["pending"], ["show", "change-001"], ["approve", "change-001"]]
)
def test_a_memory_store_that_would_keep_nothing_is_refused(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    # `demo --store memory:` printed "continue with: approve … --store memory:", which can
    # never find the session; `pending` there listed an empty store as if it were one
    assert main([*command, "--store", "memory:"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip() == (
        f"error: --store memory: keeps nothing after this command, so {command[0]} has "
        "nothing to work on: give a SQLite file (say demo.sqlite) or a postgresql:// URL"
    )


def test_a_session_someone_else_resumes_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "demo.sqlite")
    assert main(["demo", "--store", path]) == 0
    capsys.readouterr()
    other = SQLiteStore(path)
    try:
        with other.claim("change-001"):  # another reviewer's resume, still running
            argv = ["approve", "change-001", "--reviewer", "alice", "--wait", "0.2"]
            assert main([*argv, "--store", path]) == 2
    finally:
        other.close()
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: session 'change-001' is being resumed by someone else (waited 0.2 s); nothing "
        "was changed. Run the command again once they are done, or wait longer with --wait "
        "SECONDS"
    )
    assert main(["approve", "change-001", "--reviewer", "alice", "--store", path]) == 0


@pytest.mark.parametrize("command", [["pending"], ["show", "change-001"]])
def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path, command: list[str]) -> None:
    store = str(tmp_path / "demo.sqlite")
    assert main(["demo", "--store", store]) == 0
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with subprocess.Popen(
        [sys.executable, "-m", "intermission", *command, "--store", store],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env,
    ) as cli:  # fmt: skip
        assert cli.stdout is not None and cli.stderr is not None
        cli.stdout.close()  # `| head -0`: the reader is gone before anything is written
        err = cli.stderr.read()
        assert cli.wait(timeout=120) == 141, err
    assert err == "", err  # no BrokenPipeError traceback, no "Exception ignored"


@pytest.mark.parametrize("encoding", ["ascii", "cp1252"])
def test_a_console_that_cannot_show_a_character_gets_it_escaped(
    tmp_path: Path, encoding: str
) -> None:
    store = str(tmp_path / "demo.sqlite")
    assert main(["demo", "--session", "变更-1 ✓", "--store", store]) == 0
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONIOENCODING"] = encoding  # as Windows writes to a file: cp1252
    for command in (["pending"], ["show", "变更-1 ✓"]):
        done = subprocess.run(
            [sys.executable, "-m", "intermission", *command, "--store", store],
            capture_output=True, cwd=tmp_path, env=env, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0 and done.stderr == b"", done.stderr.decode()
        assert b"\\u53d8\\u66f4-1 \\u2713" in done.stdout, done.stdout


def test_a_damaged_row_is_named_and_explained_when_loaded_as_when_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "demo.sqlite")
    assert main(["demo", "--store", store]) == 0
    db = sqlite3.connect(store)
    db.execute("UPDATE im_sessions SET snapshot = substr(snapshot, 1, 200)")  # cut short
    db.commit()
    db.close()
    capsys.readouterr()
    assert main(["pending", "--store", store]) == 0  # the listing names it, says what to do
    assert "unreadable: change-001: " in capsys.readouterr().out
    for command in (["show", "change-001"], ["approve", "change-001", "--reviewer", "alice"]):
        assert main([*command, "--store", store]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: session 'change-001' cannot be read (not valid JSON"), err
        assert err.endswith("restore it from a backup, or delete the session"), err
