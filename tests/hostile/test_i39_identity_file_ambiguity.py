"""Issue 39 (R60), attacked: an identity file that says one thing two ways.

Before: the loader kept silently one of two answers — a login mapped twice under
``os_users:`` (YAML and JSON keep the last key), one token hash listed for two people,
a person declared twice under ``principals:`` in spellings that compare equal (``ann``
and ``ANN``, ``ﬁnn`` and ``Finn``: their roles merged) — so who a login or a token is, and
which roles they hold, depended on the order of lines. Now such a file is refused, with
what to fix, by ``serve --auth`` (it does not start) and by every CLI command's ``--auth``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

AMBIGUOUS = {
    "login.yaml": (
        "principals: {ann: {roles: [finance]}, mallory: {roles: []}}\n"
        "os_users:\n  ops: ann\n  ops: mallory\n",
        "'ops' twice",
    ),
    "login.json": (
        '{"principals": {"ann": {"roles": ["finance"]}, "mallory": null},'
        ' "os_users": {"ops": "ann", "ops": "mallory"}}\n',
        "'ops' twice",
    ),
    "token.yaml": (
        "principals: {ann: {roles: [finance]}}\n"
        "tokens:\n  - hash: sha256:00ff\n    name: ann\n"
        "  - hash: sha256:00ff\n    name: mallory\n",
        "listed twice",
    ),
    "person.yaml": (
        "principals:\n  ann: {roles: [finance]}\n  ANN: {roles: [admin]}\n",
        "'ann' and 'ANN' name one person",
    ),
    "ligature.yaml": (
        "principals:\n  \ufb01nn: {roles: []}\n  Finn: {roles: [admin]}\n",
        "name one person",
    ),
}


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}


@pytest.mark.parametrize("name", sorted(AMBIGUOUS))
def test_serve_refuses_to_start_on_an_ambiguous_identity_file(name: str, tmp_path: Path) -> None:
    text, said = AMBIGUOUS[name]
    auth = tmp_path / name
    auth.write_text(text, encoding="utf-8")
    cmd = [sys.executable, "-m", "intermission", "serve", "--store",
           f"sqlite:///{tmp_path / 's.sqlite'}", "--agents", "tests.agui.agents:AGENTS",
           "--port", "0", "--auth", str(auth)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"serve started on the ambiguous identity file {name}")
    assert proc.returncode == 2, out + err
    assert said in err, err


@pytest.mark.parametrize("name", sorted(AMBIGUOUS))
def test_a_cli_command_refuses_an_ambiguous_identity_file(name: str, tmp_path: Path) -> None:
    text, said = AMBIGUOUS[name]
    auth = tmp_path / name
    auth.write_text(text, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "intermission", "forget", "s", "k", "--store",
         f"sqlite:///{tmp_path / 's.sqlite'}", "--auth", str(auth)],
        capture_output=True, text=True, cwd=ROOT, env=env(), timeout=120,
    )  # fmt: skip
    assert run.returncode == 2, run.stdout + run.stderr
    (line,) = run.stderr.splitlines()
    assert line.startswith("error: ") and said in line, line
