"""The browser suite's fixtures: one JupyterLab server and one Chromium per test module, a
fresh browser context per test (its kernels shut down after it), and screenshots under
tests/artifacts/ (not committed)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need, need_module
from tests.browser.lab import ARGS, CHROMIUM, ROOT, Lab

ARTIFACTS = ROOT / "tests" / "artifacts"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    need(Path(CHROMIUM).exists(), "Chromium (apt-get install chromium)")
    need(shutil.which("jupyter-lab", path=str(Path(sys.executable).parent)) is not None,
         "JupyterLab (pip install jupyterlab)")  # fmt: skip
    server = Lab(tmp_path_factory.mktemp("lab"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module (each test opens its own context or page)."""
    need(Path(CHROMIUM).exists(), "Chromium (apt-get install chromium)")
    need_module("playwright", "Playwright (pip install playwright)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, lab: Lab) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 2400})
    tab = context.new_page()
    yield tab
    context.close()
    lab.shut_down_kernels()


def shot(locator: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"lab-{name}.png"
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(path))
    return path
