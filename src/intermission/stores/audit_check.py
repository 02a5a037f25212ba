"""What ``verify_audit`` checks beyond the chain itself: that the chain ends at the head the
session row keeps, and that every vote, decision and completed effect the stored session
shows has its record (the same for every store; :mod:`.audit_chain` checks the links).

The head is ``(seq, hash)`` of the last record written while the session row existed, set
in the transaction that wrote the record; a new row starts at its id's last record (a
deleted generation's, a refusal of the id before it was stored). ``(0, None)``: its id has
no record. ``None`` for ``seq``, or 0 while records exist: the head was emptied by hand
(the SQL migration 8 computes heads for every stored session; only a row written by an
older intermission after it would have none) — failed as ``head``, since it would hide the
deletion of the newest records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..audit import AuditVerification, Problem
from ..hitl.graph import DEADLINE_REVIEWER
from .audit_chain import DELETED, FORKED, StoredRecord

__all__ = ["HEAD_NOT_RECORDED", "StoredHead", "finish"]

StoredHead = tuple[int | None, str | None]
"""The head a session row keeps: ``(seq, hash)``."""

HEAD_NOT_RECORDED = (
    "missing: the session row keeps no head for its records (its head columns were "
    "emptied by hand, or an intermission older than store schema 8 wrote the row): the "
    "chain's end cannot be checked, so deleted newest records would go unseen"
)

_VOTES = ("decision.recorded", "approval.recorded")
_EFFECTS = ("effect.finished", "effect.resolved")


@dataclass(frozen=True, slots=True)
class _Fact:
    """Something the session shows that must have a record."""

    what: str
    matches: Callable[[dict[str, Any]], bool]


def finish(
    result: AuditVerification,
    rows: Sequence[StoredRecord],
    head: StoredHead | None,
    session: Any,
    rows_of: Callable[[str], Sequence[StoredRecord]],
) -> AuditVerification:
    """``result`` (the chain's check) with the head and the session's facts checked too.
    ``head``: the row's head (None: no session row); ``session``: the stored session (None:
    none, or unreadable); ``rows_of(id)``: another id's records (a fork's parent)."""
    problems: list[tuple[Problem, int | None, str]] = []
    if not result.ok:
        problems.append((result.problem or "chain", result.broken_seq, result.why))
    limits = result.limits
    if head is not None and (head[0] is None or head[0] <= 0) and rows:
        # a row's head is 0 only when its id had no record (see sql._ID_HEAD): a row with
        # records and no head had it emptied, which would hide the newest records' deletion
        problems.append(("head", rows[-1][0], HEAD_NOT_RECORDED))
    elif head is not None:
        found = _head_problem(rows, int(head[0] or 0), head[1])
        if found is not None:
            problems.append(found)
    missing: tuple[str, ...] = ()
    if session is not None:
        missing = _missing(session, _records(rows, rows_of))
        if missing:
            why = "no record of " + "; ".join(missing)
            if not rows:  # (not "tampered": the likelier story first)
                why += (
                    " (its id has no record at all: a session decided before its store kept "
                    "an audit trail, or a trail deleted whole)"
                )
            problems.append(("incomplete", None, why))
    if not problems:
        return replace(result, limits=limits)
    problem, seq, _ = problems[0]
    why = "; ".join((f"record {s}: {w}" if s is not None and i else w)
                    for i, (_, s, w) in enumerate(problems))  # fmt: skip
    return replace(result, broken_seq=seq, problem=problem, why=why, missing=missing, limits=limits)


def _head_problem(
    rows: Sequence[StoredRecord], seq: int, digest: str | None
) -> tuple[Problem, int | None, str] | None:
    """Why the chain does not end at the row's head ``(seq, digest)`` (None: it does)."""
    if seq <= 0:
        return None
    last = rows[-1][0] if rows else 0
    short = f"{(digest or '')[:12]}…"
    if last < seq:
        gone = f"record {seq}" if last + 1 == seq else f"records {last + 1}–{seq}"
        return ("head", last + 1, f"missing: the session's head is record {seq} ({short}) "
                f"but the chain ends at record {last}: {gone} deleted")  # fmt: skip
    at = next((r for r in rows if r[0] == seq), None)
    if at is None or at[2] != digest:
        return ("head", seq, f"not the session's head: the row keeps hash {short} for it "
                "(the record, or the head, was rewritten)")  # fmt: skip
    if last > seq:
        return ("head", seq + 1, f"after the session's head (record {seq}): added by hand")
    return None


def _records(
    rows: Sequence[StoredRecord], rows_of: Callable[[str], Sequence[StoredRecord]]
) -> list[dict[str, Any]]:
    """The records of the session's current generation (after its id's last tombstone),
    with a fork's ancestry up to its fork point, as dicts (unreadable ones left out)."""
    out: list[dict[str, Any]] = []
    current: Sequence[StoredRecord] = rows
    for _ in range(64):  # (a fork of a fork of …: bounded, a loop in the data ends here)
        parsed = [d for d in (_parse(r[1]) for r in current) if d is not None]
        starts = max((i for i, d in enumerate(parsed) if d.get("action") == DELETED),
                     default=-1) + 1  # fmt: skip
        ours = parsed[starts:]
        out.extend(ours)
        first = ours[0] if ours else None
        detail = first.get("detail") if first and first.get("action") == FORKED else None
        parent = detail.get("parent") if isinstance(detail, dict) else None
        at = detail.get("parent_seq") if isinstance(detail, dict) else None
        if not isinstance(parent, str) or not isinstance(at, int) or at <= 0:
            break
        current = [r for r in rows_of(parent) if r[0] <= at]
    return out


def _parse(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _missing(session: Any, records: list[dict[str, Any]]) -> tuple[str, ...]:
    """What ``session`` shows that no record covers, each record covering one fact."""
    pool = list(records)
    out: list[str] = []
    for fact in _facts(session):
        hit = next((i for i, r in enumerate(pool) if fact.matches(r)), None)
        if hit is None:
            out.append(fact.what)
        else:
            del pool[hit]
    return tuple(out)


def _detail(r: dict[str, Any]) -> dict[str, Any]:
    d = r.get("detail")
    return d if isinstance(d, dict) else {}


def _facts(session: Any) -> list[_Fact]:
    """The votes, decisions and completed effects the stored session shows."""
    facts: list[_Fact] = []
    for e in session.events:
        if e.kind == "approval_voted":
            facts.append(_vote(e.target, e.vote.name, e.vote.verdict))
        elif e.kind == "hitl_decided":
            d = e.decision  # (a deadline without a policy decides as system:deadline)
            late = d.timed_out or d.reviewer == DEADLINE_REVIEWER
            facts.append(_decision(e.call_uuid, d.reviewer, d.verdict, late))
        elif e.kind == "approval_decided":
            facts.append(_decision(None, e.reviewer, e.verdict, e.timed_out))
    sid = session.session_id
    for key, entry in sorted(session.ledger.items()):
        if entry.status == "completed" and entry.by in (None, sid):
            facts.append(_effect(key))
    return facts


def _effect(key: str) -> _Fact:
    return _Fact(
        f"the completed effect {key!r}",
        lambda r: r.get("action") in _EFFECTS and r.get("target") == key
        and _detail(r).get("status") == "completed",
    )  # fmt: skip


def _vote(target: str, name: str, verdict: str) -> _Fact:
    return _Fact(
        f"the vote of {name} ({verdict}) on {target}",
        lambda r: r.get("action") in _VOTES and _detail(r).get("vote") is True
        and r.get("target") == target and r.get("actor") == name,
    )  # fmt: skip


def _decision(target: str | None, reviewer: str | None, verdict: str, timed_out: bool) -> _Fact:
    on = f" on {target}" if target else " on the approval"
    if timed_out:
        return _Fact(
            f"the expiry{on}",
            lambda r: r.get("action") in ("task.expired", *_VOTES)
            and (target is None or r.get("target") == target),
        )  # fmt: skip
    return _Fact(
        f"the decision of {reviewer or 'an unnamed reviewer'} ({verdict}){on}",
        lambda r: r.get("action") in _VOTES and _detail(r).get("vote") is not True
        and (target is None or r.get("target") == target) and r.get("actor") == reviewer,
    )  # fmt: skip
