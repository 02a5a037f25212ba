"""Driving a real JupyterLab 4 with Playwright and Debian's Chromium (issue 15).

A ``Lab`` is a ``jupyter lab`` server on 127.0.0.1 with its own token, home, settings and
runtime folders (no news toast, no windowing), serving copies of the tutorials. Each page
opens its notebook in a reset workspace: Lab would otherwise reopen every notebook an earlier
test opened, and the tab it activates last (not always ours) would get the Run All.
A ``Notebook`` is one open tutorial: Run All, wait until the kernel is idle, find cells and
widgets, click, read outputs. Selectors are the ones that work in Lab 4
(``shared/reference/notebook-testing.md``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
]  # fmt: skip
TOKEN = "intermission-lab-test"


def html_shows(locator: Any, *parts: str, timeout: float = 30.0) -> str:
    """The locator's inner HTML once it contains every part. A widget's pieces (label, graph,
    result) are separate models whose updates reach the page one by one, so what one piece
    shows now another may show a moment later."""
    deadline = time.monotonic() + timeout
    while True:
        html = str(locator.inner_html())
        if all(part in html for part in parts):
            return html
        if time.monotonic() > deadline:
            missing = [part for part in parts if part not in html]
            raise AssertionError(f"{missing} not shown within {timeout:.0f} s in: {html[:2000]}")
        time.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Lab:
    """A JupyterLab server for one test module."""

    def __init__(self, tmp: Path, extra_args: tuple[str, ...] = ()) -> None:
        self.nb_dir = tmp / "notebooks"
        self.nb_dir.mkdir()
        for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
            shutil.copy(nb, self.nb_dir)
        settings = tmp / "settings"
        for path, value in {
            "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
                {"fetchNews": "false", "checkForUpdates": False},
            "@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
                {"windowingMode": "none"},
            "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings":
                {"autosave": False},
        }.items():  # fmt: skip
            (settings / path).parent.mkdir(parents=True, exist_ok=True)
            (settings / path).write_text(json.dumps(value))
        env = {k: v for k, v in os.environ.items() if k != "INTERMISSION_AUTOPILOT"}
        env.update(
            HOME=str(tmp / "home"),
            JUPYTER_CONFIG_DIR=str(tmp / "config"),
            JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
            JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
            JUPYTERLAB_SETTINGS_DIR=str(settings),
            JUPYTER_DATA_DIR=str(Path(sys.prefix) / "share" / "jupyter"),
        )
        (tmp / "home").mkdir()
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = (tmp / "lab.log").open("w")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser",
             "--ip=127.0.0.1", f"--port={self.port}", f"--IdentityProvider.token={TOKEN}",
             "--allow-root", f"--notebook-dir={self.nb_dir}", "--ServerApp.open_browser=False",
             *extra_args],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.base}/api?token={TOKEN}", timeout=2):
                    return
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.3)
        self.stop()
        raise AssertionError(f"JupyterLab did not start; see {self.log.name}")

    def set_theme(self, theme: str) -> None:
        """Switch Lab's theme ("JupyterLab Light" / "JupyterLab Dark") for pages opened next."""
        body = json.dumps({"raw": json.dumps({"theme": theme})}).encode()
        request = urllib.request.Request(
            f"{self.base}/lab/api/settings/@jupyterlab/apputils-extension:themes",
            data=body, method="PUT",
            headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
        )  # fmt: skip
        urllib.request.urlopen(request, timeout=30).close()

    def wait_kernel_idle(self, path: str, timeout: float = 120.0) -> None:
        """Wait until the server says the kernel of notebook ``path`` is idle (the front
        end's own indicators differ between Lab and Notebook 7; the server's do not)."""
        deadline = time.monotonic() + timeout
        url = f"{self.base}/api/sessions?token={TOKEN}"
        idle = 0
        while time.monotonic() < deadline:
            with urllib.request.urlopen(url, timeout=10) as reply:
                states = [s["kernel"]["execution_state"] for s in json.load(reply)
                          if s.get("path", "").endswith(path) and s.get("kernel")]  # fmt: skip
            idle = idle + 1 if states and all(st == "idle" for st in states) else 0
            if idle >= 3:  # a moment of idle between queued cells is not the end
                return
            time.sleep(0.4)
        raise AssertionError(f"the kernel of {path} never became idle")

    def shut_down_kernels(self) -> None:
        """End every notebook session (and its kernel): a test leaves no live Inbox or
        server behind to slow the next one."""
        url = f"{self.base}/api/sessions?token={TOKEN}"
        with urllib.request.urlopen(url, timeout=10) as reply:
            sessions = json.load(reply)
        for s in sessions:
            request = urllib.request.Request(
                f"{self.base}/api/sessions/{s['id']}?token={TOKEN}", method="DELETE"
            )
            urllib.request.urlopen(request, timeout=30).close()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


IDLE = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  if (!panel) return false;
  const ind = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const kernel = document.querySelector('.jp-KernelName jp-button, .jp-Toolbar-kernelName');
  const name = kernel && (kernel.getAttribute('aria-label') || kernel.textContent || '');
  if (!ind || ind.getAttribute('data-status') !== 'idle' || !name.includes('Python')) return false;
  return ![...panel.querySelectorAll('.jp-InputArea-prompt')]
    .some(p => (p.textContent || '').includes('*'));
}"""


CONTRAST = """(selectors) => {
  // WCAG contrast of every text node under each selector: its colour (alpha-blended) against
  // the backgrounds below it, composited down to the first opaque one
  const cv = document.createElement('canvas'); cv.width = cv.height = 1;
  const g = cv.getContext('2d', {willReadFrequently: true});
  const rgba = c => { g.clearRect(0, 0, 1, 1); g.fillStyle = '#000'; g.fillStyle = c;
    g.fillRect(0, 0, 1, 1); const d = g.getImageData(0, 0, 1, 1).data;
    return [d[0], d[1], d[2], d[3] / 255]; };
  const over = (c, base) => base.map((v, i) => c[i] * c[3] + v * (1 - c[3]));
  const lum = rgb => { const f = v => { v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(rgb[0]) + 0.7152 * f(rgb[1]) + 0.0722 * f(rgb[2]); };
  const up = e => e.parentElement || (e.getRootNode && e.getRootNode().host) || null;
  const all = sel => { const out = [];  // through shadow roots too (marimo's widgets)
    const walk = root => { out.push(...root.querySelectorAll(sel));
      for (const e of root.querySelectorAll('*')) if (e.shadowRoot) walk(e.shadowRoot); };
    walk(document); return out; };
  const backdrop = el => { const layers = [];
    for (let e = el; e; e = up(e)) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) { layers.push(c); if (c[3] >= 0.99) break; } }
    let base = [255, 255, 255];
    for (const c of layers.reverse()) base = over(c, base);
    return base; };
  const found = [];
  for (const sel of selectors) {
    for (const root of all(sel)) {
      const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        const text = n.textContent.trim();
        if (!text) continue;
        const el = n.parentElement, bg = backdrop(el);
        const fg = over(rgba(getComputedStyle(el).color), bg);
        const [a, b] = [lum(fg), lum(bg)];
        found.push({sel, text: text.slice(0, 60),
                    ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)});
      } } }
  return found;
}"""


class Notebook:
    """One tutorial open in the Lab page."""

    def __init__(self, page: Any, lab: Lab, name: str) -> None:
        self.page = page
        self.name = name
        page.goto(f"{lab.base}/lab/tree/{name}?reset&token={TOKEN}", timeout=120_000)
        self.panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        self.panel.wait_for(timeout=120_000)
        self.wait_idle()

    def wait_idle(self, timeout: float = 120_000) -> None:
        # twice in a row: the indicator reads idle for a moment between queued cells
        for _ in range(2):
            self.page.wait_for_function(IDLE, timeout=timeout)
            self.page.wait_for_timeout(400)
        self._dismiss_toasts()

    def _dismiss_toasts(self) -> None:
        for button in self.page.locator(".jp-toast-button:has-text('No')").all():
            try:
                button.click(timeout=1000)
            except Exception:
                continue

    def menu(self, menu: str, item: str) -> None:
        self.page.locator(f".lm-MenuBar-item:has-text('{menu}')").first.click()
        self.page.locator(".lm-Menu-item", has=self.page.locator(
            f".lm-Menu-itemLabel:text-is('{item}')")).first.click()  # fmt: skip
        dialog = self.page.locator(".jp-Dialog button.jp-mod-accept")
        if item.startswith("Restart") and dialog.count() == 0:
            self.page.wait_for_timeout(300)
        if dialog.count():
            dialog.first.click()

    def run_all(self) -> None:
        self.menu("Run", "Run All Cells")
        self.page.wait_for_timeout(500)
        self.wait_idle()
        self._all_ran()

    def _all_ran(self) -> None:
        # a Run All that went nowhere would leave the saved outputs to be checked
        prompts = [(p.text_content() or "").strip()
                   for p in self.panel.locator(".jp-CodeCell .jp-InputPrompt").all()]  # fmt: skip
        if not prompts or any(not any(c.isdigit() for c in p) for p in prompts):
            raise AssertionError(f"not every cell of {self.name} ran:\n{self.describe()}")

    def restart_and_run_all(self) -> None:
        self.menu("Kernel", "Restart Kernel and Run All Cells…")
        self.page.wait_for_timeout(1500)
        self.wait_idle()
        self._all_ran()

    def cell(self, text: str) -> Any:
        """The code cell whose source contains ``text``."""
        cells = self.panel.locator(".jp-CodeCell").filter(
            has=self.page.locator(".jp-InputArea-editor", has_text=text)
        )
        return cells.first

    def run_from(self, text: str) -> None:
        """Run the cell containing ``text`` and every cell below it (a person who clicked
        in a widget goes on with the notebook)."""
        cell = self.cell(text)
        cell.locator(".jp-InputPrompt").click()
        self.page.keyboard.press("Escape")
        self.menu("Run", "Run Selected Cell and All Below")
        self.page.wait_for_timeout(500)
        self.wait_idle()

    def contrast(self, *selectors: str) -> list[dict[str, Any]]:
        """The WCAG contrast ratio of every text under ``selectors`` in this notebook."""
        return list(self.page.evaluate(CONTRAST, list(selectors)))

    def graphs(self, locator: Any) -> list[dict[str, Any]]:
        """Each graph under ``locator`` (its first match): rendered width, room (its
        output's width), and the rendered pixel size of its smallest text."""
        locator.first.scroll_into_view_if_needed()
        return list(locator.first.evaluate(GRAPHS))

    def output_of(self, text: str) -> str:
        return str(self.cell(text).locator(".jp-OutputArea").text_content() or "")

    def widget(self, selector: str, timeout: float = 60_000) -> Any:
        """The first widget matching ``selector`` once visible; if it never shows, the
        assertion says what each cell showed instead (prompt, output types, text)."""
        found = self.panel.locator(selector).first
        try:
            found.wait_for(state="visible", timeout=timeout)
        except Exception as exc:
            shown = self.describe()
            raise AssertionError(f"{selector} not visible in {self.name}:\n{shown}") from exc
        return found

    def describe(self) -> str:
        """What every code cell shows: its prompt and each output's MIME type and text."""
        lines = []
        for cell in self.panel.locator(".jp-CodeCell").all():
            prompt = (cell.locator(".jp-InputPrompt").text_content() or "").strip()
            source = (cell.locator(".jp-InputArea-editor").text_content() or "")[:60]
            lines.append(f"{prompt} {source!r}")
            for out in cell.locator(".jp-OutputArea-output").all():
                mime = out.get_attribute("data-mime-type") or "?"
                classes = out.get_attribute("class") or ""
                text = " ".join((out.text_content() or "").split())[:200]
                lines.append(f"    {mime} [{classes}] {text!r}")
        return "\n".join(lines)

    def problems(self) -> list[str]:
        """Error outputs, widgets that failed to render, widgets shown as plain text."""
        found = []
        for out in self.panel.locator(".jp-OutputArea-output").all():
            mime = out.get_attribute("data-mime-type") or ""
            text = out.text_content() or ""
            if mime == "application/vnd.jupyter.stderr" and "Traceback" in text:
                found.append(text[:500])
            if "Error displaying widget" in text:
                found.append("Error displaying widget")
            if mime == "text/plain" and any(
                marker in text for marker in ("<HITLPanel ", "<ApprovalWidget ", "<Inbox ",
                                              "<Stepper ", "VBox(", "HBox(")
            ):  # fmt: skip
                found.append(f"a widget shown as text: {text[:120]}")
        found += [
            f"error output: {(e.text_content() or '')[:500]}"
            for e in self.panel.locator(".jp-OutputArea-output[data-mime-type="
                                        "'application/vnd.jupyter.error']").all()
        ]  # fmt: skip
        return found


def goes_on(nb: Notebook, twin: str, shows: str | None = None, shown_by: str | None = None) -> None:
    """After the click, a person runs the cells from the code twin down: none fails, the
    twin's cell (or ``shown_by``) shows ``shows``, and the page's own checks say ok."""
    nb.run_from(twin)
    problems = nb.problems()
    assert problems == [], problems
    if shows is not None:
        assert shows in nb.output_of(shown_by or twin)
    assert nb.output_of("what this page taught").strip() == "ok"


GRAPHS = """async (root) => {
  // every graph under scope: its rendered width, the width it has to fit in, and the
  // rendered size of its smallest text (SVG font size times the scale it is drawn at)
  const out = [];
  const sizes = text => [...text.matchAll(/font-size="([0-9.]+)"/g)].map(m => parseFloat(m[1]));
  {
    const box = root.closest('.jp-OutputArea-output') || root.parentElement;
    for (const svg of root.querySelectorAll('svg')) {
      if (!svg.viewBox || !svg.viewBox.baseVal || !svg.viewBox.baseVal.width) continue;
      const w = svg.getBoundingClientRect().width;
      const fs = sizes(svg.outerHTML);
      out.push({kind: 'inline', width: w, room: box.getBoundingClientRect().width,
                minText: Math.min(...fs) * w / svg.viewBox.baseVal.width});
    }
    for (const img of root.querySelectorAll('img')) {
      const text = await (await fetch(img.src)).text();
      const vb = text.match(/viewBox="[0-9.\\-]+ [0-9.\\-]+ ([0-9.]+)/);
      const w = img.getBoundingClientRect().width;
      out.push({kind: 'img', width: w, room: box.getBoundingClientRect().width,
                minText: vb ? Math.min(...sizes(text)) * w / parseFloat(vb[1]) : 0});
    }
  }
  return out;
}"""
