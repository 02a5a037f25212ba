"""The tutorials as a fresh clone shows them, in a real JupyterLab 4 (issue 29): nobody has
trusted them, so Lab shows each stored HTML output through its sanitizer — as GitHub,
nbviewer and Binder do. Every stored graph must still be drawn (an image or SVG of real
size, never its labels as a paragraph of words) and every stored table keep what it means
(cells aligned left, badges in their colours). Nothing is run: what is checked is what the
file holds. The same pages trusted, and both themes, read the same.

The notebooks are copies in a temporary folder, with a notary database of their own (so
nothing this machine trusted before counts); the trusted copies are signed into it.
Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need
from tests.browser.conftest import shot
from tests.browser.lab import CHROMIUM, ROOT, TOKEN, Lab, Notebook

TUTORIALS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


def stored(name: str) -> list[dict[str, Any]]:
    """The code cells of a tutorial as stored, by their index among all cells."""
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    return [dict(c, index=i) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]


def graphs_in(cell: dict[str, Any]) -> int:
    """How many graphs a cell's stored outputs hold: inline SVGs and SVG images in its HTML,
    or else an SVG output of its own."""
    found = 0
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        html = "".join(data.get("text/html", ""))
        here = html.count("<svg") + html.count("data:image/svg+xml")
        found += here or int("image/svg+xml" in data)
    return found


def html_of(cell: dict[str, Any]) -> str:
    return "".join("".join(o.get("data", {}).get("text/html", "")) for o in cell.get("outputs", []))


WITH_PICTURES = [n for n in TUTORIALS if any(graphs_in(c) or "<table" in html_of(c)
                                             for c in stored(n))]  # fmt: skip

SHOWN = """(cell) => {
  // what the cell's outputs show: each picture (img or outermost svg) with its size and
  // whether it loaded, the words shown, table cells' alignment, badges' colours, and
  // whether any <style> reached the page (it does only where the notebook is trusted)
  const outs = [...cell.querySelectorAll('.jp-OutputArea-output')];
  const pictures = [];
  for (const out of outs) {
    for (const el of out.querySelectorAll('img, svg')) {
      if (el.tagName.toLowerCase() === 'svg' && el.parentElement.closest('svg')) continue;
      const r = el.getBoundingClientRect();
      const img = el.tagName.toLowerCase() === 'img';
      pictures.push({tag: el.tagName.toLowerCase(), width: r.width, height: r.height,
                     loaded: !img || (el.complete && el.naturalWidth > 0),
                     alt: el.getAttribute('alt') || ''});
    }
  }
  const cells = outs.flatMap(o => [...o.querySelectorAll('td, th')])
    .filter(td => td.textContent.trim())
    .map(td => getComputedStyle(td).textAlign);
  const badges = outs.flatMap(o => [...o.querySelectorAll('.im-badge')]).map(b => {
    const s = getComputedStyle(b);
    return {text: b.textContent, background: s.backgroundColor, color: s.color};
  });
  return {pictures, cells, badges, text: outs.map(o => o.innerText).join('\\n'),
          styles: outs.reduce((n, o) => n + o.querySelectorAll('style').length, 0)};
}"""

GRAPH_AS_WORDS = re.compile(r"\bn\d+->n\d+\b|\blegend\b.*\bnot reached\b", re.S)
"""What a sanitised graphviz SVG leaves: its node titles (n0->n1) and legend as text."""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    need(Path(CHROMIUM).exists(), "Chromium (apt-get install chromium)")
    need(shutil.which("jupyter-lab", path=str(Path(sys.executable).parent)) is not None,
         "JupyterLab (pip install jupyterlab)")  # fmt: skip
    from nbformat import read, write
    from nbformat.sign import NotebookNotary

    tmp = tmp_path_factory.mktemp("untrusted")
    notary = {"db_file": str(tmp / "nbsignatures.db"), "secret_file": str(tmp / "secret")}
    signer = NotebookNotary(**notary)  # (writes the secret the server then reads)
    server = Lab(tmp, extra_args=(
        *(f"--NotebookNotary.{k}={v}" for k, v in notary.items()),
        "--LabApp.expose_app_in_browser=True",  # to open pages and switch themes in place
    ))  # fmt: skip
    for name in WITH_PICTURES:  # trusted twins of the pages with pictures, signed here only
        copy = server.nb_dir / f"trusted-{name}"
        nb = read(server.nb_dir / name, as_version=4)
        nb.metadata["twin"] = "trusted"  # (a signature is of the content: the original's differs)
        signer.sign(nb)
        write(nb, copy)
    signer.store.close()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def lab_page(browser: Any, lab: Lab) -> Iterator[Any]:
    """One Lab page for the module: loading Lab is most of the time a page takes."""
    context = browser.new_context(viewport={"width": 1400, "height": 2400})
    tab = context.new_page()
    tab.goto(f"{lab.base}/lab?reset&token={TOKEN}", timeout=120_000)
    tab.wait_for_function("() => window.jupyterapp && window.jupyterapp.started", timeout=120_000)
    tab.evaluate("() => window.jupyterapp.started")
    yield tab
    context.close()
    lab.shut_down_kernels()


CLOSE = """async () => {
  // close the last page unsaved (a kernel starting dirties its metadata: no "Save?" dialog)
  for (const w of Array.from(window.jupyterapp.shell.widgets('main'))) {
    if (w.context) w.context.model.dirty = false;
    w.close();
  }
  while (document.querySelector('.jp-NotebookPanel')) await new Promise(r => setTimeout(r, 50));
}"""

OPEN = """async ([path, theme]) => {
  const app = window.jupyterapp;
  await app.commands.execute('apputils:change-theme', {theme});
  const widget = await app.commands.execute('docmanager:open', {path});
  await widget.context.ready;
}"""


def opened(lab: Lab, page: Any, path: str, theme: str) -> Any:
    """The notebook ``path`` open in the page, every cell rendered, in ``theme``."""
    page.evaluate(CLOSE)
    lab.shut_down_kernels()  # (nothing runs here: the kernels Lab starts only cost time)
    page.evaluate(OPEN, [path, "JupyterLab Dark" if theme == "dark" else "JupyterLab Light"])
    page.wait_for_function(
        "(t) => document.body.dataset.jpThemeLight === t",
        arg="false" if theme == "dark" else "true",
    )
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    panel.wait_for(timeout=60_000)
    return panel


def check_page(lab: Lab, page: Any, name: str, *, trusted: bool, theme: str) -> None:
    """Open ``name`` (its trusted twin when ``trusted``) and check every stored output."""
    panel = opened(lab, page, f"trusted-{name}" if trusted else name, theme)
    nb = Notebook.__new__(Notebook)  # (its helpers, on a page opened here)
    nb.page, nb.name, nb.panel = page, name, panel
    dom_cells = panel.locator(".jp-Cell")
    cells = stored(name)
    expect_count = len(json.loads((ROOT / "notebooks" / name).read_text())["cells"])
    page.wait_for_function(
        "([n]) => document.querySelectorAll("
        "'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').length === n",
        arg=[expect_count],
    )
    for cell in cells:
        want = graphs_in(cell)
        html = html_of(cell)
        if not want and "<table" not in html:
            continue
        where = f"{name} cell {cell['index']} ({'trusted' if trusted else 'untrusted'}, {theme})"
        element = dom_cells.nth(cell["index"])
        element.scroll_into_view_if_needed()
        element.locator(".jp-OutputArea-output").first.wait_for()
        shown = element.evaluate(SHOWN)
        # the page is what it claims: Lab dropped the stored <style> unless trusted
        if "<style" in html:
            assert (shown["styles"] > 0) == trusted, f"{where}: trust is not what the test set"
        drawn = [p for p in shown["pictures"] if p["width"] >= 150 and p["height"] >= 60
                 and p["loaded"]]  # fmt: skip
        assert len(drawn) >= want, f"{where}: {want} graph(s) stored, drawn: {shown['pictures']}"
        assert not GRAPH_AS_WORDS.search(shown["text"]), f"{where}: a graph shown as words"
        if want:
            for g in nb.graphs(element.locator(".jp-OutputArea-output")):
                assert g["width"] <= g["room"] + 1, f"{where}: a graph wider than its output: {g}"
            assert all(p["alt"] for p in drawn if p["tag"] == "img"), f"{where}: no text alt"
            trust = "trusted" if trusted else "untrusted"
            shot(element.locator(".jp-OutputArea").first,
                 f"stored-{name[:2]}-{cell['index']}-{trust}-{theme}")  # fmt: skip
        if "<table" in html:
            assert shown["cells"], f"{where}: a stored table shows no cells"
            assert set(shown["cells"]) <= {"left", "start"}, f"{where}: {set(shown['cells'])}"
            for b in shown["badges"]:
                assert b["background"] not in ("rgba(0, 0, 0, 0)", "transparent"), (where, b)
                assert b["color"] == "rgb(255, 255, 255)", (where, b)
            scope = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output"
            low = [s for s in nb.contrast(f"{scope} .im-timeline", f"{scope} .im-compare")
                   if s["ratio"] < 4.5]  # fmt: skip
            assert low == [], f"{where}: {low[:5]}"


@pytest.mark.parametrize("name", TUTORIALS)
def test_a_fresh_clone_shows_every_stored_graph_and_table_untrusted(
    lab: Lab, lab_page: Any, name: str
) -> None:
    check_page(lab, lab_page, name, trusted=False, theme="light")


@pytest.mark.parametrize(("trusted", "theme"), [(False, "dark"), (True, "light"), (True, "dark")])
@pytest.mark.parametrize("name", WITH_PICTURES)
def test_the_pictures_read_the_same_trusted_or_not_in_both_themes(
    lab: Lab, lab_page: Any, name: str, trusted: bool, theme: str
) -> None:
    check_page(lab, lab_page, name, trusted=trusted, theme=theme)
