"""Store the tutorials' outputs as a person sees them before deciding (``make notebooks``).

Each notebook runs twice with nbclient: once as a person opens it (no autopilot: the cells
after a widget say where to click) — those outputs are stored — and once on autopilot (the
code twins decide, as under nbval). A cell whose sanitized outputs differ between the two
runs depends on the decision: it gets the ``nbval-ignore-output`` tag, so nbval runs it
without comparing (its asserts still run; see conftest.py). Every other cell is compared.

Usage: ``python notebooks/store_outputs.py notebooks/01_quickstart.ipynb ...``
"""

from __future__ import annotations

import configparser
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
TAG = "nbval-ignore-output"


def _sanitizers() -> list[tuple[re.Pattern[str], str]]:
    parser = configparser.ConfigParser()
    parser.read(HERE / "sanitize.cfg")
    return [(re.compile(parser[s]["regex"]), parser[s]["replace"]) for s in parser.sections()]


@contextmanager
def _autopilot(on: bool) -> Any:
    before = os.environ.pop("INTERMISSION_AUTOPILOT", None)
    if on:
        os.environ["INTERMISSION_AUTOPILOT"] = "1"
    try:
        yield
    finally:
        os.environ.pop("INTERMISSION_AUTOPILOT", None)
        if before is not None:
            os.environ["INTERMISSION_AUTOPILOT"] = before


def _run(path: Path, autopilot: bool) -> Any:
    nb = nbformat.read(path, as_version=4)
    with _autopilot(autopilot):
        NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False,
                       store_widget_state=False, resources={"metadata": {"path": str(path.parent)}}
                       ).execute()  # fmt: skip
    return nb


def _shown(cell: Any, clean: list[tuple[re.Pattern[str], str]]) -> str:
    parts: list[str] = []
    for out in _coalesced(cell.get("outputs", [])):
        text = out.get("text") or ""
        data = out.get("data") or {}
        for mime in sorted(data):
            if mime != "application/vnd.jupyter.widget-view+json":
                text += f"{mime}:{data[mime]}"
        text += out.get("ename", "")
        parts.append(f"{out['output_type']}|{text}")
    shown = "\n".join(parts)
    for pattern, replace in clean:
        shown = pattern.sub(replace, shown)
    return shown


def _coalesced(outputs: list[Any]) -> list[Any]:
    """Consecutive prints to one stream as one output: how a kernel splits them into
    messages depends on timing (nbval compares them joined, too)."""
    joined: list[Any] = []
    for out in outputs:
        last = joined[-1] if joined else {}
        stream = out.get("output_type") == last.get("output_type") == "stream"
        if stream and last.get("name") == out.get("name"):
            joined[-1] = {**last, "text": last["text"] + out["text"]}
        else:
            joined.append(out)
    return joined


def store(path: Path) -> int:
    """Run ``path`` both ways, keep the person's outputs, tag the cells that differ."""
    clean = _sanitizers()
    decided = _run(path, autopilot=True)
    person = _run(path, autopilot=False)
    tagged = 0
    for mine, twin in zip(person.cells, decided.cells, strict=True):
        if mine.cell_type != "code":
            continue
        tags = [t for t in mine.metadata.get("tags", []) if t != TAG]
        marked = "NBVAL_" in "".join(mine.source)  # a comment marker decides already
        if not marked and _shown(mine, clean) != _shown(twin, clean):
            tags.append(TAG)
            tagged += 1
        if tags:
            mine.metadata["tags"] = tags
        else:
            mine.metadata.pop("tags", None)
    nbformat.write(person, path)
    return tagged


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{name}: {store(Path(name))} cell(s) depend on the decision")
