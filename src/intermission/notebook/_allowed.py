"""What the viewer of a decision widget may do now, and why not, in sentences (R63).

A widget offers only what will be accepted: before it draws its buttons it asks the very
rules that judge a click (``check_graph`` for a graph approval, ``HITL._judge`` for a tool
call; both write nothing) whether its viewer — the Reviewer field's person, with the
widget's principal — may approve or reject now, and turns a refusal into a sentence for
the disabled button ("you approved — waiting for one more from sre"). A refusal after a
click is worded by the same code ("Not recorded: you already approved this; …"), never
with an exception's class name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..decisions import HITLDecision, HITLTask
from ..errors import (
    AgentVersionError,
    DeadlinePassedError,
    DecisionConflictError,
    DecisionRefusedError,
    IntermissionError,
)
from ..hitl.approval_keys import ApprovalKeys, binding_deadline
from ..hitl.graph import check_graph
from ..hitl.policy import NO_REQUESTER, Progress
from ..hitl.timeouts import progress_of
from ..principals import Actor, same_principal

__all__ = ["Allowed", "graph_allowed", "refusal_text", "task_allowed", "waiting_head"]

_DONE = {"approve": "approved", "reject": "rejected", "skip": "skipped"}
NOTHING_CHANGED = "; nothing was changed"
NEEDS_REASON = "a rejection needs a reason — write one above"
"""What a Reject button disabled for want of a reason says (the page says it too)."""


@dataclass(frozen=True)
class Allowed:
    """For each verdict a button offers: "" when the viewer may give it now, else the
    sentence saying why not."""

    why_not: dict[str, str]

    def can(self, verdict: str) -> bool:
        """True when the viewer may give ``verdict`` now."""
        return not self.why_not.get(verdict, "")


def _roles(roles: Any) -> str:
    names = [str(r) for r in sorted(roles or ())]
    if len(names) < 2:
        return f"the role {names[0]}" if names else "a role"
    return "one of the roles " + ", ".join(names[:-1]) + " or " + names[-1]


def _my_vote(progress: Progress | None, name: str | None) -> str | None:
    """The verdict ``name`` gave already on the approval, or None."""
    for vote in progress.votes if progress is not None else ():
        if same_principal(vote.name, name):
            return str(vote.verdict)
    return None


def _sentence(
    error: BaseException, progress: Progress | None, actor: Actor | None, *, after: bool
) -> str:
    """A refusal as a sentence for the person it refuses (lower case, no full stop).
    ``after``: worded for a click already made ("you already approved this")."""
    name = actor.name if actor is not None else getattr(error, "reviewer", None)
    if isinstance(error, DecisionRefusedError):
        rule = error.rule
        if rule == "twice":
            done = _DONE.get(_my_vote(progress, name) or "", "voted")
            waits = progress.waiting if progress is not None else "waiting for the others"
            if after:
                return f"you already {done} this; it is still {waits}"
            return f"you {done} — {waits}"
        if rule == "not_requester":
            return "you asked for this approval, so someone else must decide it"
        if rule == "roles":
            wanted = progress.roles if progress is not None else None
            held = ", ".join(sorted(actor.roles)) if actor is not None and actor.roles else ""
            has = f"you hold {held}" if held else "you hold no role"
            return f"only someone with {_roles(wanted)} may decide this, and {has}"
        if rule == "reason_to_reject":
            return NEEDS_REASON
        if rule == "no_requester":
            return f"nobody may approve this: {NO_REQUESTER}"
        if rule == "anonymous":
            return "type your name in the Reviewer field: this approval counts who decides"
        if rule == "asserted":
            return (
                "this approval counts only known people, and a name typed in a notebook is "
                "not one: give the notebook an identity file (intermission.notebook.settings"
                ".identity = load_identity(FILE)) that maps your OS user"
            )
        if rule == "approvers":
            return "you are not one of the people who may decide this"
        if rule == "same_arguments":
            return "the approvals so far approve other arguments: approve the same ones, or reject"
    if isinstance(error, DecisionConflictError):
        who = error.reviewer or "an unnamed reviewer"
        return f"it was decided already: {error.verdict.lower()} by {who}"
    if isinstance(error, DeadlinePassedError):  # (after a click: when, and how late)
        return str(error) if after else "its deadline passed, so nothing can be decided any more"
    if isinstance(error, AgentVersionError):
        return "the agent version it paused on is not served here"
    if isinstance(error, IntermissionError):
        return str(error).removesuffix(NOTHING_CHANGED)
    return f"something went wrong ({type(error).__name__}: {error})"  # a bug, not a refusal


def refusal_text(error: BaseException, session: Any, actor: Actor | None = None) -> str:
    """What a widget says of a click the rules refused (nothing changed), as a sentence:
    ``Not recorded: you already approved this; it is still waiting for one more from
    sre.`` Never an exception's class name (an unexpected error, a bug, keeps it)."""
    target = getattr(error, "call_uuid", None)
    try:
        progress = progress_of(session, target) if getattr(session, "is_pending", False) else None
    except Exception:  # (an unreadable policy): worded without it
        progress = None
    said = _sentence(error, progress, actor, after=True).rstrip(".")
    if not isinstance(error, IntermissionError):
        return said[:1].upper() + said[1:] + "."
    return f"Not recorded: {said}."


def _judged(
    verdicts: tuple[str, ...], judge: Any, progress: Progress | None, actor: Actor | None
) -> Allowed:
    why: dict[str, str] = {}
    for verdict in verdicts:
        try:
            judge(verdict)
        except Exception as exc:  # refused as a click would be: said, nothing changed
            why[verdict] = _sentence(exc, progress, actor, after=False)
        else:
            why[verdict] = ""
    return Allowed(why)


def _nobody(verdicts: tuple[str, ...], why: str) -> Allowed:
    return Allowed(dict.fromkeys(verdicts, why))


NO_REVIEWER = "type your name in the Reviewer field"


def graph_allowed(
    session: Any, keys: ApprovalKeys, actor: Actor | None, approvers: Any = None
) -> Allowed:
    """What ``actor`` may do now on the session's graph approval (approve, reject: a
    rejection judged as if it gave a reason; the page asks for one)."""
    verdicts = ("approve", "reject")
    if not session.is_pending:
        return _nobody(verdicts, "")
    if actor is None:
        return _nobody(verdicts, NO_REVIEWER)
    # the clock is read only for an approval with a deadline (a FakeClock moves on reads)
    now = float(session.clock.now_ms()) if binding_deadline(session, keys) is not None else 0.0
    try:
        progress = progress_of(session, None, now)
    except Exception:
        progress = None

    def judge(verdict: str) -> None:
        check_graph(
            session, "APPROVE" if verdict == "approve" else "REJECT", principal=actor,
            reason="(given)", keys=keys, approvers=approvers, now_ms=now,
        )  # fmt: skip

    return _judged(verdicts, judge, progress, actor)


def task_allowed(
    session: Any,
    task: HITLTask,
    actor: Actor | None,
    agent: Any,
    agreed: dict[str, Any] | None,
    now: float,
) -> Allowed:
    """What ``actor`` may do now on one tool call (approve the arguments the approvals so
    far approve, reject, skip). ``now``: the time deadlines are judged by."""
    from ..hitl import HITL

    verdicts = ("approve", "reject", "skip")
    if actor is None:
        return _nobody(verdicts, NO_REVIEWER)
    try:
        progress = progress_of(session, task.call_uuid, now)
    except Exception:
        progress = None
    made = {
        "approve": HITLDecision.approve(),
        "reject": HITLDecision.reject("(given)"),
        "skip": HITLDecision.skip(),
    }
    if agreed is not None:
        made["approve"] = made["approve"].modified_args(agreed)

    def judge(verdict: str) -> None:
        HITL._judge(session, task.call_uuid, made[verdict], agent, actor, now)

    return _judged(verdicts, judge, progress, actor)


def waiting_head(session: Any) -> str:
    """What an open approval waits for, as a heading: "Waiting for a decision" until a
    vote is in, then "Waiting for one more approval" (or how many more)."""
    tasks = [t for t in session.hitl.tasks if t.call_uuid not in session.hitl.decisions]
    targets: list[str | None] = [t.call_uuid for t in tasks] if session.hitl.tasks else [None]
    needed = []
    for target in targets:
        try:
            found = progress_of(session, target)
        except Exception:
            found = None
        if found is not None and found.approvals:
            needed.append(found.needed)
    if not needed:
        return "Waiting for a decision"
    if len(targets) > 1:
        return "Waiting for more approvals"
    n = needed[0]
    return "Waiting for one more approval" if n == 1 else f"Waiting for {n} more approvals"
