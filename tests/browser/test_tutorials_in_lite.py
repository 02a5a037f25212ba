"""The tutorials in the JupyterLite site (`make lite`, issue 23): Pyodide in Debian's
Chromium, served from 127.0.0.1 with every other host refused (a request to one fails the
test). 04 runs with real clicks — Reject with a reason, then Approve in a second run — and
so does 01, reached through the docs site's "try it" (tests/browser/test_docs_site.py, the
same Lite site copied beside the pages: Approve, then the cells below); every other
tutorial but 09, 10 and 12 runs to its own checks with the code twins deciding; 09 (MCP
over a subprocess), 10 (an AG-UI server) and 12 (the OpenTelemetry SDK) are Markdown in the
site that says first that a browser cannot run them. This is where
the concurrency seam's browser path (``pyodide.ffi.run_sync``, asyncio tasks) runs for real.

The site is the one ``make lite`` built (``INTERMISSION_LITE_SITE`` points elsewhere); under
CI=true a missing site or Chromium fails. Open-to-kernel-idle times are printed (and written
to tests/artifacts/lite-timings.txt), never asserted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need, need_module
from tests.browser.lab import CHROMIUM, ROOT
from tests.browser.lite import (
    LABELS_FIT,
    SITE,
    LiteNotebook,
    Site,
    local_chromium,
    offline_context,
)

ARTIFACTS = ROOT / "tests" / "artifacts"
TUTORIALS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
CLICKED = ("01_quickstart.ipynb", "04_graph_approval.ipynb")  # 01: test_docs_site.py
TIMINGS: list[tuple[str, float, float]] = []


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    need(Path(CHROMIUM).exists(), "Chromium (apt-get install chromium)")
    need((SITE / "jupyter-lite.json").exists(), f"the JupyterLite site in {SITE} (make lite)")
    server = Site(SITE, tmp_path_factory.mktemp("lite") / "http.log")
    yield server
    server.stop()
    if TIMINGS:
        lines = [f"{n}: JupyterLab up {up:.2f} s, kernel idle {t:.2f} s" for n, up, t in TIMINGS]
        idle = sorted(t[2] for t in TIMINGS)
        lines.append(f"open → kernel idle: median {idle[len(idle) // 2]:.2f} s over {len(idle)} "
                     f"cold pages (min {idle[0]:.2f}, max {idle[-1]:.2f})")  # fmt: skip
        print("\n" + "\n".join(lines))
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "lite-timings.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    need_module("playwright", "Playwright (pip install playwright)")
    yield from local_chromium()


@pytest.fixture
def refused() -> list[str]:
    return []


@pytest.fixture
def page(browser: Any, site: Site, refused: list[str]) -> Iterator[Any]:
    context = offline_context(browser, refused)
    tab = context.new_page()
    yield tab
    context.close()
    assert refused == [], f"requests left 127.0.0.1: {refused[:10]}"


def opened(page: Any, site: Site, name: str, *, autopilot: bool = False) -> LiteNotebook:
    nb = LiteNotebook(page, site, name, autopilot=autopilot)
    TIMINGS.append((name, nb.lab_up_s, nb.kernel_idle_s))
    return nb


def shot(locator: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(ARTIFACTS / f"lite-{name}.png"))


def goes_on(nb: LiteNotebook, twin: str, shows: str | None = None) -> None:
    """After the click the person runs the cells from the code twin down: none fails, and
    the page's own checks say ok."""
    nb.run_from(twin)
    assert nb.problems() == [], nb.describe()
    if shows is not None:
        assert shows in nb.output_of(twin)
    assert nb.checks_output() == "ok", nb.describe()


SEAM = """
import asyncio, sys, threading
from intermission import InMemoryAgentSession, SessionBusyError
from intermission import _concurrency as c
from intermission.examples import build_change_graph
from intermission.notebook import ApprovalWidget, Inbox
from intermission.notebook.graph_view import NO_DOT_HINT, svg_of
from intermission.stores import SQLiteStore
print("backend:", sys.platform, c.BACKEND.name)
try:
    threading.Thread(target=print).start()
except RuntimeError as exc:
    print("threads:", exc)

# 1. .call() in a cell (run_sync inside the running loop)
team = build_change_graph()
s = InMemoryAgentSession.of("change-001")
team.prompt("Upgrade the order service").session(s).call()
print("call:", s.is_pending)

# an exception the cell catches is raised there only, not shown as an error output too
async def boom():
    raise ValueError("caught by the cell")
try:
    c.run_sync(boom())
except ValueError as exc:
    print("caught:", exc)

# a stream read with a plain `for` (its run waits on this loop between two events)
from intermission import ReActAgent, ScriptedModel
streamer = ReActAgent.of(ScriptedModel(["sunny and mild"], chunk_size=4)).name("w").build()
request = streamer.prompt("weather?").session(InMemoryAgentSession.of("w1"))
kinds = [e.kind for e in request.stream()]
print("stream:", kinds[0], kinds[-1], "reason_delta" in kinds)

# 2. a click's resume in the background, and the cell after it waiting for it
widget = ApprovalWidget(team, s)
widget.runner.run_in_background(widget._approve_action("alice"))
print("background:", widget.runner.wait().content)

# 3. the lease is renewed while its holder works: another holder is refused after the
#    lease time has passed three times over
store = SQLiteStore("/tmp/seam.sqlite", lease_ms=60)
other = SQLiteStore("/tmp/seam.sqlite", lease_ms=60)
s2 = InMemoryAgentSession.of("change-002")
team.prompt("Upgrade the order service").session(s2).call()
store.save(s2)
with store.resume("change-002"):
    await asyncio.sleep(0.2)
    try:
        with other.resume("change-002"):
            print("lease: lapsed")
    except SessionBusyError:
        print("lease: renewed")

# 5. the Inbox polls the store beside the cell
inbox = Inbox(store, {"change": team}, poll_s=0.02)
polls = []
inbox.refresh = lambda: polls.append(1)
await asyncio.sleep(0.2)
inbox.close()
print("inbox polled:", len(polls) > 2)
store.close(); other.close()

# 4. no dot program: Graphviz as WebAssembly draws instead; the hint fits a browser
import graphviz
try:
    graphviz.Source("digraph { a -> b }").pipe(format="svg")
except OSError as exc:
    print("dot:", exc)
print("svg:", (svg_of("digraph { a -> b }") or "")[:4], "| apt-get:", "apt-get" in NO_DOT_HINT)

# 6. completion (jedi) works without the third-party stubs the build leaves out
import jedi
names = [c.name for c in jedi.Script("import json\\njson.du").complete(2, 7)]
inferred = jedi.Script("import os\\nos.getcwd()").infer(2, 5)
print("complete:", names, "| stdlib stubs:", bool(inferred))
"""


def test_the_seam_runs_on_the_event_loop_in_the_browser(page: Any, site: Site) -> None:
    """Each place the package used to start a thread, for real in Pyodide (issue 23's
    failures 1-4; 5's poller too)."""
    nb = opened(page, site, "01_quickstart.ipynb")
    out = nb.execute(SEAM)
    assert out.splitlines() == [
        "backend: emscripten event-loop",
        "threads: can't start new thread",
        "call: True",
        "caught: caught by the cell",
        "stream: run_start run_end True",
        "background: Change executed: applied change-001",
        "lease: renewed",
        "inbox polled: True",
        "dot: [Errno 138] emscripten does not support processes.",
        "svg: <svg | apt-get: False",
        "complete: ['dump', 'dumps'] | stdlib stubs: True",
    ], out


# a server, a subprocess, the OpenTelemetry SDK (not bundled)
AS_TEXT = [t for t in TUTORIALS if t.startswith(("09_", "10_", "12_"))]
# Every tutorial runs under nbval on CPython; in the browser, CI runs those that take a path
# of their own there (a tool approval, SQLite in Pyodide's file system, parallel branches on
# the event loop, two people) — with 01 (the docs' try-it) and 04 (clicked) besides. The
# others run the same seam; IM_LITE_ALL=1 runs them all (about 30 s each).
_OWN_PATH = ("03_", "05_", "06_", "11_")
AUTOPILOT = [
    t for t in TUTORIALS if t not in CLICKED and t not in AS_TEXT
    and (os.environ.get("IM_LITE_ALL") == "1" or t.startswith(_OWN_PATH))
]  # fmt: skip


@pytest.mark.parametrize("name", AUTOPILOT)
def test_a_tutorial_runs_to_its_checks(page: Any, site: Site, name: str) -> None:
    nb = opened(page, site, name, autopilot=True)
    nb.run_all()
    assert nb.problems() == [], nb.describe()
    assert nb.checks_output() == "ok", nb.describe()


SAMPLE_LOADING = """(() => {
  // from the first moment of the page: what the loading box says, every 100 ms
  window.__loading = [];
  const sample = () => {
    const box = document.getElementById('im-lite-loading');
    window.__loading.push(box ? {
      t: performance.now() / 1000, step: box.dataset.step || '',
      downloaded: Number(box.dataset.downloaded || 0), total: Number(box.dataset.total || 0),
      hidden: box.classList.contains('im-ll-hidden'), text: box.textContent,
      readyS: box.dataset.readyS || null,
    } : {t: performance.now() / 1000, step: 'none'});
    setTimeout(sample, 100);
  };
  sample();
  // and every text the box shows, however briefly (a fast machine downloads the interpreter
  // between two samples: CI once missed it)
  window.__loadingTexts = [];
  new MutationObserver(() => {
    const box = document.getElementById('im-lite-loading');
    const text = box ? box.textContent : null;
    const seen = window.__loadingTexts;
    if (text && (seen.length === 0 || seen[seen.length - 1] !== text)) seen.push(text);
  }).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
})()"""


def test_the_site_says_what_it_is_doing_while_python_loads(
    browser: Any, site: Site, refused: list[str]
) -> None:
    """No blank spinner then "No Kernel": from the page's first moments a box says which
    step runs (JupyterLab, then Python's download, then the kernel), what it downloads, how
    much of how much, and finally how long it took — the same time this test measures."""
    context = offline_context(browser, refused)
    context.add_init_script(SAMPLE_LOADING)
    page = context.new_page()
    try:
        nb = opened(page, site, "01_quickstart.ipynb")
        page.wait_for_function(
            "() => { const b = document.getElementById('im-lite-loading');"
            " return b && b.dataset.step === 'ready'; }", timeout=30_000,
        )  # fmt: skip
        page.wait_for_function(
            "() => document.getElementById('im-lite-loading').classList"
            ".contains('im-ll-hidden')", timeout=30_000,
        )  # fmt: skip
        samples = page.evaluate("() => window.__loading")
        texts = page.evaluate("() => window.__loadingTexts")
        manifest = page.evaluate(
            "async () => (await fetch('../static/pyodide/loading.json')).json()"
        )
    finally:
        context.close()
    assert refused == []
    shown = [s for s in samples if s["step"] != "none"]
    before = [s for s in shown if s["step"] != "ready"]
    # 1. the box is there while JupyterLab loads, saying so
    assert before and before[0]["step"] == "page" and "Loading JupyterLab" in before[0]["text"]
    # 2. then Python's download: what, how much of how much, moving forward
    loading = [s for s in before if s["step"] == "download" and not s["hidden"]]
    moving = [s for s in loading if 0 < s["downloaded"] < s["total"]]
    assert moving, f"no download in progress was shown: {[s['text'] for s in before][-5:]}"
    assert all(" of " in s["text"] and " MB" in s["text"] and "Now:" in s["text"] for s in moving)
    # what it downloads: every text the box showed (a sample every 100 ms can miss a phase)
    named = [t for t in texts if "Python interpreter" in t or "standard library" in t]
    assert named and all(" of " in t and " MB" in t for t in named), texts[-8:]
    counts = [s["downloaded"] for s in loading]
    assert counts == sorted(counts), "the count went backwards"
    # how much: what the build said a kernel's start downloads is what was downloaded
    ready = next(s for s in shown if s["step"] == "ready")
    assert ready["downloaded"] == manifest["total"] == ready["total"], (ready, manifest["total"])
    assert "Python is ready" in ready["text"]
    # 3. the box's time is this test's, both from the moment the page opened (the two poll
    #    for idle a little apart; a box counting from elsewhere would be seconds off)
    assert abs(float(ready["readyS"]) - nb.kernel_idle_s) <= 2.0, (ready, nb.kernel_idle_s)
    print(f"\nthe loading box: {len(loading)} samples of the download; ready after "
          f"{ready['readyS']} s (this test: {nb.kernel_idle_s:.2f} s); "
          f"{manifest['total'] / 1e6:.1f} MB")  # fmt: skip


def _decision_moment(nb: LiteNotebook) -> Any:
    from playwright.sync_api import expect

    widget = nb.widget(".approval-widget")
    expect(widget).to_contain_text("Change plan awaits human review")
    expect(widget.locator("button.approval-approve")).to_be_enabled()
    assert widget.locator(".approval-graph svg").count() == 1  # a picture, drawn by viz.js
    return widget


def test_04_a_person_rejects_with_a_reason_then_approves_in_a_second_run(
    page: Any, site: Site
) -> None:
    from playwright.sync_api import expect

    nb = opened(page, site, "04_graph_approval.ipynb")
    nb.run_all()
    assert nb.problems() == [], nb.describe()
    widget = _decision_moment(nb)
    # the graphs viz.js drew (the cell's and the widget's) fit their labels in their boxes
    fit = nb.panel.evaluate(LABELS_FIT)
    assert fit["graphs"] >= 2 and fit["texts"] > 20, fit
    assert fit["overflow"] == [], fit["overflow"]
    widget.locator(".approval-reason input").fill("no rollback plan yet")
    widget.locator("button.approval-reject").click()
    expect(widget.locator(".approval-result")).to_contain_text(
        "Change rejected: no rollback plan yet", timeout=60_000
    )
    expect(widget).to_contain_text("REJECT by")
    shot(widget, "04-after-reject")
    goes_on(nb, "widget.code_twin(")

    nb.restart_and_run_all()
    widget = _decision_moment(nb)
    widget.locator("button.approval-approve").click()
    expect(widget.locator(".approval-result")).to_contain_text(
        "Change executed: applied change-001", timeout=60_000
    )
    expect(widget.locator(".approval-status")).to_contain_text("done")
    shot(widget, "04-after-approve")
    goes_on(nb, "widget.code_twin(", "Change executed: applied change-001")


@pytest.mark.parametrize("name", AS_TEXT)
def test_a_tutorial_a_browser_cannot_run_is_text_that_says_so_and_starts_no_python(
    page: Any, site: Site, name: str
) -> None:
    """09, 10 and 12 are Markdown in the site: the page says first why it cannot run, and
    opening it downloads no Python (no kernel starts)."""
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    text = name.removesuffix(".ipynb") + ".md"
    page.goto(f"{site.base}/lab/index.html?path={text}", timeout=120_000)
    editor = page.locator(".jp-FileEditor:not(.lm-mod-hidden), .jp-RenderedMarkdown").first
    editor.wait_for(timeout=120_000)
    from playwright.sync_api import expect

    expect(editor).to_contain_text("cannot run in a browser", timeout=60_000)
    page.wait_for_timeout(2000)  # (a kernel would have asked for the interpreter by now)
    assert not [u for u in fetched if "pyodide.asm.wasm" in u or u.endswith(".whl")], fetched
