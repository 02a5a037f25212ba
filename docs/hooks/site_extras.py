"""What the docs site needs beyond mkdocs-material, mkdocs-jupyter and mkdocstrings.

- Each tutorial page opens with a "Try it in your browser" link into the JupyterLite site
  (``make lite``), which the build copies beside the pages as ``lite/``; without a built
  Lite site the link is left out and the build says so (``make docs`` always builds it).
- ``llms.txt`` (the llmstxt.org shape) lists every page with a one-line description, and
  each page has a Markdown copy beside its HTML (``…/index.md``; a tutorial's copy is made
  from its cells and their text outputs), so a model or a script reads the docs as text.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import os
import posixpath
import re
import shutil
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.site_extras")

ROOT = Path(__file__).resolve().parents[2]
LITE = Path(os.environ.get("INTERMISSION_LITE_SITE", ROOT / "build" / "lite" / "site"))
# The tutorials the Lite site cannot run (they need a subprocess, a server or the OTel SDK);
# their page there is Markdown that says so, so "try it" would open nothing to run.
NOT_IN_LITE = {"09_mcp_tools", "10_approve_from_anywhere", "12_traces"}

_pages: list[tuple[str, str, str, str]] = []  # (title, url, markdown copy, description)


def _lite_path(page: Any) -> str | None:
    src = page.file.src_uri
    if not (src.startswith("tutorials/") and src.endswith(".ipynb")):
        return None
    stem = Path(src).stem
    return None if stem in NOT_IN_LITE else f"{stem}.ipynb"


HEADING = re.compile(r'<h([1-6])[^>]*\bid="([^"]+)"[^>]*>(.*?)</h\1>', re.S)


def _toc_tokens(html: str) -> list[dict[str, Any]]:
    """A table of contents from the headings as rendered: mkdocs-jupyter's own drops inline
    code from the names it slugs, so its anchors missed headings such as
    "From an interceptor (`on_tool_call_start`)"."""
    tokens: list[dict[str, Any]] = []
    stack: list[dict[str, Any]] = []
    for level, anchor, inner in HEADING.findall(html):
        name = re.sub(r"<[^>]+>", "", inner).replace("\u00b6", "").strip()
        token = {"level": int(level), "id": anchor, "name": name, "children": []}
        while stack and stack[-1]["level"] >= token["level"]:
            stack.pop()
        (stack[-1]["children"] if stack else tokens).append(token)
        stack.append(token)
    return tokens


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """A tutorial page opens with its "try it" link (when the Lite site can run it), and
    its table of contents links the headings' real ids."""
    if page.file.src_uri.endswith(".ipynb"):
        from mkdocs.structure.toc import get_toc

        page.toc = get_toc(_toc_tokens(html))  # type: ignore[arg-type]
    notebook = _lite_path(page)
    if notebook is not None and (LITE / "jupyter-lite.json").exists():
        depth = page.url.count("/")
        href = "../" * depth + f"lite/lab/index.html?path={notebook}"
        button = (
            f'<p class="try-it"><a class="md-button md-button--primary" href="{href}" '
            f'data-try-it="{notebook}">Try it in your browser</a> '
            "JupyterLite: Python runs in this page, nothing to install; a box says what "
            "loads while it loads.</p>"
        )
        html = button + html
    return html


def _notebook_markdown(path: Path) -> str:
    """A tutorial as Markdown: its Markdown cells, its code cells fenced, and what they
    printed (text outputs only: pictures and widgets are in the HTML page)."""
    nb = json.loads(path.read_text())
    parts = []
    for cell in nb["cells"]:
        source = "".join(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            parts.append(source)
        elif cell["cell_type"] == "code":
            parts.append(f"```python\n{source}\n```")
            for out in cell.get("outputs", []):
                text = out.get("text") or out.get("data", {}).get("text/plain")
                if text:
                    parts.append("```text\n" + "".join(text).rstrip() + "\n```")
    return "\n\n".join(parts) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Note the page for llms.txt: its title, its Markdown copy's URL, its first sentence."""
    copy = page.url + "index.md" if page.url.endswith("/") or not page.url else page.url + ".md"
    text = markdown
    if page.file.src_uri.endswith(".ipynb"):  # mkdocs-jupyter hands over the notebook's JSON
        text = _notebook_markdown(Path(page.file.abs_src_path))
        text = text.split("\n", 1)[1] if text.startswith("# ") else text
    description = page.meta.get("description") or _first_sentence(text)
    _pages.append((page.title or page.file.src_uri, page.url, copy, description))
    return markdown


def _first_sentence(markdown: str) -> str:
    for block in markdown.split("\n\n"):
        block = block.strip()
        if block and not block.startswith(("#", "```", "|", "!", "<", ":::", "[![", "- ")):
            block = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", block)  # a link: its text
            sentence = " ".join(block.split()).split(". ")[0]
            return sentence.rstrip(".:") + "."
    return ""


def on_pre_build(config: Any) -> None:
    """Forget the pages of an earlier build (``mkdocs serve`` rebuilds in one process)."""
    _pages.clear()


_nav_order: list[str] = []


def on_files(files: Any, config: Any) -> Any:
    """llms.txt is a file of the site, so pages may link to it; its text is written once
    every page is known (on_post_build)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, "llms.txt", content=""))
    return files


_sections: dict[str, str] = {}


def on_nav(nav: Any, config: Any, files: Any) -> Any:
    """Keep the navigation's order and sections: llms.txt lists the pages by them."""
    _nav_order[:] = [page.url for page in nav.pages]
    _sections.clear()
    for item in nav.items:
        if item.is_section:
            for child in item.children:
                if child.is_page:
                    _sections[child.url] = item.title
    return nav


def on_post_build(config: Any) -> None:
    """Write each page's Markdown copy and llms.txt, and copy the Lite site in."""
    site = Path(config["site_dir"])
    docs = Path(config["docs_dir"])
    sources = {url: next(iter(_source_of(docs, url))) for _, url, _, _ in _pages}
    copy_of = {src.relative_to(docs).as_posix(): copy for (_, url, copy, _) in _pages
               for src in (sources[url],)}  # fmt: skip
    for _, url, copy, _ in _pages:
        src = sources[url]
        text = _notebook_markdown(src) if src.suffix == ".ipynb" else src.read_text()
        text = _relink(_api_markdown(text), src.relative_to(docs).as_posix(), copy, copy_of)
        target = site / copy
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    lines = [
        f"# {config['site_name']}",
        "",
        f"> {config['site_description']}",
        "",
        "Every page below is also served as Markdown (the link). The code in it runs as a test.",
        "",
    ]
    order = {url: i for i, url in enumerate(_nav_order)}
    sections: dict[str, list[str]] = {"Docs": []}  # the top-level pages first, then the nav's
    for title, url, copy, description in sorted(_pages, key=lambda p: order.get(p[1], 1 << 30)):
        name = _sections.get(url) or "Docs"
        entry = f"- [{title}]({config['site_url']}{copy})"
        sections.setdefault(name, []).append(f"{entry}: {description}" if description else entry)
    for name, entries in sections.items():
        lines += ["", f"## {name}", "", *entries]
    (site / "llms.txt").write_text("\n".join(lines).replace("\n\n\n", "\n\n") + "\n")
    if (LITE / "jupyter-lite.json").exists():
        shutil.copytree(LITE, site / "lite", dirs_exist_ok=True)
    else:
        log.warning("no JupyterLite site in %s (make lite): the tutorials' 'try it' is left out",
                    LITE)


def _source_of(docs: Path, url: str) -> list[Path]:
    """The source file of a page from its URL (``how-to/cli/`` → ``how-to/cli.md``)."""
    stem = url.rstrip("/") or "index"
    return [p for p in (docs / f"{stem}.md", docs / f"{stem}.ipynb", docs / stem / "index.md")
            if p.exists()]


LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s#]+)(#[^)\s]*)?\)")


def _relink(text: str, src: str, copy: str, copy_of: dict[str, str]) -> str:
    """A Markdown copy's relative links, pointed from where the copy is served: a link to a
    page goes to that page's copy, a link to a picture to the picture in the site."""

    def moved(m: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(src), m.group(1)))
        goal = copy_of.get(target, target)
        return f"]({posixpath.relpath(goal, posixpath.dirname(copy) or '.')}{m.group(2) or ''})"

    return LINK.sub(moved, text)


DIRECTIVE = re.compile(r"^::: ([\w.]+)\n((?:    .*\n|\s*\n)*)", re.M)
MEMBER = re.compile(r"^        - (\w+)$", re.M)


def _api_markdown(text: str) -> str:
    """A reference page's ``::: module`` directive as Markdown: each member's signature and
    docstring, read from the package as mkdocstrings reads them for the HTML."""

    def entries(m: re.Match[str]) -> str:
        module = importlib.import_module(m.group(1))
        parts = []
        for name in MEMBER.findall(m.group(2)):
            obj = getattr(module, name)
            try:
                signature = f"{name}{inspect.signature(obj)}" if callable(obj) else name
            except (TypeError, ValueError):
                signature = name
            doc = inspect.getdoc(obj) if callable(obj) or inspect.isclass(obj) else None
            kind = "class" if inspect.isclass(obj) else "def" if callable(obj) else "value"
            parts.append(f"## `{name}`\n\n```python\n{kind} {signature}\n```\n\n{doc or ''}")
        return "\n\n".join(parts) + "\n"

    return DIRECTIVE.sub(entries, text)
