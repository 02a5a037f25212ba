"""HITL data: pending tasks, decisions and their records (R19–R23c)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import ConfigDict, Field

from ._check import shown
from ._json import canonical_dumps, check_json
from ._model import Model
from .errors import InvalidDecisionError, NotSerializableError
from .policies import ApprovalPolicy
from .principals import Actor, Via

__all__ = [
    "DecisionRecord",
    "EffectApproval",
    "HITLDecision",
    "HITLState",
    "HITLTask",
    "Verdict",
    "Vote",
    "fingerprint",
]

Verdict = Literal["approve", "reject", "skip"]


def _none(value: Any) -> bool:
    return value is None


def _empty(value: Any) -> bool:
    return not value


class Vote(Model):
    """One principal's vote on an approval that needs more than one (a quorum).

    It records who, through which surface, what and when. Kept on the task (or the graph
    approval) until the approval's outcome is decided, then on the decision that ended
    it."""

    model_config = ConfigDict(extra="forbid", defer_build=True, frozen=True)

    verdict: Verdict
    name: str
    roles: list[str] = Field(default_factory=list, exclude_if=_empty)
    via: Via | None = Field(default=None, exclude_if=_none)
    authenticated: bool = Field(default=False, exclude_if=_empty)
    display: str | None = Field(default=None, exclude_if=_none)
    time_ms: float
    comment: str | None = Field(default=None, exclude_if=_none)
    """The approval's comment, or the rejection's reason."""
    modified_args: dict[str, Any] | None = Field(default=None, exclude_if=_none)

    @property
    def actor(self) -> Actor:
        """Who voted."""
        return Actor(
            name=self.name, roles=list(self.roles), via=self.via,
            authenticated=self.authenticated, display=self.display,
        )  # fmt: skip


def fingerprint(args: dict[str, Any]) -> str:
    """A short stable hash of tool arguments: what the reviewer saw (R23a)."""
    import hashlib  # lazy: keeps `import intermission` lean

    return hashlib.sha256(canonical_dumps(args).encode()).hexdigest()[:16]


class HITLTask(Model):
    """A tool call waiting for a human, keyed by its call UUID (R19)."""

    model_config = ConfigDict(extra="forbid", defer_build=True, frozen=True)

    call_uuid: str
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None
    agent: str | None = None
    created_ms: float | None = None
    deadline_ms: float | None = None
    approvers: list[str] | None = None
    """Reviewers allowed to decide (None: anyone, unless a callable policy says otherwise)."""
    approver_policy: bool = False
    """True when a callable approver policy of the agent decides who may decide: a decision
    is then refused unless that agent is at hand (``agent=``) — it fails closed. False in
    snapshots written before this field."""
    on_expire: Literal["reject", "wait"] | None = None
    """What the deadline means: ``reject`` (a decision after it is refused and the next
    resume rejects the call) or ``wait`` (a reminder: the task stays decidable). None, in
    snapshots written before this field, counts as ``reject``. A task with a ``policy``
    follows the policy's ``on_expire`` instead."""
    args_schema: dict[str, Any] | None = Field(default=None, exclude_if=_none)
    """The tool's JSON argument schema when the call was proposed: edited arguments are
    checked against it, so a decision needs no agent in hand (a loaded, restored or
    forked session, another process). None in snapshots written before this field (the
    tool itself is needed then) and for a tool the agent does not hold."""
    policy: ApprovalPolicy | None = Field(default=None, exclude_if=_none)
    """Who may decide, how many must agree, what the deadline does (None: anyone, one
    decision, a reason to reject)."""
    requester: Actor | None = Field(default=None, exclude_if=_none)
    """Who sent the request that asked for this approval (when the request named one)."""
    votes: list[Vote] = Field(default_factory=list, exclude_if=_empty)
    """Approvals (and rejections) so far, while the policy needs more."""
    escalated_ms: float | None = Field(default=None, exclude_if=_none)
    """When the policy's escalation happened (``deadline_ms`` is then the escalation's)."""
    warned_ms: float | None = Field(default=None, exclude_if=_none)
    """The deadline a warning event was emitted for (one per deadline)."""
    notify_args: bool | list[str] | None = Field(default=None, exclude_if=_none)
    """Which arguments a notification about this call shows (redacted): all (None, the
    default, or True), none (False), or the named ones (``on_tool(notify_args=)``)."""

    @property
    def decide_by_ms(self) -> float | None:
        """The deadline after which a decision is refused (epoch ms of the session's
        clock), or None when there is none or it only marks the task expired."""
        policy = self.policy
        if policy is not None and policy.expires_after_ms is not None:
            esc = policy.escalation
            if esc is not None and self.escalated_ms is None and self.deadline_ms is not None:
                return self.deadline_ms + esc.after_ms  # (decidable by the escalation till then)
            return self.deadline_ms
        return None if self.on_expire == "wait" else self.deadline_ms

    @property
    def fingerprint(self) -> str:
        """Fingerprint of the proposed arguments."""
        return fingerprint(self.args)


class DecisionRecord(Model):
    """A decision as stored in the session and shown in timelines (R23a)."""

    model_config = ConfigDict(extra="forbid", defer_build=True, frozen=True)

    call_uuid: str
    tool_name: str
    verdict: Verdict
    comment: str | None = None
    modified_args: dict[str, Any] | None = None
    always_allow: bool = False
    reviewer: str | None = None
    """The decider's name: its principal, or a name asserted with ``.reviewer()``."""
    time_ms: float
    fingerprint: str
    applied: bool = False
    roles: list[str] = Field(default_factory=list, exclude_if=_empty)
    via: Via | None = Field(default=None, exclude_if=_none)
    """The surface the decision came through (None: recorded before surfaces were)."""
    authenticated: bool = Field(default=False, exclude_if=_empty)
    """True when the surface authenticated the decider; False for an asserted name."""
    display: str | None = Field(default=None, exclude_if=_none)
    """A display name the decider typed (never the identity)."""
    timed_out: bool = Field(default=False, exclude_if=_empty)
    """The deadline decided it, nobody did (``reviewer`` None, or ``system:deadline``)."""
    votes: list[Vote] = Field(default_factory=list, exclude_if=_empty)
    """Every vote that made this outcome, when the policy asked for more than one."""

    @property
    def actor(self) -> Actor | None:
        """Who decided (None: nobody named, or a timeout)."""
        if self.reviewer is None or self.timed_out:
            return None
        return Actor(
            name=self.reviewer, roles=list(self.roles), via=self.via,
            authenticated=self.authenticated, display=self.display,
        )  # fmt: skip


class EffectApproval(Model):
    """The approval that authorised an effect, as recorded in the effect's ledger entry.

    intermission records it there when the approved call starts (R60): the tool call it
    approved (``call_uuid``, the task's id in the session) and that approval's rules as they
    stood then. Whoever says what became of the effect when its outcome is unknown (resolve,
    forget) is judged by these rules, never by a name a model or a client hands over.

    A graph approval (``open_approval`` / ``decide_graph``) that let a flow-graph run go on
    to the node starting the effect is linked the same way: ``call_uuid`` is then its
    decision key (``approval.decision``), ``graph_keys`` its context keys and
    ``decided_ms`` the time of the decision, so that forgetting the effect voids that very
    decision and no later one."""

    model_config = ConfigDict(extra="forbid", defer_build=True, frozen=True)

    call_uuid: str
    tool_name: str | None = Field(default=None, exclude_if=_none)
    """The approved tool (None for a graph approval)."""
    graph_keys: dict[str, str] | None = Field(default=None, exclude_if=_none)
    """A graph approval's context keys (its ApprovalKeys); None for a tool call's."""
    decided_ms: float | None = Field(default=None, exclude_if=_none)
    """When the graph approval was decided (its ``time`` key; None if none was written)."""
    node: str | None = Field(default=None, exclude_if=_none)
    """The graph node that asked for the approval (``open_approval`` ran there in the run
    that started the effect); forgetting the effect reopens the approval only while the
    stored run stands on that node, so the node asks again before the effect reruns."""
    agent: str | None = Field(default=None, exclude_if=_none)
    policy: ApprovalPolicy | None = Field(default=None, exclude_if=_none)
    approvers: list[str] | None = Field(default=None, exclude_if=_none)
    approver_policy: bool = Field(default=False, exclude_if=_empty)
    """A callable of the agent decided who may approve (not kept: it is code)."""
    requester: Actor | None = Field(default=None, exclude_if=_none)
    escalated: bool = Field(default=False, exclude_if=_empty)
    """The approval had escalated: its escalation's roles were allowed too."""
    approved_by: list[str] = Field(default_factory=list, exclude_if=_empty)
    """Who approved it (for the audit trail and views)."""

    @classmethod
    def of(cls, task: HITLTask, record: DecisionRecord) -> EffectApproval:
        """The link of the effect of ``task``, approved by ``record``."""
        names = [v.name for v in record.votes if v.verdict == "approve"]
        if not names and record.reviewer is not None:
            names = [record.reviewer]
        return cls(
            call_uuid=task.call_uuid, tool_name=task.tool_name, agent=task.agent,
            policy=task.policy, approvers=task.approvers, approver_policy=task.approver_policy,
            requester=task.requester, escalated=task.escalated_ms is not None,
            approved_by=names,
        )  # fmt: skip


class HITLState(Model):
    """The suspended batch of a session: its tasks and the decisions taken so far."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    agent: str | None = None
    tasks: list[HITLTask] = Field(default_factory=list)
    decisions: dict[str, DecisionRecord] = Field(default_factory=dict)
    expired: list[str] = Field(default_factory=list)
    approval_keys: dict[str, str] | None = Field(default=None, exclude_if=_none)
    """The context keys of a graph approval opened with a policy (``open_approval``), so
    that whoever sweeps deadlines finds it without the graph at hand."""


def _edited(args: Any) -> dict[str, Any]:
    """A copy of edited arguments: a dict of names to JSON values."""
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        raise InvalidDecisionError(
            f"modified_args takes a dict of argument names to values, not {type(args).__name__}"
        )
    try:
        check_json("modified_args", args)
    except NotSerializableError as exc:
        raise InvalidDecisionError(str(exc)) from None
    return json.loads(canonical_dumps(args))  # type: ignore[no-any-return]


class HITLDecision:
    """A human decision for one pending tool call, built fluently.

    Example:
        ```python
        from intermission import HITL, HITLDecision, InMemoryAgentSession
        from intermission.examples import build_ops_agent

        agent, session = build_ops_agent(), InMemoryAgentSession.of("s-1")
        agent.prompt("Please delete user 1001").session(session).call()  # pauses before the tool
        d = HITLDecision.approve().modified_args({"user_id": 1002}).comment("typo").reviewer("lead")
        print(d.verdict, d.comment_text, d.reviewer_name)
        #> approve typo lead
        (task,) = HITL.pending_tasks(session)
        HITL.submit(session, task, d)
        print(agent.prompt().session(session).call().content)
        #> Done: user 1002 deleted (Note: typo).
        ```
    """

    __slots__ = ("always", "comment_text", "edited_args", "reviewer_name", "verdict")

    def __init__(
        self,
        verdict: Verdict,
        comment: str | None = None,
        modified_args: dict[str, Any] | None = None,
        always_allow: bool = False,
        reviewer: str | None = None,
    ) -> None:
        if verdict not in ("approve", "reject", "skip"):
            raise InvalidDecisionError(f"unknown verdict {shown(verdict)}: approve, reject or skip")
        for name, value in (("comment", comment), ("reviewer", reviewer)):
            if value is not None and not isinstance(value, str):
                raise InvalidDecisionError(f"{name} is text, not {type(value).__name__}")
        if not isinstance(always_allow, bool):
            raise InvalidDecisionError(f"always_allow is True or False, not {shown(always_allow)}")
        if modified_args is not None:
            if verdict != "approve":
                raise InvalidDecisionError("only an approval can carry edited arguments")
            modified_args = _edited(modified_args)
        self.verdict: Verdict = verdict
        self.comment_text = comment
        self.edited_args = modified_args
        self.always = always_allow
        self.reviewer_name = reviewer

    def _with(self, **changes: Any) -> HITLDecision:
        fields: dict[str, Any] = {
            "verdict": self.verdict,
            "comment": self.comment_text,
            "modified_args": self.edited_args,
            "always_allow": self.always,
            "reviewer": self.reviewer_name,
        }
        fields.update(changes)
        return HITLDecision(**fields)

    @classmethod
    def approve(cls, always_allow: bool = False) -> HITLDecision:
        """Run the tool (with any edited arguments)."""
        return cls("approve", always_allow=always_allow)

    @classmethod
    def reject(cls, reason: str | None = None) -> HITLDecision:
        """Do not run the tool; a single reject ends the run abnormally (R21)."""
        return cls("reject", comment=reason)

    @classmethod
    def skip(cls, comment: str | None = None) -> HITLDecision:
        """Do not run the tool; the model sees the skip text as the observation."""
        return cls("skip", comment=comment)

    def comment(self, text: str) -> HITLDecision:
        """Attach a comment (for approve, appended to the observation as ``(Note: …)``)."""
        return self._with(comment=text)

    def modified_args(self, args: dict[str, Any]) -> HITLDecision:
        """Edited arguments merged over the proposed ones; validated against the tool schema."""
        return self._with(modified_args=_edited(args))

    def always_allow(self) -> HITLDecision:
        """Mark the approval as 'always allow' (calls the interceptor's ``on_approved``)."""
        return self._with(always_allow=True)

    def reviewer(self, name: str) -> HITLDecision:
        """Name who decided (checked by an approver policy, R23c)."""
        return self._with(reviewer=name)

    @property
    def is_approved(self) -> bool:
        """True for an approval."""
        return self.verdict == "approve"

    def __repr__(self) -> str:
        extra = "".join(
            f", {k}={v!r}"
            for k, v in (
                ("comment", self.comment_text),
                ("modified_args", self.edited_args),
                ("reviewer", self.reviewer_name),
            )
            if v is not None
        )
        return f"HITLDecision({self.verdict!r}{extra})"
