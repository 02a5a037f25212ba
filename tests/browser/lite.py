"""Driving the JupyterLite site (`make lite`) with Playwright and Debian's Chromium (issue 23).

A ``Site`` serves the built folder with ``python -m http.server`` on 127.0.0.1, as a person
hosting it would. ``offline_context`` is a browser context in which every host but
127.0.0.1 is refused, twice over: Chromium resolves no other name, and every request to any
other host is aborted and recorded, so a test can fail on it. A ``LiteNotebook`` is one
tutorial open in the site: the same Lab UI as ``lab.Notebook``, with the Pyodide kernel.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.browser.lab import ARGS, CHROMIUM, ROOT, Notebook, _free_port

SITE = Path(os.environ.get("INTERMISSION_LITE_SITE", ROOT / "build" / "lite" / "site"))
LOCAL_ARGS = [*ARGS, "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]

KERNEL_IDLE = """() => {
  const app = window.jupyterapp;
  const w = app && app.shell.currentWidget;
  const kernel = w && w.sessionContext && w.sessionContext.session
    && w.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle'
    && w.sessionContext.kernelDisplayName.includes('Pyodide');
}"""

EXECUTE = """async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const out = [];
  const future = kernel.requestExecute({code, store_history: false});
  future.onIOPub = (msg) => {
    const c = msg.content;
    if (c.text) out.push(c.text);
    if (c.ename) out.push(c.ename + ': ' + c.evalue);
  };
  const reply = await future.done;
  return {status: reply.content.status, out: out.join('')};
}"""


class Site:
    """The built site served on a free port of 127.0.0.1."""

    def __init__(self, folder: Path, log: Path, *, probe: str = "jupyter-lite.json") -> None:
        """``probe``: a file of the site that answers once the server is up."""
        self.folder = folder
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1",
             "--directory", str(folder)],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.base}/{probe}", timeout=2):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise AssertionError(f"the site's server did not start; see {log}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(10)
        self.log.close()


def local_chromium() -> Iterator[Any]:
    """Debian's Chromium, headless, resolving no host but 127.0.0.1 (a module fixture's body:
    ``yield from local_chromium()``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LOCAL_ARGS)
        yield chromium
        chromium.close()


def offline_context(browser: Any, refused: list[str], *, route: bool = True) -> Any:
    """A fresh context (cold cache) where any request off 127.0.0.1 is aborted and added to
    ``refused``. ``route=False`` leaves the aborting to Chromium's resolver (LOCAL_ARGS
    resolves no other host) and only records: Playwright turns the HTTP cache off in a
    context that routes requests, and every request would pass through Python."""
    context = browser.new_context(viewport={"width": 1400, "height": 2400})

    def guard(route: Any) -> None:
        host = urllib.parse.urlsplit(route.request.url).hostname
        if route.request.url.startswith(("data:", "blob:")) or host == "127.0.0.1":
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort("blockedbyclient")

    if route:
        context.route("**/*", guard)

    def seen(request: Any) -> None:  # also what the route does not see (a worker's fetch)
        host = urllib.parse.urlsplit(request.url).hostname
        if host not in (None, "127.0.0.1") and request.url not in refused:
            refused.append(request.url)

    context.on("request", seen)
    return context


class LiteNotebook(Notebook):
    """One tutorial open in the site, its Pyodide kernel idle."""

    def __init__(
        self,
        page: Any,
        site: Site | None,
        name: str,
        *,
        autopilot: bool = False,
        via: Callable[[], None] | None = None,
    ) -> None:
        """Open ``name`` in the site, or let ``via`` get there (a click on a link, say)."""
        self.page = page
        self.name = name
        started = time.monotonic()
        if via is not None:
            via()
        else:
            assert site is not None
            page.goto(f"{site.base}/lab/index.html?path={name}", timeout=120_000)
        self.panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        self.panel.wait_for(timeout=120_000)
        self.lab_up_s = time.monotonic() - started
        """Page opened → the notebook shown (JupyterLab is up)."""
        page.wait_for_function(KERNEL_IDLE, timeout=180_000, polling=50)
        self.kernel_idle_s = time.monotonic() - started
        """Page opened → the Pyodide kernel idle."""
        if autopilot:  # before `import intermission`: the code twins decide, as under nbval
            self.execute("import os; os.environ['INTERMISSION_AUTOPILOT'] = '1'")
        self.wait_idle(timeout=180_000)

    def checks_output(self) -> str:
        """What the tutorial's own checks print: its "what this page taught" cell, or else
        its last code cell."""
        cell = self.cell("what this page taught")
        if cell.count() == 0:
            cell = self.panel.locator(".jp-CodeCell").last
        return str(cell.locator(".jp-OutputArea").text_content() or "").strip()

    def execute(self, code: str) -> str:
        """Run ``code`` in the kernel, outside the notebook; its printed text."""
        reply = self.page.evaluate(EXECUTE, code)
        assert reply["status"] == "ok", reply["out"]
        return str(reply["out"])


LABELS_FIT = """async (root) => {
  // every graph under root (inline SVGs, and SVG images drawn from data: URLs): each node's
  // texts, as the browser lays them out, against the smallest shape of the node around them
  const sources = [];
  for (const svg of root.querySelectorAll('svg')) {
    const outer = !svg.parentElement.closest('svg');
    if (outer && svg.querySelector('g.node')) sources.push(svg.outerHTML);
  }
  for (const img of root.querySelectorAll('img[src^="data:image/svg+xml"]')) {
    sources.push(await (await fetch(img.src)).text());
  }
  const host = document.createElement('div');
  host.style.cssText = 'position:absolute;left:-20000px;top:0';
  document.body.appendChild(host);
  const overflow = [];
  let texts = 0;
  for (const source of sources) {
    host.innerHTML = source;
    for (const node of host.querySelectorAll('g.node')) {
      const shapes = [...node.querySelectorAll('polygon, ellipse, path, rect')]
        .map(s => s.getBBox()).filter(b => b.width > 0 && b.height > 0);
      for (const text of node.querySelectorAll('text')) {
        const b = text.getBBox();
        const cx = b.x + b.width / 2, cy = b.y + b.height / 2;
        const around = shapes.filter(s => s.x <= cx && cx <= s.x + s.width
                                          && s.y <= cy && cy <= s.y + s.height);
        if (!around.length) continue;
        texts += 1;
        const box = around.reduce((a, c) => a.width * a.height <= c.width * c.height ? a : c);
        const over = Math.max(box.x - b.x, b.x + b.width - (box.x + box.width));
        if (over > 0.5) overflow.push({text: text.textContent, over: +over.toFixed(1),
                                       text_width: +b.width.toFixed(1),
                                       box_width: +box.width.toFixed(1)});
      }
    }
  }
  host.remove();
  return {graphs: sources.length, texts, overflow};
}"""
"""Where a graph's labels stick out of their boxes (a browser font wider than the one the
layout measured): every graph under a root, each text against the shape around it."""
