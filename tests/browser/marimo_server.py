"""A ``marimo run`` or ``marimo edit`` server on 127.0.0.1 for the browser tests (issue 32),
with its own home (config: light or dark theme, no update check) and a log file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.browser.lab import _free_port


class Marimo:
    """``marimo MODE notebook`` served on a free port; ``env`` adds to its environment."""

    def __init__(
        self, mode: str, notebook: Path, tmp: Path, *, theme: str = "light",
        env: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        home = tmp / "home"
        config = home / ".config" / "marimo"
        config.mkdir(parents=True, exist_ok=True)
        (config / "marimo.toml").write_text(
            f'[display]\ntheme = "{theme}"\n\n[completion]\ncopilot = false\n'
        )
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = (tmp / f"marimo-{mode}.log").open("w")
        environ = {k: v for k, v in os.environ.items() if k != "INTERMISSION_AUTOPILOT"}
        environ.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), **(env or {}))
        command = [
            str(Path(sys.executable).parent / "marimo"), mode, str(notebook), "--headless",
            "--host", "127.0.0.1", "-p", str(self.port), "--no-token",
        ]  # fmt: skip
        if mode == "edit":
            command.append("--skip-update-check")
        self.process = subprocess.Popen(
            command, cwd=notebook.parent, env=environ, stdout=self.log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.base}/", timeout=2):
                    return
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.3)
        self.stop()
        raise AssertionError(f"marimo {mode} did not start; see {self.log.name}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()
