"""The documentation site (`make docs`, issue 43) in Debian's Chromium, served from
127.0.0.1 with every other host refused (a request to one fails the test), as a reader uses
it: the home page, a tutorial page with its stored graph, the API page of ``ApprovalPolicy``,
a search for "quorum", dark mode kept across pages, and a tutorial's "try it" followed into
the JupyterLite site, where tutorial 01 runs and a person's Approve click resumes the session.

The site is the one ``make docs`` built (``INTERMISSION_DOCS_SITE`` points elsewhere); under
CI=true a missing site or Chromium fails. How long "try it" takes to a ready kernel, cold and
then warm (the browser's cache filled by the first visit), is printed and written to
tests/artifacts/docs-try-it.txt, never asserted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need, need_module
from tests.browser.lab import CHROMIUM, ROOT
from tests.browser.lite import LiteNotebook, Site, local_chromium, offline_context

DOCS = Path(os.environ.get("INTERMISSION_DOCS_SITE", ROOT / "build" / "docs" / "site"))
ARTIFACTS = ROOT / "tests" / "artifacts"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    need(Path(CHROMIUM).exists(), "Chromium (apt-get install chromium)")
    need((DOCS / "index.html").exists(), f"the docs site in {DOCS} (make docs)")
    server = Site(DOCS, tmp_path_factory.mktemp("docs") / "http.log", probe="index.html")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    need_module("playwright", "Playwright (pip install playwright)")
    yield from local_chromium()


@pytest.fixture
def refused() -> list[str]:
    return []


@pytest.fixture
def context(browser: Any, refused: list[str]) -> Iterator[Any]:
    ctx = offline_context(browser, refused, route=False)  # a browser's cache, as a reader has
    yield ctx
    ctx.close()
    assert refused == [], f"requests left 127.0.0.1: {refused[:10]}"


@pytest.fixture
def page(context: Any) -> Any:
    return context.new_page()


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"docs-{name}.png"), full_page=False)


def test_home_links_every_part_and_no_link_is_dead(page: Any, site: Site) -> None:
    from playwright.sync_api import expect

    page.goto(f"{site.base}/")
    expect(page).to_have_title("intermission")
    nav = page.locator("nav.md-nav--primary")
    for part in ("Getting started", "Tutorials", "How-to guides", "API reference"):
        expect(nav).to_contain_text(part)
    shot(page, "home")
    # every link of the home page to this site answers 200 (mkdocs --strict checked the
    # Markdown's links; this checks what the theme and the hook added too)
    hrefs = page.eval_on_selector_all(
        "a[href]", "as => as.map(a => a.href).filter(h => h.startsWith(location.origin))"
    )
    assert len(hrefs) > 20
    for href in sorted(set(h.split("#")[0] for h in hrefs)):
        assert page.request.get(href).status == 200, href


def test_a_tutorial_page_shows_its_graph_and_a_try_it_link(page: Any, site: Site) -> None:
    from playwright.sync_api import expect

    page.goto(f"{site.base}/tutorials/04_graph_approval/")
    expect(page.locator("h1").first).to_contain_text("Graph approval")
    graph = page.locator('img[src^="data:image/svg+xml"]').first
    expect(graph).to_be_visible()
    assert "graph change" in (graph.get_attribute("alt") or "")
    assert graph.evaluate("img => img.naturalWidth") > 100  # drawn, not a broken image
    link = page.locator("a[data-try-it]")
    expect(link).to_have_attribute("data-try-it", "04_graph_approval.ipynb")
    shot(page, "tutorial-04")


def test_the_api_page_of_approval_policy(page: Any, site: Site) -> None:
    from playwright.sync_api import expect

    page.goto(f"{site.base}/reference/api/#intermission.ApprovalPolicy")
    heading = page.locator('[id="intermission.ApprovalPolicy"]')
    expect(heading).to_be_visible()
    expect(heading).to_contain_text("ApprovalPolicy")
    import intermission

    summary = (intermission.ApprovalPolicy.__doc__ or "").strip().splitlines()[0]
    section = page.locator("div.doc-class", has=heading).first
    expect(section).to_contain_text(summary)
    for field in ("roles", "not_requester"):  # its fields, each with its own entry
        entry = section.locator(f"[id='intermission.ApprovalPolicy.{field}']")
        expect(entry).to_be_attached()
    expect(section.locator("pre code").first).to_contain_text("ApprovalPolicy(")  # the example
    shot(page, "api-approval-policy")


def test_search_finds_quorum(page: Any, site: Site) -> None:
    from playwright.sync_api import expect

    page.goto(f"{site.base}/")
    box = page.locator("input.md-search__input")
    box.click()
    box.press_sequentially("quorum")
    results = page.locator("li.md-search-result__item")
    expect(results.first).to_be_visible(timeout=30_000)
    assert results.count() >= 2
    expect(page.locator(".md-search-result")).to_contain_text("quorum", ignore_case=True)
    shot(page, "search-quorum")
    results.first.locator("a").first.click()
    expect(page.locator("article")).to_contain_text("quorum", ignore_case=True)


def test_dark_mode_is_kept_across_pages(page: Any, site: Site) -> None:
    from playwright.sync_api import expect

    page.goto(f"{site.base}/getting-started/")
    body = page.locator("body")
    expect(body).to_have_attribute("data-md-color-scheme", "default")
    page.locator("label[title='Switch to dark mode']").first.click()
    expect(body).to_have_attribute("data-md-color-scheme", "slate")
    dark = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    page.goto(f"{site.base}/reference/api/")
    expect(page.locator("body")).to_have_attribute("data-md-color-scheme", "slate")
    assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") == dark
    rgb = [int(x) for x in dark[dark.index("(") + 1 : dark.index(")")].split(",")[:3]]
    assert max(rgb) < 80, dark  # a dark page, not the light one relabelled
    shot(page, "dark-api")


def test_try_it_opens_tutorial_01_in_jupyterlite_and_approve_resumes(
    context: Any, site: Site
) -> None:
    from playwright.sync_api import expect

    assert (DOCS / "lite" / "jupyter-lite.json").exists(), "the Lite site is not in the docs"
    times = []
    for visit in ("cold", "warm"):  # the second visit: the browser's cache is filled
        page = context.new_page()
        page.goto(f"{site.base}/tutorials/01_quickstart/")
        link = page.get_by_role("link", name="Try it in your browser")
        started = time.monotonic()
        nb = LiteNotebook(page, None, "01_quickstart.ipynb", via=link.click)
        times.append((visit, time.monotonic() - started, nb.kernel_idle_s))
        assert "/lite/lab/" in page.url  # (JupyterLab drops ?path= once the notebook is open)
        expect(nb.panel).to_contain_text("Quickstart: an agent that asks before it acts")
        if visit == "cold":
            page.close()
    nb.run_all()
    assert nb.problems() == [], nb.describe()
    panel = nb.widget(".hitl-panel")
    expect(panel).to_contain_text("Waiting for your decision")
    panel.locator("button.hitl-approve").first.click()
    expect(panel.locator(".approval-status")).to_contain_text("done", timeout=60_000)
    expect(panel.locator(".approval-result")).to_contain_text("User 1001 has been deleted.")
    ARTIFACTS.mkdir(exist_ok=True)
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(ARTIFACTS / "lite-01-after-approve.png"))
    nb.run_from("panel.code_twin(")
    assert nb.problems() == [], nb.describe()
    assert "User 1001 has been deleted." in nb.output_of("panel.code_twin(")
    assert nb.checks_output() == "ok", nb.describe()
    lines = [f"try it, {visit}: click → kernel idle {t:.2f} s" for visit, t, _ in times]
    print("\n" + "\n".join(lines))
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "docs-try-it.txt").write_text("\n".join(lines) + "\n")


def test_llms_txt_lists_every_page_with_its_markdown_copy() -> None:
    """llms.txt (llmstxt.org's shape: a title, a summary, sections of links) names every page
    of the navigation, in its order, each linked to a Markdown copy the build wrote beside
    the page; a tutorial's copy holds its code and what it printed."""
    need((DOCS / "llms.txt").exists(), f"the docs site in {DOCS} (make docs)")
    text = (DOCS / "llms.txt").read_text()
    assert text.startswith("# intermission\n\n> ")
    links = [line.split("](", 1)[1].split(")", 1)[0] for line in text.splitlines()
             if line.startswith("- [")]  # fmt: skip
    copies = [link.split("/intermission/", 1)[1] for link in links]
    sources = [p for p in (ROOT / "docs").rglob("*") if p.suffix in (".md", ".ipynb")
               and "hooks" not in p.parts]  # fmt: skip
    assert len(copies) == len(sources), (copies, sources)
    assert copies.index("index.md") < copies.index("tutorials/01_quickstart/index.md") < (
        copies.index("reference/api/index.md")
    )
    for copy in copies:
        assert (DOCS / copy).read_text().strip(), copy
    quickstart = (DOCS / "tutorials/01_quickstart/index.md").read_text()
    assert "```python\nfrom intermission import" in quickstart
    assert "HITLInterceptor" in quickstart and "```text\n" in quickstart
    assert "¶" not in (DOCS / "how-to/cli/index.md").read_text()  # the source, not the HTML


def test_every_anchor_of_every_page_and_every_link_of_a_copy_resolves() -> None:
    """Anchors as the theme renders them (tables of contents included: mkdocs-jupyter's own
    missed headings with inline code), and the Markdown copies' relative links, from where
    each copy is served; the API pages' copies hold the docstrings, not the directive."""
    import posixpath
    import re

    need((DOCS / "llms.txt").exists(), f"the docs site in {DOCS} (make docs)")
    broken = []
    pages = [p for p in DOCS.rglob("index.html") if "lite" not in p.relative_to(DOCS).parts]
    assert len(pages) > 25
    for page in pages:
        html = page.read_text()
        ids = set(re.findall(r'\bid="([^"]+)"', html))
        for anchor in set(re.findall(r'href="#([^"]+)"', html)):
            if anchor not in ids and not anchor.startswith("__"):
                broken.append(f"{page.relative_to(DOCS)}#{anchor}")
    copies = [p for p in DOCS.rglob("index.md") if "lite" not in p.relative_to(DOCS).parts]
    for copy in copies:
        for target in re.findall(r"\]\((?!https?:|mailto:|#)([^)\s#]+)", copy.read_text()):
            where = posixpath.normpath(posixpath.join(copy.parent.as_posix(), target))
            if not Path(where).exists():
                broken.append(f"{copy.relative_to(DOCS)} → {target}")
    assert broken == []
    api = (DOCS / "reference" / "api" / "index.md").read_text()
    assert ":::" not in api and "## `ApprovalPolicy`" in api
    import intermission

    assert (intermission.ApprovalPolicy.__doc__ or "").splitlines()[0] in api
