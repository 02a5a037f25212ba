"""Server-sent events: one frame per AG-UI event, each with an ``id:``.

Every AG-UI event gets a cursor ``(seq, k)``: the session event that produced it and its place
among that event's AG-UI events; its SSE ``id:`` is ``"seq.k"``, and a ``Last-Event-ID``
names where a reconnecting client stopped.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["Cursor", "encode", "parse_cursor"]

Cursor = tuple[int, int]
_CURSOR = re.compile(r"([0-9]{1,18})(?:\.([0-9]{1,18}))?", re.ASCII)
"""ASCII digits only: ``str.isdigit`` takes ``²``, which ``int`` refuses."""


def parse_cursor(text: str | None) -> Cursor | None:
    """A ``Last-Event-ID`` (``"seq.k"`` or ``"seq"``) as a cursor; None when absent or
    not one of ours (then everything is replayed)."""
    if not text or len(text) > 40:
        return None
    found = _CURSOR.fullmatch(text.strip())
    if found is None:
        return None
    return int(found[1]), int(found[2] or 0)


def encode(event: Any, cursor: Cursor) -> str:
    """One SSE frame: ``id: seq.k`` and the event's camelCase JSON (unset fields left out,
    keys sorted)."""
    # keys sorted at every level: a replay rebuilds events from the store, which need not
    # keep a dict's key order, and must send the live stream's very bytes
    data = json.dumps(
        event.model_dump(mode="json", by_alias=True, exclude_none=True),
        sort_keys=True, ensure_ascii=False, separators=(",", ":"),
    )  # fmt: skip
    return f"id: {cursor[0]}.{cursor[1]}\ndata: {data}\n\n"
