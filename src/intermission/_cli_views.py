"""The command line's read-only views: ``pending`` (what waits for a person) and ``show``
(one session: its request, tasks, deadlines, decisions, effects and answer). Every field
printed passes through ``visible``; neither creates nor changes anything."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from typing import Any

from ._cli_parser import store_option
from ._cli_versions import pending_filter
from ._clock import SYSTEM_CLOCK, Clock
from ._text import visible as _v
from .errors import IntermissionError, _utc
from .hitl import HITL
from .hitl.expiry import decider
from .hitl.graph import binding_deadline
from .principals import label
from .stores.base import SessionStore
from .stores.effects import RESOLVED_KEY
from .stores.listings import version_label

__all__ = ["cmd_pending", "cmd_show"]


def _clock_of(store: SessionStore) -> Clock:
    """The store's clock: what its sessions' deadlines are judged by, in any process."""
    clock: Clock = getattr(store, "clock", SYSTEM_CLOCK)
    return clock


def _waiting_on(n_calls: int, request: Any) -> str:
    """What a pending session waits for, in a word or two."""
    if n_calls:
        return f"{n_calls} call" + ("s" if n_calls > 1 else "")
    return "approval" if request is not None else "-"


_FINGERPRINT = re.compile(r"[0-9a-f]{16}")


def _agent_column(item: Any) -> str:
    """``ops@2`` for a labelled version, ``ops`` for one that is a fingerprint, ``-``."""
    if item.agent is None:
        return "-"
    version = item.agent_version
    if version is None or _FINGERPRINT.fullmatch(version):
        return str(item.agent)
    return str(item.version_label)


def cmd_pending(args: argparse.Namespace, store: SessionStore) -> None:
    filters = pending_filter(args)
    items = store.pending(limit=args.limit, **filters)
    unreadable = [(u.session_id, u.why) for u in getattr(items, "unreadable", [])]
    rows: list[str] = []
    now = _clock_of(store).now_ms()
    for item in items:
        try:
            waits = _waiting_on(len(item.tasks), item.request)
        except IntermissionError as exc:  # one bad row never hides the others
            unreadable.append((item.session_id, str(exc)))
            continue
        # (its agent version too: ops@2, as versions lists it and --version takes it; an
        # unlabelled agent's version is its fingerprint: `versions` and `show` print it)
        agent = _v(_agent_column(item))
        reason = _v(item.reason or "")
        late = item.deadline_ms is not None and now >= item.deadline_ms
        reason += " [expired]" if late else ""
        reason += f" [{_v(item.progress)}]" if item.progress else ""
        rows.append(f"{_v(item.session_id):<24} {agent:<16} {waits:<10}  {reason}")
    if rows:
        print(f"{'SESSION':<24} {'AGENT':<16} {'WAITS FOR':<10}  REASON")
        print("\n".join(rows))
    else:
        print("no pending sessions")
    for sid, why in unreadable:
        print(f"unreadable: {_v(sid)}: {_v(why)}")
    stuck = getattr(store, "stuck", None)
    for entry in stuck(limit=args.limit) if stuck is not None else []:
        # (of the agent --agent or --version names: a stuck entry is listed for its
        # session whatever the version, as it needs a person all the same)
        if filters["agent"] is not None and entry.agent != filters["agent"]:
            continue
        sid, key = (_v(shlex.quote(x)) for x in (entry.session_id, entry.key))
        at = _v(store_option(args.store))  # (its password masked)
        agent = _v(entry.agent or "-")
        print(f"needs a person: {_v(entry.session_id)} ({agent}, {entry.status}): {_v(entry.why)}")
        if getattr(entry, "damage", None) is not None:
            continue  # (nothing to resolve until the entry is fixed by hand)
        print(f"  python -m intermission resolve {sid} {key} --result JSON{at}")
        print(f"  python -m intermission forget {sid} {key}{at}")


def _decisions(s: Any) -> list[str]:
    """Each decision on the session, oldest first: tool calls (applied, or recorded for the
    next resume) and graph approvals."""
    lines: list[str] = []

    def by(
        reviewer: str | None, time_ms: float | None, display: str | None = None,
        timed_out: bool = False,
    ) -> str:  # fmt: skip
        who = decider(reviewer, display, timed_out)  # (an expiry: "by the deadline")
        return f"by {who}" + (f" at {_utc(time_ms)}" if time_ms is not None else "")

    for e in s.events:
        if e.kind == "hitl_decided":
            r = e.decision
            edited = " with edited arguments" if r.modified_args else ""
            note = f" — {r.comment}" if r.comment else ""
            lines.append(
                f"{r.verdict.upper()}{edited} {by(r.reviewer, r.time_ms, r.display, r.timed_out)}"
                f": {e.tool_name} ({e.call_uuid}){note}"
            )
        elif e.kind == "approval_decided":
            why = "; ".join(x for x in (e.reason, e.comment) if x)
            lines.append(f"{e.verdict} {by(e.reviewer, e.ts, e.display, e.timed_out)}: the "
                         "approval" + (f" — {why}" if why else ""))  # fmt: skip
    for r in s.hitl.decisions.values():  # recorded, not applied yet
        edited = " with edited arguments" if r.modified_args else ""
        note = f" — {r.comment}" if r.comment else ""
        who = by(r.reviewer, r.time_ms, r.display, r.timed_out)
        lines.append(
            f"{r.verdict.upper()}{edited} {who}: {r.tool_name} "
            f"({r.call_uuid}){note} [recorded: the next resume applies it]"
        )
    return lines


def _answer(s: Any) -> str | None:
    """The answer of the session's last finished request (not while it is pending)."""
    if s.is_pending:
        return None
    for e in reversed(list(s.events)):
        if e.kind in ("run_end", "team_end") and e.agent == s.agent:
            return str(e.content) if e.content and not e.pending else None
    return None


def cmd_show(args: argparse.Namespace, store: SessionStore) -> None:
    s = store.load(args.session_id)
    print(f"session:  {_v(s.session_id)}")
    # (the agent as versions lists it, ops@2; the store version counts the row's saves)
    agent = version_label(s.agent, s.agent_version)
    print(f"status:   {s.status}   agent: {_v(agent)}   store version: {s.store_version}")
    if s.is_pending:
        print(f"reason:   {_v(s.pending_reason)}")
    if s.context.get("approval.request") is not None:
        print(f"request:  {_v(s.context.get('approval.request'))}")
    if s.requester is not None:
        print(f"asked by: {_v(s.requester.name)} ({s.requester.via or 'api'})")
    now = s.clock.now_ms()
    expired = {t.call_uuid for t in HITL.expired_tasks(s, now)}
    waiting = HITL.pending_tasks(s)
    for task in waiting:
        call = f"{task.tool_name}({json.dumps(task.args, ensure_ascii=False)})"
        late = " [expired: the next resume rejects it]" if task.call_uuid in expired else ""
        print(f"task:     {_v(task.call_uuid)} {_v(call)} {_v(task.reason or '')}{late}")
        progress = HITL.progress(s, task.call_uuid, now)
        if progress is not None:
            print(f"needs:    {_v(progress.text)}")
    deadline = binding_deadline(s)
    if not s.hitl.tasks and s.is_pending:
        progress = HITL.progress(s, now_ms=now)
        if progress is not None and s.context.get(progress.target) is None:
            print(f"needs:    {_v(progress.text)}")
        if deadline is not None:
            late = " [expired: the next resume rejects it]" if now >= deadline else ""
            print(f"deadline: {_utc(deadline)}{late}")
    for line in _decisions(s):
        print(f"decision: {_v(line)}")
    resolved = {r.get("key"): r for r in s.context.get(RESOLVED_KEY) or [] if isinstance(r, dict)}
    for key, entry in sorted(s.ledger.items()):
        note = ""
        if entry.status == "started":
            note = " [outcome unknown unless it is running now: resolve or forget it]"
        elif key in resolved:
            r = resolved[key]
            who = label(r.get("reviewer"), r.get("display")) or "an unnamed reviewer"
            note = f" ({r.get('outcome')} by hand, by {who})"
        print(f"effect:   {_v(key)} {entry.status}{_v(note)}")
    for line in ("result", "content"):
        value = s.context.get(f"change.{line}")
        if value is not None:
            print(f"{line}:   {_v(value)}")
    answer = _answer(s)
    if answer is not None:
        print(f"answer:   {_v(answer)}")
    if len(waiting) > 1:
        sid, at = _v(shlex.quote(s.session_id)), _v(store_option(args.store))
        print(f"decide one call: python -m intermission approve {sid} --call CALL{at}"
              " (or reject … --call CALL --reason …); the rest keep waiting")  # fmt: skip
