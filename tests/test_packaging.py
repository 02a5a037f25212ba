"""What an index page and a fresh install see (issue 29): the wheel's metadata (license
file, classifiers, project links, a README whose links work off GitHub), ``--version``, and
Binder's requirements installing everything the tutorials import."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from tests._venv import ROOT, built_wheel, fresh_venv, pip_install, user_env

import intermission

DOCS_SITE = "https://intermission.github.io/intermission"
REPO = "https://github.com/intermission/intermission"


def _metadata() -> tuple[zipfile.ZipFile, object]:
    whl = zipfile.ZipFile(built_wheel())
    name = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
    return whl, Parser().parsestr(whl.read(name).decode())


def test_the_wheel_carries_its_license_classifiers_and_links() -> None:
    whl, meta = _metadata()
    assert meta["License-Expression"] == "Apache-2.0"  # type: ignore[index]
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text  # the whole text, not a pointer
    (packed,) = [n for n in whl.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert whl.read(packed).decode() == license_text
    assert "intermission/py.typed" in whl.namelist()  # type checkers read the annotations
    classifiers = meta.get_all("Classifier")  # type: ignore[attr-defined]
    assert "Typing :: Typed" in classifiers and "Framework :: Jupyter" in classifiers
    assert "Programming Language :: Python :: 3.10" in classifiers  # requires-python's floor
    assert not [c for c in classifiers if c.startswith("License ::")]  # the expression says it
    links = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))  # type: ignore[attr-defined]
    assert {"Homepage", "Repository", "Issues", "Documentation"} <= links.keys()
    assert links["Documentation"] == DOCS_SITE + "/"
    assert all(url.startswith(REPO) for k, url in links.items() if k not in ("Tutorials",
                                                                             "Documentation"))
    # the README is the index page: every link and image absolute, so they work there
    description = meta.get_payload()  # type: ignore[attr-defined]
    assert meta["Description-Content-Type"] == "text/markdown"  # type: ignore[index]
    targets = re.findall(r"\]\(([^)\s]+)", description)
    assert targets and [t for t in targets if not t.startswith(("https://", "http://"))] == []


def test_readme_links_into_the_repository_point_at_files_that_exist() -> None:
    text = (ROOT / "README.md").read_text()
    inside = re.findall(
        rf"\]\((?:{REPO}/(?:blob|tree)/main/|https://raw\.githubusercontent\.com/intermission/"
        r"intermission/main/)([^)#\s]+)",
        text,
    )
    assert len(inside) >= 4  # the picture, the benchmark table, the docs' and tutorials' folders
    assert [p for p in inside if not (ROOT / p).exists()] == []


def test_readme_links_into_the_docs_site_point_at_pages_that_exist() -> None:
    """The README is the landing page; each topic lives on a page of the site (mkdocs.yml
    builds ``docs/PAGE.md`` at ``DOCS_SITE/PAGE/``)."""
    readme = (ROOT / "README.md").read_text()
    pages = re.findall(rf"\]\({re.escape(DOCS_SITE)}/([^)#\s]*)\)", readme)
    assert "llms.txt" in pages  # (written by the build: docs/hooks/site_extras.py)
    pages = [page for page in pages if page != "llms.txt"]
    assert len(pages) >= 12
    missing = [
        page for page in pages
        if not any((ROOT / "docs" / f).exists() for f in (
            f"{page.rstrip('/') or 'index'}.md", f"{page.rstrip('/')}/index.md", page))
    ]  # fmt: skip
    assert missing == []


@pytest.mark.parametrize("how", ["module", "script"])
def test_version_is_printed_by_the_module_and_the_script(how: str) -> None:
    cmd = (
        [sys.executable, "-m", "intermission", "--version"]
        if how == "module"
        else [str(Path(sys.executable).parent / "intermission"), "--version"]
    )
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"intermission {intermission.__version__}"
    _, meta = _metadata()
    assert meta["Version"] == intermission.__version__  # type: ignore[index]


# -- Binder -------------------------------------------------------------------------------
NEEDS = {"mcp_tools": "mcp", "PydanticAIModel": "pydantic_ai", "agui_app": "ag_ui"}
"""Names that import their extra on first use: the tutorial needs that module too."""


def tutorial_imports() -> dict[str, list[str]]:
    """Every import statement in each tutorial's code cells, as written (plus the module
    each lazily loaded name needs)."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        lines: list[str] = []
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            kept = "\n".join(
                line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))
            )
            for node in ast.walk(ast.parse(kept)):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    lines.append(ast.unparse(node))
                    names = [a.name for a in node.names]
                    lines += [f"import {NEEDS[n]}" for n in names if n in NEEDS]
        found[path.name] = lines
    return found


def test_binder_requirements_alone_install_what_every_tutorial_imports(tmp_path: Path) -> None:
    """A fresh environment with only ``binder/requirements.txt`` (as repo2docker installs
    it, from the repository's root) imports every module and name each tutorial does."""
    imports = tutorial_imports()
    assert all(imports.values()) and any(
        "agui_app" in i for i in imports["10_approve_from_anywhere.ipynb"]
    )
    bin_dir = fresh_venv(tmp_path / "binder-venv", with_pip=False)
    pip_install(bin_dir, "-r", "binder/requirements.txt", cwd=ROOT)
    script = (
        "import importlib, json, sys\n"
        f"imports = {imports!r}\n"
        "failed = {}\n"
        "for name, lines in imports.items():\n"
        "    for line in lines:\n"
        "        try:\n"
        "            exec(line, {})\n"
        "        except Exception as exc:\n"
        "            failed.setdefault(name, []).append(f'{line}: {type(exc).__name__}: {exc}')\n"
        "print(json.dumps(failed))\n"
    )
    done = subprocess.run(
        [str(bin_dir / "python"), "-c", script], cwd=tmp_path, env=user_env(bin_dir),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {}
