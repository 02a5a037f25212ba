"""A real browser clicks Approve in 04_graph_approval (served by Voila on 127.0.0.1).

Under CI=true a missing Chromium or Playwright fails the test. The screenshot is written to
tests/artifacts/; with UPDATE_README_SCREENSHOT=1 it also replaces docs/approval-widget.png.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
]  # fmt: skip


def _need(ok: bool, what: str) -> None:
    if not ok:
        msg = f"{what} is missing (apt-get install chromium; pip install playwright)"
        if IN_CI:
            pytest.fail(msg + " — CI=true: a missing browser fails the run")
        pytest.skip(msg + " (under CI=true this fails instead)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def voila(tmp_path: Path) -> Iterator[str]:
    _need(Path(CHROMIUM).exists(), "Chromium")
    _need(shutil.which("voila", path=str(Path(sys.executable).parent)) is not None, "voila")
    nb_dir = tmp_path / "nb"
    nb_dir.mkdir()
    shutil.copy(ROOT / "notebooks" / "04_graph_approval.ipynb", nb_dir)
    port, token = _free_port(), "intermission-test-token"
    env = {
        **os.environ,
        "INTERMISSION_INTERACTIVE": "1",
        "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
        "JUPYTER_DATA_DIR": str(Path(sys.prefix) / "share" / "jupyter"),
    }
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "voila"), str(nb_dir / "04_graph_approval.ipynb"),
         "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1", f"--token={token}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        else:
            raise AssertionError("voila did not start")
        yield f"http://127.0.0.1:{port}/?token={token}"
    finally:
        server.terminate()
        server.wait(20)


def test_click_approve_in_a_real_browser(voila: str) -> None:
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _need(False, "playwright")
        raise
    artifacts = ROOT / "tests" / "artifacts"
    artifacts.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1100})
            page.goto(voila, timeout=120_000)
            approve = page.locator(".jupyter-widgets button.approval-approve")
            approve.wait_for(state="visible", timeout=120_000)
            widget = page.locator(".approval-widget")
            expect(widget).to_contain_text("Change plan awaits human review")
            page.locator(".approval-comment textarea").fill("maintenance window confirmed")
            approve.click()
            expect(page.locator(".approval-result")).to_contain_text(
                "Change executed: applied change-001", timeout=60_000
            )
            expect(page.locator(".approval-status")).to_contain_text("done")
            graph = page.locator(".approval-graph svg")
            expect(graph).to_be_visible()
            html = page.locator(".approval-graph").inner_html()
            assert "executor_agent · visited" in html and "end · done" in html
            assert "approval · pending" not in html
            widget.scroll_into_view_if_needed()
            shot = artifacts / "approval-widget.png"
            widget.screenshot(path=str(shot))
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
    if os.environ.get("UPDATE_README_SCREENSHOT") == "1":
        (ROOT / "docs").mkdir(exist_ok=True)
        shutil.copy(shot, ROOT / "docs" / "approval-widget.png")
