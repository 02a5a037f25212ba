"""Tiny HTML helpers shared by the timeline and the widgets (everything user-supplied is
escaped here)."""

from __future__ import annotations

import html
import json
from typing import Any

from ..core.render_text import HIGHLIGHT

__all__ = [
    "CELL",
    "CSS",
    "TABLE",
    "badge",
    "esc",
    "expired_html",
    "id_html",
    "plain",
    "pre_json",
    "short_id",
]

_BIDI_CONTROLS = {
    code: f"\\u{code:04x}" for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
}
"""The embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), shown as their
escapes: a right-to-left override in a tool title or a reason would reverse what the
reviewer reads after it (R50)."""


def plain(value: Any) -> str:
    """Any value as text for a page (a widget's label, an option): bidi controls
    neutralised, shown as escapes; everything else as it is."""
    text = "" if value is None else str(value)
    return text if text.isascii() else text.translate(_BIDI_CONTROLS)


def esc(value: Any) -> str:
    """Escape any value for HTML text and attributes (bidi controls neutralised too, see
    :func:`plain`): every piece of HTML the notebook layer builds goes through here."""
    return html.escape(plain(value), quote=True)


def short_id(value: str | None, keep: int = 8) -> str:
    """A long id (a call UUID) shortened for a table cell; show the full one on hover."""
    text = "" if value is None else str(value)
    return text if len(text) <= keep + 1 else text[:keep] + "…"


def id_html(value: str | None) -> str:
    """An id as a short monospace label whose tooltip is the whole id."""
    return f"<span class='im-id' title='{esc(value)}'>{esc(short_id(value))}</span>"


def expired_html(deadline_ms: float | None, now_ms: float) -> str:
    """A badge for a decision whose deadline passed (R23b), or "" before it / without one."""
    if deadline_ms is None or now_ms < deadline_ms:
        return ""
    from ..errors import _utc

    return " " + badge("expired", "im-bad", "im-expired", f"deadline {_utc(deadline_ms)}")


# Stored outputs are shown untrusted (a fresh clone, GitHub, nbviewer, Binder): JupyterLab's
# sanitizer then drops every <style> and inline declarations it cannot check (theme
# variables, color-mix), keeping classes and plain inline styles. So what carries meaning —
# a badge's colour, left-aligned cells of a table — is also said inline in plain values;
# the <style> below adds the theme's touches where the notebook is trusted.
TABLE = "border-collapse:collapse;width:100%;table-layout:fixed;margin:0"
"""Inline style of intermission's tables (Lab centres and fixes tables of outputs)."""
CELL = "text-align:left;vertical-align:top;padding:2px 6px"
"""Inline style of a table cell (Lab right-aligns and centres them vertically)."""
BADGE_COLOURS = {
    "im-run": "#546e7a", "im-reason": "#7e57c2", "im-action": "#00796b", "im-tool": "#1565c0",
    "im-hitl": "#bf360c", "im-node": "#795548", "im-team": "#455a64", "im-bad": "#c62828",
    "im-skip": "#616161", "im-differs": HIGHLIGHT,  # what differs between compared sessions
}  # fmt: skip
"""A badge's background by its class: white text on each reads in both themes."""


def badge(text: str, css: str, extra: str = "", title: str | None = None) -> str:
    """A coloured badge (``css`` one of BADGE_COLOURS) whose colour survives sanitising."""
    colour = BADGE_COLOURS.get(css, BADGE_COLOURS["im-run"])
    tip = f" title='{esc(title)}'" if title is not None else ""
    return (
        f"<span class='im-badge {css}{' ' + extra if extra else ''}'{tip} style='display:"
        f"inline-block;border-radius:9px;padding:0 7px;font-size:11px;color:#fff;"
        f"white-space:nowrap;background:{colour}'>{esc(text)}</span>"
    )


def pre_json(value: Any) -> str:
    """A value as escaped, indented JSON in a ``<pre>``."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return f"<pre class='im-pre'>{esc(text)}</pre>"


CSS = """<style>
/* Colours come from JupyterLab's theme variables (light and dark), with fallbacks for other
   front ends; tints mix a theme colour into the theme's own background, so text keeps the
   theme's font colour and its contrast (R51). */
.im-timeline,.approval-widget,.hitl-panel,.im-inbox,.im-compare,.im-stepper,.im-history,
.resume-widget{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;font-size:13px;
 line-height:1.4;text-align:left;color:var(--jp-content-font-color1,#212121)}
/* JupyterLab and Notebook 7 style every table in an output (right-aligned cells, fixed
   layout, zebra rows, centred margins): reset them inside intermission's own boxes */
.im-timeline table,.im-inbox table,.im-compare table{border-collapse:collapse!important;
 width:100%!important;table-layout:fixed!important;margin:0!important;border:0!important}
.im-timeline td,.im-timeline th,.im-inbox td,.im-inbox th,.im-compare td,.im-compare th{
 text-align:left!important;vertical-align:top!important;padding:2px 6px!important;
 border:0!important;background:none!important;white-space:normal!important;
 overflow-wrap:anywhere;max-width:none!important;color:inherit}
.im-timeline tr,.im-inbox tr,.im-compare tr{background:none!important}
.im-timeline col.im-c-t{width:6.5em}.im-timeline col.im-c-a{width:9em}
.im-timeline col.im-c-k{width:8.5em}
.im-timeline th.im-req-row{font-weight:600;
 border-top:1px solid var(--jp-border-color2,#ccc)!important;
 padding-top:6px!important;color:var(--jp-ui-font-color1,#333)}
.im-inbox th,.im-compare th{font-weight:600;
 border-bottom:1px solid var(--jp-border-color2,#ccc)!important}
.im-t{color:var(--jp-ui-font-color2,#666);white-space:nowrap!important;
 font-variant-numeric:tabular-nums}
.im-badge{display:inline-block;border-radius:9px;padding:0 7px;font-size:11px;color:#fff;
 white-space:nowrap}
.im-run{background:#546e7a}.im-reason{background:#7e57c2}.im-action{background:#00796b}
.im-tool{background:#1565c0}.im-hitl{background:#bf360c}.im-node{background:#795548}
.im-team{background:#455a64}.im-bad{background:#c62828}.im-skip{background:#616161}
.im-pre{margin:2px 0;white-space:pre-wrap;text-align:left;max-height:16em;overflow:auto;
 padding:3px 5px;border-radius:3px;font-size:12px;
 background:var(--jp-layout-color2,#f5f5f5);color:var(--jp-content-font-color1,#212121);
 border:1px solid var(--jp-border-color2,transparent)}
.im-reason-text{color:#8a4000}
.im-id{font-family:ui-monospace,monospace;font-size:11.5px;color:var(--jp-ui-font-color2,#555)}
.im-hint,.im-ask{padding:4px 8px;margin:4px 0;color:var(--jp-content-font-color1,#212121)}
.im-hint{background:#fff8e1;border-left:3px solid var(--jp-warn-color1,#f9a825);
 background:color-mix(in srgb,var(--jp-warn-color1,#f9a825) 14%,var(--jp-layout-color1,#fff))}
.im-ask{background:#fff3e0;border-left:3px solid var(--jp-warn-color0,#fb8c00);
 background:color-mix(in srgb,var(--jp-warn-color0,#fb8c00) 12%,var(--jp-layout-color1,#fff))}
.im-decided{margin:2px 0}
.im-diff{background:#fff59d;
 background:color-mix(in srgb,#ffeb3b 30%,var(--jp-layout-color1,#fff))!important}
.im-error{color:#b71c1c}
.im-graph-card{display:block;max-width:100%;overflow:hidden;box-sizing:border-box;
 background:#fff;border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:6px;
 padding:6px;margin:4px 0}
.im-graph-card svg{max-width:100%!important;height:auto!important;display:block}
.im-cmp-graphs{display:flex;flex-wrap:wrap;gap:8px 16px}
.im-cmp-graph{flex:1 1 100%;max-width:100%;min-width:0}
.im-skipped summary{color:var(--jp-ui-font-color2,#616161);font-style:italic}
/* the dark theme: graphs keep their light node colours on a soft grey card, not glaring white */
[data-jp-theme-light="false"] .im-graph-card{background:#d7dbe0;border-color:#5f6368}
[data-jp-theme-light="false"] .im-reason-text{color:#ffb74d}
[data-jp-theme-light="false"] .im-error{color:#ff8a80}
</style>"""
