"""DOT to SVG in the browser: Graphviz compiled to WebAssembly (npm's ``@viz-js/viz``),
reached through Pyodide's JS bridge, where no ``dot`` program can run.

The JupyterLite site (`make lite`) serves ``viz.js`` beside Pyodide itself. Loading it
awaits a JS promise, so the first picture needs a place that may block (a cell, or the
task a click runs in); elsewhere, or on a site without ``viz.js``, ``svg`` is None and the
caller shows the graph's source instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .._concurrency import BACKEND, IN_BROWSER, run_sync

__all__ = ["drawn_as_laid_out", "for_browser", "svg"]

_viz: Any = None
_missing = False

# viz.js measures text with built-in font metrics, and a browser draws it with the fonts it
# has: laid out for Helvetica, labels drawn in DejaVu Sans (Linux's usual sans) stick out of
# their boxes. Laid out for DejaVu Sans — whose metrics viz.js knows, and which Verdana
# matches — and drawn with that family first, the boxes fit where DejaVu or Verdana is
# installed, and have room to spare where the text falls back to narrower Helvetica or Arial.
_LAYOUT_FONT = "DejaVu Sans"
_DRAWN_WITH = "DejaVu Sans,Verdana,Helvetica,Arial,sans-serif"
_FAMILY = re.compile(r'font-family="DejaVu Sans[^"]*"')


def for_browser(dot: str) -> str:
    """``dot`` laid out for the font a browser draws it with (see ``_LAYOUT_FONT``)."""
    return dot.replace('fontname="Helvetica"', f'fontname="{_LAYOUT_FONT}"')


def drawn_as_laid_out(svg: str) -> str:
    """The SVG asking the browser for the fonts it was laid out for, in order."""
    return _FAMILY.sub(f'font-family="{_DRAWN_WITH}"', svg)


def _url() -> str:
    import pyodide_js  # type: ignore[import-not-found]  # Pyodide's own JS object

    return str(pyodide_js._api.config.indexURL) + "viz.js"


async def _load(url: str) -> Any:
    from pyodide.code import run_js  # type: ignore[import-not-found]

    module = await run_js(f"import({json.dumps(url)})")
    return await module.instance()


def svg(dot: str) -> str | None:
    """``dot`` drawn as SVG by viz.js; None outside a browser or where it cannot load."""
    global _viz, _missing
    if not IN_BROWSER or _missing:
        return None
    if _viz is None:
        if not getattr(BACKEND, "can_block", lambda: False)():
            return None  # a button handler: the next redraw, in the click's task, loads it
        try:
            _viz = run_sync(_load(_url()))
        except Exception:  # not served here (intermission installed into another site)
            _missing = True
            return None
    from pyodide.ffi import to_js  # type: ignore[import-not-found]

    from js import Object  # type: ignore[import-not-found]

    try:
        options = to_js({"format": "svg"}, dict_converter=Object.fromEntries)
        return drawn_as_laid_out(str(_viz.renderString(for_browser(dot), options)))
    except Exception:  # a DOT viz.js refuses: show the source, as without dot
        return None
