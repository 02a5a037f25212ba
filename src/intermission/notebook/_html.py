"""Tiny HTML helpers shared by the timeline and the widgets (everything user-supplied is
escaped here)."""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["CSS", "esc", "pre_json", "short_id"]


def esc(value: Any) -> str:
    """Escape any value for HTML text and attributes."""
    return html.escape("" if value is None else str(value), quote=True)


def short_id(value: str | None, keep: int = 8) -> str:
    """A long id (a call UUID) shortened for a table cell; show the full one on hover."""
    text = "" if value is None else str(value)
    return text if len(text) <= keep + 1 else text[:keep] + "…"


def pre_json(value: Any) -> str:
    """A value as escaped, indented JSON in a ``<pre>``."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return f"<pre class='im-pre'>{esc(text)}</pre>"


CSS = """<style>
.im-timeline{font-family:system-ui,sans-serif;font-size:12.5px}
.im-req{border:1px solid #ddd;border-radius:6px;margin:6px 0;padding:4px 8px}
.im-req-head{font-weight:600;margin-bottom:3px}
.im-timeline table{border-collapse:collapse;width:100%}
.im-timeline td{padding:1px 6px;vertical-align:top;text-align:left}
.im-t{color:#777;white-space:nowrap;font-variant-numeric:tabular-nums}
.im-badge{display:inline-block;border-radius:9px;padding:0 7px;font-size:11px;color:#fff;
 white-space:nowrap}
.im-run{background:#546e7a}.im-reason{background:#7e57c2}.im-action{background:#00897b}
.im-tool{background:#1e88e5}.im-hitl{background:#fb8c00}.im-node{background:#8d6e63}
.im-team{background:#455a64}.im-bad{background:#e53935}
.im-pre{margin:2px 0;white-space:pre-wrap;max-height:16em;overflow:auto;background:#f7f7f7}
.im-ledger td{border-top:1px solid #eee}
.im-reason-text{color:#b26a00}
</style>"""
