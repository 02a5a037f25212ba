"""Judging decisions against an approval's policy, and saying where an approval stands.

One set of rules for every surface (Python, CLI, notebook widgets, AG-UI, console): they
all reach :func:`judge` through ``HITL.submit`` or ``decide_graph``, and they all word an
approval's progress with :func:`progress_text`. A policy travels with its approval (the
task's ``policy``, or the graph approval's context keys), so nothing here needs the agent.

An approval is an :class:`Ask`: its policy, who asked (``requester``), the votes so far,
its deadline and whether it was escalated. A decision is judged against it at a time:

- past the last deadline, nothing can be decided (``DeadlinePassedError``): the expiry is
  the outcome (see :mod:`intermission.hitl.timeouts`);
- under ``roles``, ``approvals > 1`` or ``not_requester`` the decider must be a principal
  a surface authenticated (a typed name is refused unless the policy says
  ``asserted_ok=True``); names compare NFKC-normalised and case-folded;
- the decider must hold one of the policy's roles (or of its escalation's, once escalated),
  must not be the requester when ``not_requester`` (and with no signed-in requester
  recorded, nobody may approve: it can be rejected or expire), must not have voted
  already, must give a reason to reject when ``reason_to_reject``, and must approve the
  same arguments as the approvals so far;
- the vote then counts: ``approvals`` distinct approvals approve, ``rejections``
  rejections (or skips) reject; until then the approval stays open.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..decisions import Verdict, Vote
from ..errors import (
    DeadlinePassedError,
    DecisionRefusedError,
    ReviewerNotAllowedError,
    UsageError,
)
from ..policies import ApprovalPolicy, Escalate
from ..principals import Actor, Principal, principal_name, same_principal

__all__ = [
    "DEFAULT_POLICY",
    "ApprovalPolicy",
    "Ask",
    "Escalate",
    "Progress",
    "allowed_roles",
    "counts_people",
    "judge",
    "progress_text",
    "requester_known",
    "satisfied",
    "tally",
    "vote_of",
    "waiting_text",
]

DEFAULT_POLICY = ApprovalPolicy()
"""The policy of an approval that names none: anyone decides, once, and says why to reject."""


@dataclass(frozen=True)
class Ask:
    """An approval as its policy judges it (a tool task or a graph approval)."""

    policy: ApprovalPolicy
    requester: Actor | None = None
    votes: Sequence[Vote] = ()
    deadline_ms: float | None = None
    escalated_ms: float | None = None
    warned_ms: float | None = None
    what: str = "the approval"
    """How errors name it: ``tool call deploy (call_1)``, ``the approval``."""

    def escalated_at(self, now_ms: float | None) -> bool:
        """True when escalated by then: recorded, or its first deadline passed (and the
        policy escalates) even if nobody recorded it yet."""
        if self.escalated_ms is not None:
            return True
        esc = self.policy.escalation
        return (
            esc is not None
            and now_ms is not None
            and self.deadline_ms is not None
            and now_ms >= self.deadline_ms
        )

    def last_deadline(self) -> float | None:
        """When nothing can be decided any more (the escalation's deadline, once the
        first passed, for a policy that escalates)."""
        esc = self.policy.escalation
        if self.deadline_ms is None or esc is None or self.escalated_ms is not None:
            return self.deadline_ms
        return self.deadline_ms + esc.after_ms


def allowed_roles(policy: ApprovalPolicy, escalated: bool) -> frozenset[str] | None:
    """The roles that may decide now (None: anyone): the policy's, and once escalated its
    escalation's as well."""
    roles = policy.roles
    esc = policy.escalation
    if roles is None:
        return None
    if escalated and esc is not None:
        return roles | esc.roles
    return roles


def vote_of(
    actor: Actor | None,
    verdict: Verdict,
    time_ms: float,
    comment: str | None = None,
    modified_args: dict[str, Any] | None = None,
) -> Vote:
    """A vote by ``actor`` (a decision that names nobody votes as ``anonymous``)."""
    a = actor or Actor(name="anonymous")
    return Vote(
        verdict=verdict, name=a.name, roles=list(a.roles), via=a.via,
        authenticated=a.authenticated, display=a.display, time_ms=time_ms, comment=comment,
        modified_args=modified_args,
    )  # fmt: skip


def counts_people(policy: ApprovalPolicy) -> bool:
    """True when the policy's rules count who decides (``roles``, ``approvals > 1``,
    ``not_requester``): only authenticated principals may decide under it, unless it says
    ``asserted_ok=True``."""
    return policy.roles is not None or policy.not_requester or policy.approvals > 1


def requester_known(policy: ApprovalPolicy, requester: Actor | None) -> bool:
    """True when ``not_requester`` can tell who asked: a signed-in requester was recorded
    (or, under ``asserted_ok=True``, any requester)."""
    return requester is not None and (requester.authenticated or policy.asserted_ok)


NO_REQUESTER = "no signed-in requester was recorded: it can be rejected or expire, not approved"
"""Why an approval under ``not_requester`` without a known requester cannot be approved."""


def _sign_in(actor: Actor) -> str:
    """What to configure so that ``actor`` decides as a known person."""
    if actor.via == "cli":
        return (
            f"the OS user {actor.name!r} is not mapped to a person: map its login under "
            "os_users: in an identity file and pass --auth FILE (or set INTERMISSION_AUTH)"
        )
    if actor.via == "notebook":
        return (
            f"{actor.name!r} is a name typed in a notebook: give the notebook an identity "
            "file (intermission.notebook.settings.identity = load_identity(FILE)) that maps "
            "your OS user under os_users:"
        )
    return (
        f"{actor.name!r} is a typed name, not a signed-in person: sign in over AG-UI "
        "(serve --auth FILE: a token or JWT), or pass principal=Principal(...) that your "
        "code vouches for"
    )


def judge(
    ask: Ask,
    actor: Actor | None,
    verdict: Verdict,
    *,
    reason: str | None,
    now_ms: float,
    session_id: str,
    call_uuid: str | None = None,
    modified_args: dict[str, Any] | None = None,
) -> None:
    """Refuse (typed error, nothing changed) a decision the policy does not allow now; see
    the module docstring for the rules, checked in that order."""
    policy = ask.policy
    name = actor.name if actor is not None else None
    last = ask.last_deadline()
    if last is not None and policy.expires_after_ms is not None and now_ms >= last:
        raise DeadlinePassedError(
            session_id, last, now_ms, call_uuid=call_uuid, what=ask.what,
        )  # fmt: skip

    def refused(rule: str, message: str, error: type[DecisionRefusedError]) -> None:
        raise error(
            f"{message}; nothing was changed", rule=rule, reviewer=name, verdict=verdict,
            session_id=session_id, call_uuid=call_uuid,
        )  # fmt: skip

    needs_someone = (
        policy.roles is not None or policy.not_requester or policy.approvals > 1
        or policy.rejections > 1
    )  # fmt: skip
    if needs_someone and actor is None:
        refused(
            "anonymous",
            f"{ask.what} of session {session_id!r} needs a decision in someone's name "
            "(its policy counts who decides)",
            ReviewerNotAllowedError,
        )
    if actor is not None:
        try:  # (one that looks like another person's, or hides characters, never counts)
            principal_name(actor.name)
        except UsageError as exc:
            refused("name", f"{exc}", ReviewerNotAllowedError)
        if counts_people(policy) and not actor.authenticated and not policy.asserted_ok:
            refused(
                "asserted",
                f"{ask.what} of session {session_id!r} counts only known people (its policy "
                f"has roles, approvals > 1 or not_requester), and {_sign_in(actor)}; a "
                "policy that trusts typed names says ApprovalPolicy(asserted_ok=True)",
                ReviewerNotAllowedError,
            )
    roles = allowed_roles(policy, ask.escalated_at(now_ms))
    if roles is not None and not (actor is not None and roles & set(actor.roles)):
        held = ", ".join(sorted(actor.roles)) if actor is not None and actor.roles else "none"
        refused(
            "roles",
            f"{name!r} may not decide {ask.what} of session {session_id!r}: it takes one "
            f"of the roles {', '.join(sorted(roles))} (held: {held})",
            ReviewerNotAllowedError,
        )
    requester = ask.requester
    if policy.not_requester and requester is not None and same_principal(name, requester.name):
        refused(
            "not_requester",
            f"{name!r} asked for {ask.what} of session {session_id!r} and may not decide "
            "it: someone else must",
            ReviewerNotAllowedError,
        )
    if policy.not_requester and verdict == "approve" and not requester_known(policy, requester):
        refused(
            "no_requester",
            f"{ask.what} of session {session_id!r} may not be approved by anyone "
            f"(not_requester): {NO_REQUESTER}; ask again as a signed-in requester "
            "(.principal(...), serve --auth)",
            ReviewerNotAllowedError,
        )
    if verdict == "reject" and policy.reason_to_reject and not (reason or "").strip():
        refused(
            "reason_to_reject",
            f"rejecting {ask.what} of session {session_id!r} needs a reason",
            DecisionRefusedError,
        )
    mine = [v for v in ask.votes if same_principal(v.name, name)]
    if mine:
        refused(
            "twice",
            f"{name!r} already voted {mine[0].verdict} on {ask.what} of session "
            f"{session_id!r}; the same principal counts once — "
            + progress_text(policy, ask.votes, roles=roles, requester=requester),
            DecisionRefusedError,
        )
    if verdict == "approve":
        agreed = [v.modified_args for v in ask.votes if v.verdict == "approve"]
        if agreed and agreed[0] != modified_args:
            refused(
                "same_arguments",
                f"the approvals so far of {ask.what} of session {session_id!r} approve "
                + ("the arguments as proposed" if agreed[0] is None else "edited arguments")
                + ": approve the same arguments, or reject",
                DecisionRefusedError,
            )


def tally(policy: ApprovalPolicy, votes: Sequence[Vote]) -> Verdict | None:
    """The outcome the votes make (the verdict of the vote that reached its count), or
    None while the approval stays open."""
    approvals = [v for v in votes if v.verdict == "approve"]
    against = [v for v in votes if v.verdict != "approve"]
    if len(against) >= policy.rejections:
        return against[policy.rejections - 1].verdict
    if len(approvals) >= policy.approvals:
        return "approve"
    return None


def satisfied(policy: ApprovalPolicy, votes: Sequence[Vote], requester: Actor | None) -> bool:
    """True when ``votes`` (the ones that made a recorded outcome) are an outcome
    ``policy`` allows: enough distinct deciders, each holding an allowed role (its
    escalation's included), none of them the requester when ``not_requester``. How a
    resume checks a decision recorded elsewhere against the policy of the code it runs."""
    if not votes:
        return False
    outcome = tally(policy, _distinct(votes))
    if outcome is None:
        return False
    roles = allowed_roles(policy, escalated=True)
    if outcome == "approve" and policy.not_requester and not requester_known(policy, requester):
        return False
    for v in votes:
        if roles is not None and not roles & set(v.roles):
            return False
        if counts_people(policy) and not v.authenticated and not policy.asserted_ok:
            return False
        if (
            policy.not_requester
            and requester is not None
            and same_principal(v.name, requester.name)
        ):
            return False
    return True


def _distinct(votes: Sequence[Vote]) -> list[Vote]:
    from ..principals import name_key

    seen: set[str] = set()
    out = []
    for v in votes:
        if name_key(v.name) not in seen:
            seen.add(name_key(v.name))
            out.append(v)
    return out


def _known(policy: ApprovalPolicy, requester: Principal | Actor | None) -> bool:
    """:func:`requester_known` for what views pass (a Principal is vouched for)."""
    if isinstance(requester, Principal):
        return True
    return requester_known(policy, requester)


def _who(p: Principal | Actor | Vote) -> str:
    label = p.label if isinstance(p, Actor) else getattr(p, "name", str(p))
    roles = sorted(getattr(p, "roles", ()) or ())
    return ", ".join([label, *roles])


def _anyone(roles: Iterable[str] | None) -> str:
    names = sorted(roles or ())
    if not names:
        return "anyone"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def progress_text(
    policy: ApprovalPolicy | None,
    votes: Sequence[Vote | Principal | Actor],
    *,
    rejections: Sequence[Vote | Principal | Actor] = (),
    roles: Iterable[str] | None = None,
    requester: Principal | Actor | None = None,
    outcome: str | None = None,
) -> str:
    """Where an approval stands, in one line every surface shows the same way, e.g.
    ``1 of 2 approvals (alice, sre) — waiting for one more from sre``.

    ``votes``: the approvals so far (votes with other verdicts in it are counted as
    rejections); ``rejections``: rejections so far given apart; ``roles``: who may decide
    now (default: the policy's); ``requester``: who asked (named when they may not
    decide); ``outcome``: the verdict once decided."""
    policy = policy or DEFAULT_POLICY
    yes = [v for v in votes if getattr(v, "verdict", "approve") == "approve"]
    no = [v for v in votes if getattr(v, "verdict", "approve") != "approve"] + list(rejections)
    if outcome is not None:
        deciders = yes if outcome == "approve" else no
        names = " and ".join(_who(v).split(", ")[0] for v in deciders) or "the deadline"
        verb = {"approve": "approved", "reject": "rejected", "skip": "skipped"}.get(
            outcome, outcome
        )
        return f"{verb} by {names}"
    parts = []
    head = ""
    if policy.approvals > 1:
        head = f"{len(yes)} of {policy.approvals} approvals"
        if yes:
            head += " (" + "; ".join(_who(v) for v in yes) + ")"
        head += " — "
    parts.append(head + waiting_text(policy, votes, roles=roles, requester=requester))
    if no and policy.rejections > 1:
        parts.append(
            f"{len(no)} of {policy.rejections} rejections (" + "; ".join(_who(v) for v in no) + ")"
        )
    return "; ".join(parts)


def waiting_text(
    policy: ApprovalPolicy | None,
    votes: Sequence[Vote | Principal | Actor],
    *,
    roles: Iterable[str] | None = None,
    requester: Principal | Actor | None = None,
) -> str:
    """What an open approval still waits for, the tail of :func:`progress_text`: ``waiting
    for one more from sre (not carol, who asked)`` (arguments as there)."""
    policy = policy or DEFAULT_POLICY
    yes = [v for v in votes if getattr(v, "verdict", "approve") == "approve"]
    who_may = _anyone(policy.roles if roles is None else roles)
    need = policy.approvals - len(yes)
    if not yes:
        more = "an approval" if need == 1 else f"{need} approvals"
    else:
        more = "one more" if need == 1 else f"{need} more"
    source = who_may if who_may != "anyone" else ("anyone else" if yes else "anyone")
    tail = f"waiting for {more} from {source}"
    if policy.not_requester and requester is not None:
        tail += f" (not {requester.name}, who asked)"
    if policy.not_requester and not _known(policy, requester):
        tail += f" — {NO_REQUESTER}"
    return tail


@dataclass(frozen=True)
class Progress:
    """Where one approval stands, for views: its policy and votes, who may decide now,
    who asked, its deadline, and :attr:`text` (see :func:`progress_text`)."""

    target: str
    """The tool call's UUID, or the graph approval's decision key."""
    policy: ApprovalPolicy
    votes: list[Vote] = field(default_factory=list)
    roles: frozenset[str] | None = None
    requester: Actor | None = None
    deadline_ms: float | None = None
    escalated: bool = False
    tool_name: str | None = None

    @property
    def approvals(self) -> list[Vote]:
        """The approvals so far."""
        return [v for v in self.votes if v.verdict == "approve"]

    @property
    def needed(self) -> int:
        """How many more approvals it takes."""
        return max(0, self.policy.approvals - len(self.approvals))

    @property
    def waiting(self) -> str:
        """What it still waits for: ``waiting for one more from sre`` (see
        :func:`waiting_text`)."""
        return waiting_text(self.policy, self.votes, roles=self.roles, requester=self.requester)

    @property
    def text(self) -> str:
        """The one line every surface shows."""
        text = progress_text(self.policy, self.votes, roles=self.roles, requester=self.requester)
        return ("escalated: " + text) if self.escalated else text

    def metadata(self) -> dict[str, Any]:
        """JSON for an API answer (AG-UI interrupt metadata, the console)."""
        out: dict[str, Any] = {
            "progress": self.text,
            "approvalsNeeded": self.policy.approvals,
            "approvals": [
                {"name": v.name, "roles": list(v.roles), "via": v.via, "timeMs": v.time_ms}
                for v in self.approvals
            ],
            "policy": self.policy.model_dump(mode="json"),
        }
        if self.roles is not None:
            out["roles"] = sorted(self.roles)
        if self.requester is not None:
            out["requester"] = self.requester.name
        if self.policy.not_requester and not requester_known(self.policy, self.requester):
            out["notApprovable"] = NO_REQUESTER
        if self.escalated:
            out["escalated"] = True
        return out
