"""A libpq keyword string given as ``--store`` (``host=… password=… dbname=…``) is
refused with a typed error pointing at the postgresql:// URL form: before, ``demo``
created a SQLite file named after the string, password and all, in the working folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from intermission import UsageError
from intermission.stores.open import open_store

KEYWORDS = "host=127.0.0.1 password=sekrit-pw dbname=y"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("command", [["demo"], ["pending"]])
def test_a_libpq_keyword_store_is_refused_and_nothing_is_created(
    command: list[str], tmp_path: Path
) -> None:
    done = cli(*command, "--store", KEYWORDS, cwd=tmp_path)
    assert done.returncode != 0
    assert "postgresql://" in done.stderr and "Traceback" not in done.stderr
    assert "sekrit-pw" not in done.stdout + done.stderr  # the password is never echoed
    assert list(tmp_path.iterdir()) == []  # no file named after the string


@pytest.mark.parametrize(
    "target", [KEYWORDS, "dbname=app user=me", "  host=db port=5432", "service=prod"]
)
def test_open_store_refuses_keyword_strings_with_a_usage_error(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="postgresql://") as err:
        open_store(target)
    assert "sekrit-pw" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_a_file_whose_name_merely_holds_an_equals_sign_still_opens(tmp_path: Path) -> None:
    open_store(str(tmp_path / "run=1.sqlite")).close()
    assert (tmp_path / "run=1.sqlite").exists()
