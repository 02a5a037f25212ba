"""The package as a user gets it: the wheel built from this checkout, and fresh virtual
environments outside the repository to install it (or Binder's requirements) into. pip's
cache makes a second install quick; nothing here reads the repository's own ``.venv``."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path | None = None, timeout: float = 900) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")


@functools.cache
def built_wheel() -> Path:
    """The wheel of this checkout, built once per test run (into a temporary folder)."""
    out = Path(tempfile.mkdtemp(prefix="intermission-wheel-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)])
    (wheel,) = out.glob("intermission-*.whl")
    return wheel


def fresh_venv(where: Path, *, with_pip: bool = True) -> Path:
    """A new virtual environment at ``where`` (outside the repository); its ``bin``."""
    assert ROOT not in where.resolve().parents, "a user's environment lives elsewhere"
    cmd = [sys.executable, "-m", "venv", str(where)]
    _run(cmd if with_pip else [*cmd, "--without-pip"])
    return where / "bin"


def pip_install(bin_dir: Path, *args: str, cwd: Path | None = None) -> None:
    """``pip install ARGS`` into the environment of ``bin_dir`` (this pip, its interpreter)."""
    _run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "-q",
          "--disable-pip-version-check", "--no-compile", *args], cwd=cwd)  # fmt: skip


def user_env(bin_dir: Path) -> dict[str, str]:
    """The environment of a shell in which ``bin_dir``'s venv is active, and nothing of the
    test run's leaks in (no PYTHONPATH, no autopilot, no other venv)."""
    skip = {"PYTHONPATH", "VIRTUAL_ENV", "INTERMISSION_AUTOPILOT", "PYTHONSTARTUP"}
    env = {k: v for k, v in os.environ.items() if k not in skip}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"  # (no "a new pip is out" in the output)
    return env
