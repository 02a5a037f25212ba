"""``intermission audit``: a session's audit records as JSON lines or CSV, its head, or the
check of its hash chain."""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import sys
from typing import Any

from ._text import visible as _v
from .stores.base import SessionStore

__all__ = ["cmd_audit"]


_CSV_FIELDS = (
    "seq", "at", "action", "actor", "roles", "via", "authenticated", "target", "reason",
    "detail", "prev", "hash",
)  # fmt: skip


def cmd_audit(args: argparse.Namespace, store: SessionStore) -> int:
    """Print a session's audit records (JSON lines or CSV), or check their chain."""
    sid = args.session_id
    if args.head:  # for anchoring elsewhere: the head as it stands, unchecked
        records = store.audit(sid)
        if not records:
            print(f"no audit records for session {_v(sid)}", file=sys.stderr)
            return 1
        print(f"{records[-1].hash} {records[-1].seq}")
        return 0
    if args.verify:
        result = store.verify_audit(sid)
        if result and result.records == 0:
            # a typo, or a trail deleted whole, must not read as "verified"
            print(f"no audit records for session {_v(sid)}: nothing was verified", file=sys.stderr)
            return 1
        print(str(result) if result else f"session {_v(sid)}: {_v(result)}")
        if result.limits:  # said plainly (stderr: stdout stays the one line to parse)
            print(f"note: {_v(result.limits)}", file=sys.stderr)
        return 0 if result else 1
    records = store.audit(sid)
    if not records:
        print(f"no audit records for session {_v(sid)}", file=sys.stderr)
    if args.format == "csv":
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(_CSV_FIELDS)
        for r in records:
            at = _dt.datetime.fromtimestamp(r.at_ms / 1000, _dt.timezone.utc)
            row: list[Any] = [
                r.seq, at.isoformat(timespec="milliseconds"), r.action, r.actor,
                ";".join(r.roles), r.via, r.authenticated, r.target, r.reason,
                json.dumps(r.detail, sort_keys=True, ensure_ascii=False), r.prev, r.hash,
            ]  # fmt: skip
            out.writerow([_cell(v) for v in row])
        return 0
    for r in records:
        # every record as stored (with its hash): anyone can re-check the chain from this
        line = json.dumps(r.model_dump(mode="json"), sort_keys=True, ensure_ascii=True)
        print(line.replace("\x7f", "\\u007f"))
    return 0


def _cell(value: Any) -> str:
    """A CSV cell that neither a terminal nor a spreadsheet interprets: control
    characters escaped, and text a spreadsheet would run as a formula quoted."""
    text = "" if value is None else _v(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text
