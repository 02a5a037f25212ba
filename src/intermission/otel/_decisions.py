"""Decisions on record: the attributes of a decision, a refusal, an expiry or an
escalation, from a decision record or an audit entry (read defensively: fields that an
older or newer record lacks are left out). Never an effect key: effect entries keep their
key in ``target``, which is not exported."""

from __future__ import annotations

import json
from typing import Any

from . import attributes as A

__all__ = ["decision_attrs", "note_attrs"]


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if isinstance(value, (str, bool, int, float)) and value is not None:
        out[key] = value
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value) and value:
        out[key] = list(value)


def decision_attrs(record: Any, capture: bool) -> dict[str, Any]:
    """A decision record's attributes (verdict, who, through what, why, the policy)."""
    out: dict[str, Any] = {}
    verdict = str(getattr(record, "verdict", "")).lower()
    out[A.VERDICT] = verdict
    edited = getattr(record, "modified_args", None)
    out[A.EDITED] = bool(edited) and verdict == "approve"
    _put(out, A.TARGET, getattr(record, "call_uuid", None))
    _put(out, A.REVIEWER, getattr(record, "reviewer", None))
    _put(out, A.VIA, getattr(record, "via", None))
    _put(out, A.ROLES, getattr(record, "roles", None))
    _put(out, A.AUTHENTICATED, getattr(record, "authenticated", None))
    _put(out, A.REASON, getattr(record, "comment", None))
    _put(out, A.TIMED_OUT, getattr(record, "timed_out", None))
    votes = getattr(record, "votes", None)
    if votes:
        out[A.VOTES] = [str(getattr(v, "name", "")) for v in votes]
    if capture and edited:
        out[A.EDITED_ARGUMENTS] = json.dumps(edited, ensure_ascii=False, default=str)
    return out


_DETAIL = {
    "verdict": A.VERDICT, "progress": A.POLICY, "rule": A.RULE, "error": A.REFUSED_BY,
    "resolution": A.RESOLUTION, "tool": A.TOOL_NAME,
}  # fmt: skip


_QUOTES_INPUT = frozenset({"InvalidDecisionError"})
"""Refusals of a malformed decision: their message quotes what was submitted (edited
arguments that do not fit the tool), which is content."""


def note_attrs(entry: Any, capture: bool) -> dict[str, Any]:
    """An audit entry's attributes (None when it is about an effect: its target is a key)."""
    action = str(getattr(entry, "action", ""))
    out: dict[str, Any] = {A.ACTION: action}
    _put(out, A.REVIEWER, getattr(entry, "actor", None))
    _put(out, A.ROLES, getattr(entry, "roles", None))
    _put(out, A.VIA, getattr(entry, "via", None))
    _put(out, A.AUTHENTICATED, getattr(entry, "authenticated", None))
    detail = getattr(entry, "detail", None)
    error = detail.get("error") if isinstance(detail, dict) else None
    quotes = action == "decision.refused" and isinstance(error, str) and error in _QUOTES_INPUT
    if capture or not quotes:
        _put(out, A.REASON, getattr(entry, "reason", None))
    if not action.startswith("effect."):  # (an effect's target is its idempotency key)
        _put(out, A.TARGET, getattr(entry, "target", None))
    if isinstance(detail, dict):
        for key, name in _DETAIL.items():
            _put(out, name, detail.get(key))
        if isinstance(out.get(A.VERDICT), str):
            out[A.VERDICT] = out[A.VERDICT].lower()
        votes = detail.get("votes")
        if isinstance(votes, list):
            _put(out, A.VOTES, [str(v) for v in votes])
        if "modified_args" in detail:
            out[A.EDITED] = True
            if capture:
                out[A.EDITED_ARGUMENTS] = json.dumps(
                    detail["modified_args"], ensure_ascii=False, default=str
                )
    return out
