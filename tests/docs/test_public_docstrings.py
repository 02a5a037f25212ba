"""Every name of the public API (``intermission.__all__``) has a docstring whose first line is
its one-line summary (the API reference lists it beside the name), and every example in a
public docstring runs, its printed output checked against its ``#>`` lines (pytest-examples,
as pydantic-ai does for its own docs), in a temporary folder so the stores it opens are new.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_examples import CodeExample, EvalExample, find_examples

import intermission

SRC = Path(intermission.__file__).parent
SUMMARY_MAX = 100  # characters: what fits beside a name in the reference's tables

# Constants and type aliases carry no docstring of their own; the reference describes them.
VALUES = {"END", "START", "__version__", "SessionStatus"}


def _documented() -> list[str]:
    return [name for name in intermission.__all__ if name not in VALUES]


@pytest.mark.parametrize("name", _documented())
def test_every_public_name_has_a_one_line_summary(name: str) -> None:
    doc = inspect.getdoc(getattr(intermission, name))
    assert doc, f"intermission.{name} has no docstring"
    first, *_ = doc.split("\n\n", 1)
    assert "\n" not in first, f"intermission.{name}: the summary runs over lines: {first!r}"
    assert len(first) <= SUMMARY_MAX, f"intermission.{name}: a summary of {len(first)} chars"
    assert first.rstrip().endswith((".", ":", ")")), f"intermission.{name}: {first!r}"


def test_every_public_name_is_documented_where_the_reference_looks() -> None:
    """The reference page renders ``intermission`` with these members; each must be a name the
    package exports, or the page would leave one out silently."""
    page = (SRC.parents[1] / "docs" / "reference" / "api.md").read_text()
    missing = [n for n in _documented() if f"- {n}\n" not in page]
    assert not missing, f"not on docs/reference/api.md: {missing}"


@pytest.fixture
def in_tmp(tmp_path: Path) -> Iterator[Path]:
    here = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(here)


EXAMPLES = list(find_examples(str(SRC)))


def test_the_public_docstrings_hold_examples() -> None:
    assert len(EXAMPLES) >= 5, [ex.path for ex in EXAMPLES]


@pytest.mark.parametrize("example", EXAMPLES, ids=str)
def test_every_docstring_example_runs(
    example: CodeExample, eval_example: EvalExample, in_tmp: Path
) -> None:
    eval_example.run_print_check(example)
