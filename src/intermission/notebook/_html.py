"""Tiny HTML helpers shared by the timeline and the widgets (everything user-supplied is
escaped here)."""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["CSS", "esc", "expired_html", "id_html", "plain", "pre_json", "short_id"]

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

    return (
        f" <span class='im-badge im-bad im-expired' title='deadline {esc(_utc(deadline_ms))}'>"
        "expired</span>"
    )


def pre_json(value: Any) -> str:
    """A value as escaped, indented JSON in a ``<pre>``."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return f"<pre class='im-pre'>{esc(text)}</pre>"


CSS = """<style>
.im-timeline,.approval-widget,.hitl-panel,.im-inbox,.im-compare{font-family:system-ui,-apple-system,
 "Segoe UI",sans-serif;font-size:13px;line-height:1.4;text-align:left}
/* JupyterLab and Notebook 7 style every table in an output (right-aligned cells, fixed
   layout, zebra rows, centred margins): reset them inside intermission's own boxes */
.im-timeline table,.im-inbox table,.im-compare table{border-collapse:collapse!important;
 width:100%!important;table-layout:fixed!important;margin:0!important;border:0!important}
.im-timeline td,.im-timeline th,.im-inbox td,.im-inbox th,.im-compare td,.im-compare th{
 text-align:left!important;vertical-align:top!important;padding:2px 6px!important;
 border:0!important;background:none!important;white-space:normal!important;
 overflow-wrap:anywhere;max-width:none!important}
.im-timeline tr,.im-inbox tr,.im-compare tr{background:none!important}
.im-timeline col.im-c-t{width:6.5em}.im-timeline col.im-c-a{width:9em}
.im-timeline col.im-c-k{width:8.5em}
.im-timeline th.im-req-row{font-weight:600;border-top:1px solid #ccc!important;
 padding-top:6px!important;color:#333}
.im-inbox th,.im-compare th{font-weight:600;border-bottom:1px solid #ccc!important}
.im-t{color:#666;white-space:nowrap!important;font-variant-numeric:tabular-nums}
.im-badge{display:inline-block;border-radius:9px;padding:0 7px;font-size:11px;color:#fff;
 white-space:nowrap}
.im-run{background:#546e7a}.im-reason{background:#7e57c2}.im-action{background:#00897b}
.im-tool{background:#1e88e5}.im-hitl{background:#e65100}.im-node{background:#8d6e63}
.im-team{background:#455a64}.im-bad{background:#c62828}.im-skip{background:#757575}
.im-pre{margin:2px 0;white-space:pre-wrap;text-align:left;max-height:16em;overflow:auto;
 background:#f5f5f5;padding:3px 5px;border-radius:3px;font-size:12px}
.im-reason-text{color:#a04b00}
.im-id{font-family:ui-monospace,monospace;font-size:11.5px;color:#555}
.im-hint{background:#fff8e1;border-left:3px solid #f9a825;padding:4px 8px;margin:4px 0}
.im-ask{background:#fff3e0;border-left:3px solid #fb8c00;padding:4px 8px;margin:2px 0}
.im-diff{background:#fff59d}
.im-cmp-graphs{display:flex;flex-wrap:wrap;gap:8px 16px}
.im-cmp-graph{flex:1 1 420px;max-width:640px}
.im-skipped summary{color:#616161;font-style:italic}
</style>"""
