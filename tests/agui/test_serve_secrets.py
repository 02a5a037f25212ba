"""``serve``'s secrets stay out of what other users and logs see (issue 39): the bearer token
comes from ``--token-file`` or ``INTERMISSION_TOKEN``, never argv (read back from the
server's own ``/proc/PID/cmdline``); ``--token`` is refused without repeating its value; a
store URL's password is never in the server's output, from its first line to its exit."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests._helpers import PG_SECRET, need, need_module, pg_role_url

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")

import httpx  # noqa: E402

from ._server import ROOT, Server  # noqa: E402

TOKEN = "tok-Zq8xV2mWn4"
SRC = f"{ROOT / 'src'}{os.pathsep}{ROOT}"


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store; on PostgreSQL, a URL whose password is ``PG_SECRET``."""
    yield str(tmp_path / "s.db") if request.param == "sqlite" else pg_role_url()


def cmdline(pid: int) -> str:
    need(Path(f"/proc/{pid}/cmdline").exists(), "/proc (Linux) shows what ps shows")
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def answers(server: Server, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.get(server.url + "/interrupts", headers=headers, timeout=60).status_code


def stopped_output(server: Server) -> str:
    server.stop()  # SIGTERM: the graceful stop, with whatever it logs
    return server.output.read_text()


def test_the_token_file_keeps_the_token_out_of_argv(target: str, tmp_path: Path) -> None:
    server = Server(target, tmp_path / "e.log", token=TOKEN)  # (--token-file, "TOKEN\n")
    try:
        seen = cmdline(server.proc.pid)
        assert "--token-file" in seen and TOKEN not in seen
        assert answers(server, TOKEN) == 200  # (the file's final newline is not the token's)
        assert answers(server, None) == 401
        assert answers(server, TOKEN + "x") == 401
    finally:
        out = stopped_output(server)
    assert TOKEN not in out and PG_SECRET not in out, out


def test_the_token_from_the_environment(target: str, tmp_path: Path) -> None:
    server = Server(target, tmp_path / "e.log", env={"INTERMISSION_TOKEN": TOKEN})
    try:
        assert TOKEN not in cmdline(server.proc.pid)
        assert answers(server, TOKEN) == 200
        assert answers(server, None) == 401
    finally:
        out = stopped_output(server)
    assert TOKEN not in out


def test_the_store_password_is_in_no_line_the_server_prints(tmp_path: Path) -> None:
    url = pg_role_url()
    server = Server(url, tmp_path / "e.log")
    try:
        assert answers(server, None) == 200  # (it runs on that store)
    finally:
        out = stopped_output(server)
    assert PG_SECRET not in out, out
    first = out.splitlines()[0]
    assert first.startswith("serving AG-UI on ") and "im_sec_user" in first, first
    assert ":***@127.0.0.1" in first, first


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``serve`` refusing to start: it exits (a timeout is a server that started)."""
    return subprocess.run(
        [sys.executable, "-m", "intermission", "serve", "--port", "0", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=90,
        env={**os.environ, "PYTHONPATH": SRC, **(env or {})},
    )  # fmt: skip


@pytest.mark.parametrize(
    "given",
    [("--token", TOKEN), (f"--token={TOKEN}",), (f"--toke={TOKEN}",), (f"--tokn={TOKEN}",),
     ("--token",)],
)  # fmt: skip
def test_a_token_in_argv_is_refused_and_never_repeated(given: tuple[str, ...]) -> None:
    done = serve("--store", "memory:", *given)
    assert done.returncode == 2, done
    assert TOKEN not in done.stdout + done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith(("intermission serve: error: ", "intermission: error: ")), error
    if given[0].startswith("--token"):
        assert "--token-file" in error and "INTERMISSION_TOKEN" in error, error


def test_a_token_file_that_cannot_be_a_token_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "token"
    for text, mode, says in (
        ("", 0o600, "is empty"),
        ("\n", 0o600, "is empty"),
        (f"{TOKEN}\n{TOKEN}\n", 0o600, "a line break"),
        (f"{TOKEN}\n", 0o622, "may be written by other users"),
    ):
        token.write_text(text)
        token.chmod(mode)
        done = serve("--store", "memory:", "--token-file", str(token))
        assert done.returncode == 2, done
        assert done.stderr.startswith("error: the file --token-file names ") and says in done.stderr
        assert TOKEN not in done.stderr and str(token) not in done.stderr  # (the path may be it)
    done = serve("--store", "memory:", env={"INTERMISSION_TOKEN": ""})
    assert (
        done.returncode == 2
        and done.stderr
        == "error: INTERMISSION_TOKEN is empty: write "
        "the token in it (say `openssl rand -hex 32 > token; chmod 600 token`)\n"
    ), done.stderr
    done = serve("--store", "memory:", "--token-file", str(tmp_path / TOKEN))
    assert done.returncode == 2 and "cannot read the file --token-file names" in done.stderr
    assert TOKEN not in done.stderr  # (the token pasted where the path goes)


def test_a_world_readable_token_file_is_served_with_a_warning(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o644)  # (a container's secret mount often is)
    server = Server(str(tmp_path / "s.db"), tmp_path / "e.log",
                    extra=("--token-file", str(token)))  # fmt: skip
    try:
        assert answers(server, TOKEN) == 200
        assert answers(server, None) == 401
    finally:
        out = stopped_output(server)
    assert "warning: every local user can read the file --token-file names: chmod 600" in out
