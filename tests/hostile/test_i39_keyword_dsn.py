"""Issue 39, attacked: a libpq keyword string given as the store (``--store "host=…
password=…"``, ``INTERMISSION_STORE``, ``open_store``) was taken for a SQLite file name:
a file named after the password was created in the working directory. It is a clear typed
error now, and nothing is created."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from intermission.errors import UsageError
from intermission.stores import open_store

SECRET = "s3cr@t:/%#pw"
DSNS = [
    f"host=127.0.0.1 port=5432 dbname=app user=ann password={SECRET}",
    f"dbname=app password='{SECRET} x'",
    f"password={SECRET}",
]


def _cli(args: list[str], cwd: Path, store: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("INTERMISSION_STORE", None)
    if store is not None:
        env["INTERMISSION_STORE"] = store
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("dsn", DSNS)
def test_a_keyword_string_as_store_is_refused_and_creates_nothing(dsn: str, tmp_path: Path) -> None:
    for how in (["demo", "--store", dsn], ["demo", f"--store={dsn}"], ["demo"]):
        done = _cli(how, tmp_path, store=dsn if how == ["demo"] else None)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "libpq keyword string" in done.stderr and "postgresql://" in done.stderr
        assert SECRET not in done.stdout + done.stderr
        assert list(tmp_path.iterdir()) == []  # no file named after the password


def test_open_store_refuses_a_keyword_string(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="libpq keyword string") as caught:
        open_store(DSNS[0])
    assert SECRET not in str(caught.value)
    assert list(tmp_path.iterdir()) == []
    # a path that merely holds an "=" is still a SQLite file
    open_store(str(tmp_path / "a=b.sqlite")).close()
    open_store("sqlite:///" + str(tmp_path / "host=x.sqlite")).close()
