"""What the JupyterLite site offers (binder/lite/build.py's selection, issue 41): a tutorial
a browser cannot run is no notebook there — a Markdown file that says so first, so opening
it starts no kernel and downloads no Python — and every other tutorial is a notebook for
the Pyodide kernel, its outputs cleared."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lite_build", ROOT / "binder/lite/build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("files")
    build().tutorials(dest)
    return dest


def test_a_tutorial_that_needs_a_machine_is_markdown_that_says_so_first(
    site_files: Path,
) -> None:
    lite = build()
    as_text = [p for p in TUTORIALS if p.name[:3] in lite.NOT_IN_BROWSER]
    assert {p.name[:3] for p in as_text} == {"09_", "10_", "12_"}
    for path in as_text:
        assert not (site_files / path.name).exists()  # not offered as a notebook
        text = (site_files / f"{path.stem}.md").read_text()
        nb = json.loads(path.read_text())
        title = "".join(nb["cells"][0]["source"]).splitlines()[0]
        first, why = text.split("\n\n")[:2]
        assert first == title and why.startswith("> **This tutorial cannot run in a browser")
        codes = ["".join(c["source"]).rstrip() for c in nb["cells"] if c["cell_type"] == "code"]
        assert codes and all(f"```python\n{code}\n```" in text for code in codes)  # all of it


def test_every_other_tutorial_is_a_notebook_for_the_pyodide_kernel(site_files: Path) -> None:
    lite = build()
    runnable = [p for p in TUTORIALS if p.name[:3] not in lite.NOT_IN_BROWSER]
    assert len(runnable) >= 10
    offered = sorted(f.name for f in site_files.iterdir())
    assert offered == sorted(lite.lite_name(p) for p in TUTORIALS)
    for path in runnable:
        nb = json.loads((site_files / path.name).read_text())
        assert nb["metadata"]["kernelspec"]["display_name"] == "Python (Pyodide)"
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
        shown = json.dumps(nb)
        assert "cannot run in a browser" not in shown
