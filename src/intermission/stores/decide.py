"""Decide and resume through a store with other reviewers deciding at the same moment
(R39): one decision wins, and the winning one is always applied, once.

1. The decision is checked on a plain read first: a conflicting, late or invalid one is
   refused before anything is claimed, so a losing reviewer never holds the claim the
   winner needs to apply its decision.
2. The winner claims — waiting, up to ``wait_s``, while another resumer holds the claim —
   checks again under the claim, saves the decision (a crash while resuming loses
   nothing) and resumes, all under that one claim: nobody slips in between recording a
   decision and applying it.
3. If someone else decided and applied meanwhile, nothing is decided again: the same
   decision ends as applied by them (:attr:`DecisionOutcome.applied_by`), a different one
   raises DecisionConflictError naming them.
4. A decision that is a vote of a quorum, deciding nothing yet, is saved under the claim
   and nothing is resumed: the approval waits for the others
   (:attr:`DecisionOutcome.waiting` says for what).

A refused decision changes nothing; its audit entry (who tried what, why it was refused)
is written to the store's audit trail where it keeps one. An accepted decision's entry is
written by the save that records the decision, in its transaction: if that write fails,
the save fails and the error is raised — the decision was not recorded, and nothing
reports it as accepted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, NamedTuple

from .. import _check
from ..agents.versions import migrate_session, owner_check
from ..audit import AuditEntry, noted
from ..core import listeners
from ..core.session import InMemoryAgentSession
from ..errors import (
    DecisionConflictError,
    InvalidDecisionError,
    NothingToResumeError,
    SessionBusyError,
    UsageError,
    _utc,
)
from ..hitl.api import deciding_as, deciding_for
from ..hitl.expiry import THE_DEADLINE, by_deadline
from ..hitl.refusals import write_refusal
from ..hitl.timeouts import progress_of
from ..principals import Actor, Principal, label
from .base import RESUMABLE, SessionStore, not_resumable, save_ahead

log = logging.getLogger("intermission.audit")

__all__ = ["DEFAULT_WAIT_S", "DecisionOutcome", "decide_and_resume", "runner_for"]

DEFAULT_WAIT_S = 30.0
"""How long a winning decision waits for another resumer's claim before giving up."""

Decide = Callable[[InMemoryAgentSession], Any]


class _Seen(NamedTuple):
    """One decision: on a tool call (``key`` = call UUID) or the graph approval (``""``)."""

    key: str
    verdict: str
    modified: Any
    reviewer: str | None
    time_ms: float | None
    applied_ms: float | None


@dataclass(frozen=True)
class DecisionOutcome:
    """What :func:`decide_and_resume` did: ``response`` is the agent's answer of the resume
    that applied the decision, or None when another resumer applied the same decision
    meanwhile (``applied_by``: its reviewer; ``applied_ms``: when)."""

    session: InMemoryAgentSession
    response: Any = None
    applied_by: str | None = None
    applied_ms: float | None = None
    verdict: str | None = None
    waiting: str | None = None
    """Set when the decision was a vote that decided nothing yet: what the approval still
    needs (nothing was resumed)."""

    @property
    def applied_elsewhere(self) -> bool:
        """True when another resumer applied this decision (this call ran nothing)."""
        return self.response is None and self.waiting is None

    def describe(self) -> str:
        """One line for a terminal or a widget."""
        if self.waiting is not None:
            return f"recorded; {self.waiting}"
        if not self.applied_elsewhere:
            return f"applied here; session {self.session.session_id} is {self.session.status}"
        who = self.applied_by or "an unnamed reviewer"
        when = f" at {_utc(self.applied_ms)}" if self.applied_ms is not None else ""
        return (
            f"the same decision ({self.verdict} by {who}) was applied by another resume{when}; "
            "nothing was run here"
        )


def decide_and_resume(
    store: SessionStore,
    session_id: str,
    decide: Decide,
    agent: Any,
    *,
    wait_s: float = DEFAULT_WAIT_S,
    adopt: bool = False,
    principal: Principal | Actor | None = None,
) -> DecisionOutcome:
    """Record a decision with ``decide(session)`` (say ``HITL.submit_all`` or
    ``decide_graph``) and resume ``agent`` (an agent, an AgentTable — the session's own
    version, or a newer one that migrates it under the claim, R62 — or a function of the session's
    agent name returning one) — safe against any number of reviewers at once (see the
    module docstring). Refused decisions raise their typed error and change nothing.
    Inside ``decide``, HITL.submit without ``agent=`` checks against this agent, and
    HITL.submit or decide_graph without ``principal=`` decide as ``principal``.

    ``agent`` must be the session's own (its name and fingerprint): another one raises
    AgentMismatchError before anything is decided or claimed, unless ``adopt`` hands the
    session over to it on purpose (see ``AgentRequest.adopt``)."""
    if not isinstance(store, SessionStore):
        raise UsageError(f"decide_and_resume takes a store, not {type(store).__name__}")
    _check.function("decide", decide)
    _check.number("wait_s", wait_s, 0, 3600)
    if not hasattr(agent, "prompt") and not callable(agent):
        raise UsageError(f"agent is an agent or a function of an agent name, not {agent!r:.60}")
    read = store.load(session_id)
    mark = read.events.next_seq
    resumable = read.status in RESUMABLE
    if not resumable:
        refused = _finished(read)
        _refused_on_finished(store, read, refused, decide, agent, adopt, principal)
        raise refused
    runner = runner_for(agent, read, adopt=adopt)
    # the session's own agent (version), one that migrates it, or adopted on purpose
    owner_check(read, runner, adopt=adopt)
    try:
        # its approver policy and tools judge the decision (R49), made as ``principal``;
        # what the check records on the read copy is never saved, so nobody is told of it
        with deciding_for(runner, adopt=adopt), deciding_as(principal), listeners.muted():
            decide(read)  # the check on a read: a refused decision never claims
    except InvalidDecisionError as exc:
        write_refusal(store, session_id, exc)  # who tried what, why refused
        entry = getattr(exc, "audit", None)
        if entry is not None and listeners.LISTENERS:  # (the refusal is on record)
            listeners.noted(read, entry)
        raise
    ours = _ours(read, mark)
    try:
        with ExitStack() as stack:
            try:
                s = _claim(stack, store, session_id, wait_s)
            except NothingToResumeError:
                now = store.load(session_id)
                seen = _seen_since(now, mark)
                if not seen:
                    raise
                return _settle(now, ours, seen)
            applied = _seen_since(s, mark, applied_only=True)
            if applied:  # applied while we waited (and pending again): leave it unchanged
                raise _AppliedMeanwhile(applied)
            # (the claim's truth: adopted or migrated meanwhile?)
            migrate = owner_check(s, runner, adopt=adopt)
            decisions, since = len(s.hitl.decisions), s.events.next_seq
            try:
                with deciding_for(runner, adopt=adopt), deciding_as(principal):
                    decide(s)  # again, under the claim: what others recorded meanwhile
            except InvalidDecisionError as exc:
                write_refusal(store, session_id, exc)
                raise
            waiting = _only_votes(s, decisions, since)
            if waiting is not None:  # a vote of a quorum: saved as the claim ends
                return DecisionOutcome(s, None, waiting=waiting)
            if migrate is not None:  # after the decision: a rewritten call voids it
                with deciding_as(principal):
                    migrate_session(s, runner, migrate)  # raises: released, nothing saved
            if ours or migrate is not None:  # durable before any effect runs (the claim
                save_ahead(store, s)  # stays ours); not waited for before then
            request = runner.prompt().session(s)
            if adopt:  # the adoption is audited by whom (``agent.adopted``)
                with deciding_as(principal):
                    response = request.adopt().call()
            else:
                response = request.call()
    except _AppliedMeanwhile as meanwhile:  # the claim was released, nothing saved
        return _settle(store.load(session_id), ours, meanwhile.seen)
    return DecisionOutcome(s, response)


def runner_for(agent: Any, session: InMemoryAgentSession, *, adopt: bool = False) -> Any:
    """The agent that runs ``session``: ``agent`` itself, a table's agent for it (its own
    version, or one that migrates it: AgentVersionError otherwise; adopting: the newest),
    or what a function of the session's agent name returns."""
    if hasattr(agent, "for_session"):
        return agent.newest(session.agent) if adopt else agent.for_session(session)
    if not hasattr(agent, "prompt") and callable(agent):
        return agent(session.agent)
    return agent


def _refused_on_finished(
    store: SessionStore,
    read: InMemoryAgentSession,
    refused: NothingToResumeError,
    decide: Decide,
    agent: Any,
    adopt: bool,
    principal: Principal | Actor | None,
) -> None:
    """Put a decision tried on a session that no longer waits on the audit trail, as
    refused (every surface deciding through here: the CLI, widgets, the Python API).
    What was tried is what ``decide`` does on the read copy (never saved): the decisions it
    notes, or the refusal it raises; a resume with no decision (``decide`` noting nothing)
    is not a refused decision and leaves no record. Never raises: ``refused`` is what the
    caller reports."""
    before = len(noted(read))
    tried: list[AuditEntry] = []
    try:
        runner = runner_for(agent, read)
    except Exception:  # (no agent of that name here): judged without one, as it may be
        runner = None
    try:
        with deciding_for(runner, adopt=adopt), deciding_as(principal), listeners.muted():
            decide(read)
        tried = [e for e in noted(read)[before:] if e.action in _DECIDED]
    except InvalidDecisionError as exc:
        entry = getattr(exc, "audit", None)
        tried = [entry] if isinstance(entry, AuditEntry) else []
    except Exception:  # ``decide`` failed otherwise: what it tried is not known
        log.debug("what was tried on finished session %r is not known", read.session_id,
                  exc_info=True)  # fmt: skip
        return
    if not tried:
        return
    why = str(refused)[:2000]
    entries = [
        e.model_copy(update={
            "action": "decision.refused", "reason": why,
            "detail": {**{k: v for k, v in e.detail.items() if k in ("verdict", "tool")},
                       "verdict": e.detail.get("verdict", "?"), "error": type(refused).__name__},
        })
        for e in tried
    ]  # fmt: skip
    try:
        store.append_audit(read.session_id, entries)
    except Exception:
        log.warning("the audit entry of a refused decision on %r was not written",
                    read.session_id, exc_info=True)  # fmt: skip
        return
    for entry in entries if listeners.LISTENERS else ():  # (the refusal is on record)
        listeners.noted(read, entry)


_DECIDED = ("decision.recorded", "approval.recorded", "decision.refused")
"""What a decision notes: recorded (a vote too), or refused."""


def _only_votes(s: InMemoryAgentSession, decisions: int, since: int) -> str | None:
    """What the approvals still need, when ``decide`` recorded votes of a quorum and no
    decision (None otherwise: resume)."""
    new = [e.kind for e in s.events if e.seq >= since]
    if "approval_voted" not in new or "approval_decided" in new:
        return None
    if len(s.hitl.decisions) > decisions:
        return None
    texts = []
    for task in s.hitl.tasks:
        found = progress_of(s, task.call_uuid) if task.call_uuid not in s.hitl.decisions else None
        if found is not None:
            texts.append(f"{task.tool_name}: {found.text}" if len(s.hitl.tasks) > 1 else found.text)
    if not s.hitl.tasks:
        found = progress_of(s)
        if found is not None:
            texts.append(found.text)
    return "; ".join(texts) or "waiting for more decisions"


class _AppliedMeanwhile(Exception):
    """Raised through the claim so that it is released without a save."""

    def __init__(self, seen: list[_Seen]) -> None:
        self.seen = seen


def _finished(session: InMemoryAgentSession) -> NothingToResumeError:
    """The refusal for a session that is no longer waiting, naming its last decision."""
    last = _seen_since(session, 0)
    decision = None
    if last:
        d = last[-1]
        when = f" at {_utc(d.time_ms)}" if d.time_ms is not None else ""
        decision = f"{d.verdict} by {d.reviewer or 'an unnamed reviewer'}{when}"
    base = not_resumable(session.session_id, session.status)
    tail = f"; its last decision was {decision}" if decision else ""
    return NothingToResumeError(
        f"{base}{tail}", session_id=session.session_id, status=session.status,
        last_decision=decision,
    )  # fmt: skip


def _claim(stack: ExitStack, store: SessionStore, session_id: str, wait_s: float) -> Any:
    """Enter ``store.resume``, retrying while someone else holds the claim (bounded)."""
    give_up = time.monotonic() + wait_s
    pause = 0.02
    while True:
        try:
            return stack.enter_context(store.resume(session_id))
        except SessionBusyError:
            if time.monotonic() + pause > give_up:
                raise
            time.sleep(pause)
            pause = min(pause * 1.5, 0.25)


_RUNS = ("run_start", "team_start", "node_start")


def _seen_since(
    session: InMemoryAgentSession, seq: int, *, applied_only: bool = False
) -> list[_Seen]:
    """Decisions recorded or applied since event ``seq``; ``applied_only``: those a resume
    applied since then. A tool decision's event is written when it is applied; a graph
    decision's when it is recorded, and it counts as applied once a run started after it
    (one recorded before ``seq`` and applied after it counts too)."""
    seen: list[_Seen] = []
    graph: list[tuple[int, int | None, _Seen]] = []  # (recorded at, applied at, decision)
    for e in session.events:
        if e.kind == "hitl_decided" and e.seq >= seq:
            r = e.decision
            who = THE_DEADLINE if by_deadline(r.reviewer, r.timed_out) else label(
                r.reviewer, r.display
            )  # fmt: skip
            seen.append(_Seen(e.call_uuid, r.verdict, r.modified_args, who, r.time_ms, e.ts))
        elif e.kind == "approval_decided":
            who = THE_DEADLINE if by_deadline(e.reviewer, e.timed_out) else label(
                e.reviewer, e.display
            )  # fmt: skip
            graph.append((e.seq, None, _Seen("", e.verdict, None, who, e.ts, None)))
        elif e.kind in _RUNS:
            graph = [
                (at, e.seq, g._replace(applied_ms=e.ts)) if ran is None else (at, ran, g)
                for at, ran, g in graph
            ]
    for at, ran, g in graph:
        applied = ran is not None and ran >= seq
        if applied or (not applied_only and at >= seq):
            seen.append(g)
    return seen


def _ours(read: InMemoryAgentSession, mark: int) -> list[_Seen]:
    """What ``decide`` recorded on the read copy: the batch's decisions (a same one found
    recorded included), or the graph decision it wrote. A graph decision found recorded
    already (decide_graph's no-op) is not listed: whoever applies it applies ours."""
    ours = [
        _Seen(u, r.verdict, r.modified_args, label(r.reviewer, r.display), r.time_ms, None)
        for u, r in read.hitl.decisions.items()
    ]
    return ours + [s for s in _seen_since(read, mark) if not s.key]


def _settle(session: InMemoryAgentSession, ours: list[_Seen], seen: list[_Seen]) -> DecisionOutcome:
    """Someone else's resume applied ``seen``: ours agrees (an outcome) or conflicts."""
    theirs = {s.key: s for s in seen}
    for mine in ours:
        other = theirs.get(mine.key)
        if other is None or (other.verdict, other.modified) == (mine.verdict, mine.modified):
            continue
        what = f"tool call {mine.key}" if mine.key else "the approval"
        raise DecisionConflictError(
            session.session_id, what, other.verdict, other.reviewer, other.time_ms,
            call_uuid=mine.key or None, applied=True,
        )  # fmt: skip
    if ours and not any(m.key in theirs for m in ours):
        other = seen[0]  # what we decided on is gone: someone decided something else
        raise DecisionConflictError(
            session.session_id, "the pending decision", other.verdict, other.reviewer,
            other.time_ms, applied=True,
        )  # fmt: skip
    first = seen[0]
    return DecisionOutcome(
        session, None, applied_by=first.reviewer, applied_ms=first.applied_ms,
        verdict=first.verdict,
    )  # fmt: skip
