"""The README is a test (issue 29): the wheel built from this checkout is installed into a
fresh virtual environment outside the repository, and every code block of the README runs
there, top to bottom, in one working folder — each ``python`` block as a script, each
``bash`` block as a shell script with that environment active — as a reader would.

What differs from a reader's machine, and why:

- ``pip install intermission[...]`` installs this checkout's wheel (with the same extras)
  instead of the index's release;
- ``make …`` lines are skipped: they need a clone (its Makefile and tutorials), not an
  install;
- the server's port 8000 is swapped for a free one (tests run side by side);
- ``ops_server.py``, the MCP server the README's MCP block starts, is the tests' own
  (``tests/mcp_ops_server.py``), as the README says.

A ``# -> TEXT`` comment on a line is a promise: the block's output must contain TEXT.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests._venv import ROOT, built_wheel, fresh_venv, user_env

README = ROOT / "README.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
PROMISE = re.compile(r"#\s*->\s*(.+?)\s*$", re.M)
PIP_NAME = re.compile(r"""(["']?)intermission(\[[^\]]*\])?\1(?=\s|$)""")
SKIPPED = "skipped: `make` targets need a clone of the repository, not an installed wheel"


def blocks() -> list[tuple[str, str, int]]:
    """``(language, code, line)`` of every fenced block of the README."""
    text = README.read_text()
    return [
        (m.group(1), m.group(2), text[: m.start()].count("\n") + 1) for m in BLOCK.finditer(text)
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def shell_script(code: str, wheel: Path, port: int) -> tuple[str, list[str]]:
    """The bash block as this test runs it, and the lines it skipped."""
    lines, skipped = [], []
    for line in code.splitlines():
        if line.startswith("make "):
            skipped.append(line)
            lines.append(f": '{SKIPPED}: {line}'")
            continue
        if line.startswith("pip install "):
            line = PIP_NAME.sub(lambda m: f'"{wheel}{m.group(2) or ""}"', line)
        lines.append(line.replace("8000", str(port)))
    prelude = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"
    return prelude + "\n".join(lines) + "\n", skipped


def test_every_readme_block_runs_against_the_wheel_in_a_fresh_environment(
    tmp_path: Path,
) -> None:
    found = blocks()
    assert {lang for lang, _, _ in found} <= {"python", "bash"}, "a block no test runs"
    assert sum(lang == "python" for lang, _, _ in found) >= 4
    assert any("curl" in code for lang, code, _ in found if lang == "bash")
    assert shutil.which("curl"), "the README's AG-UI session needs curl (apt-get install curl)"

    wheel = built_wheel()
    bin_dir = fresh_venv(tmp_path / "venv")
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "tests" / "mcp_ops_server.py", work / "ops_server.py")
    env = user_env(bin_dir)
    skipped: list[str] = []
    timings = []
    for n, (lang, code, line) in enumerate(found):
        where = f"README.md line {line} ({lang})"
        started = time.monotonic()
        if lang == "python":
            script = work / f"readme_block_{n}.py"
            script.write_text(code)
            cmd = [str(bin_dir / "python"), script.name]
        else:
            text, skipped_here = shell_script(code, wheel, _free_port())
            skipped += skipped_here
            cmd = ["bash", "-c", text]
        done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        timings.append(f"{where}: {time.monotonic() - started:.1f} s")
        assert done.returncode == 0, (
            f"{where} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        )
        for promise in PROMISE.findall(code):
            assert promise in done.stdout, f"{where}: no {promise!r} in:\n{done.stdout[-4000:]}"
    print("\n".join(timings))
    assert skipped and all(line.startswith("make ") for line in skipped)
    # the README's promises ran against the wheel in that environment, not this checkout
    located = subprocess.run(
        [str(bin_dir / "python"), "-c", "import intermission; print(intermission.__file__)"],
        cwd=work, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert str(tmp_path / "venv") in located.stdout and str(ROOT) not in located.stdout
