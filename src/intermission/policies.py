"""Approval policies: who may decide an approval, how many must agree, and what its deadline
does. A policy is data: it travels with the task (``HITLTask.policy``) or the graph approval
(its context keys) in the snapshot, so every surface enforces it without the agent at hand.
Judging decisions against it is :mod:`intermission.hitl.policy`'s job."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_serializer, field_validator, model_validator

from ._model import Model

__all__ = ["ApprovalPolicy", "Escalate"]

MAX_MS = 1e13


def _role_set(value: Any) -> Any:
    """Roles as given (a set, a list, one name) → a frozenset, or the value for pydantic to
    refuse."""
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, Iterable) and not isinstance(value, (bytes, dict)):
        return frozenset(value)
    return value


def _check_roles(value: frozenset[str] | None) -> frozenset[str] | None:
    if value is not None:
        if not value:
            raise ValueError("an empty set of roles lets nobody decide; say None for anyone")
        if any(not r.strip() or len(r) > 200 for r in value):
            raise ValueError("a role is 1 to 200 characters")
    return value


class Escalate(Model):
    """An ``on_expire`` rule: at the deadline, more roles may decide, with a new deadline.

    ``on_expire=Escalate(roles=..., after_ms=...)``: when the deadline passes undecided,
    the approval becomes decidable by ``roles`` as well, with a new deadline ``after_ms``
    later; when that one passes too, it is rejected."""

    model_config = ConfigDict(extra="forbid", defer_build=True, frozen=True)

    roles: frozenset[str]
    after_ms: float = Field(gt=0, le=MAX_MS)

    _roles = field_validator("roles", mode="before")(staticmethod(_role_set))

    @field_validator("roles")
    @classmethod
    def _nonempty(cls, value: frozenset[str]) -> frozenset[str]:
        return _check_roles(value) or value

    @field_serializer("roles")
    def _sorted(self, value: frozenset[str]) -> list[str]:
        return sorted(value)


class ApprovalPolicy(Model):
    """What an approval requires: who may decide, how many must approve, and by when.

    It is declared where the approval is asked for:
    ``HITLInterceptor().on_tool("deploy", policy=ApprovalPolicy(...))``,
    ``on_destructive(policy=...)``, ``open_approval(ctx, policy=...)``.

    Example:
        ```python
        from intermission import ApprovalPolicy, InMemoryAgentSession, Principal, decide_graph
        from intermission.examples import build_change_graph

        policy = ApprovalPolicy(roles={"sre"}, approvals=2, not_requester=True)
        print(sorted(policy.roles), policy.approvals, policy.reason_to_reject)
        #> ['sre'] 2 True
        graph, session = build_change_graph(policy=policy), InMemoryAgentSession.of("c-1")
        # carol asks (and, as the requester, may not approve); the graph pauses for review
        graph.prompt("Upgrade order-service").session(session).principal(Principal("carol")).call()
        decide_graph(session, "APPROVE", principal=Principal("alice", {"sre"}))
        print(session.is_pending)  # one approval of the two: still waiting
        #> True
        decide_graph(session, "APPROVE", principal=Principal("bob", {"sre"}))
        print(graph.prompt().session(session).call().content)
        #> Change executed: applied change-001
        ```
    """

    model_config = ConfigDict(extra="forbid", defer_build=True, frozen=True)

    roles: frozenset[str] | None = None
    """Who may decide (approve or reject): principals holding any of these roles; None:
    anyone."""
    approvals: int = Field(default=1, ge=1, le=100)
    """How many distinct principals must approve before the call runs (the same principal
    never counts twice)."""
    rejections: int = Field(default=1, ge=1, le=100)
    """How many rejections reject it (a skip counts as one)."""
    not_requester: bool = False
    """True: the principal who sent the request cannot decide it."""
    reason_to_reject: bool = True
    """A rejection must say why."""
    expires_after_ms: float | None = Field(default=None, gt=0, le=MAX_MS)
    """A deadline, counted from when the approval was asked for (the session's clock)."""
    on_expire: Literal["reject", "approve"] | Escalate = "reject"
    """At the deadline, undecided: ``reject``, ``approve`` (recorded as timed out, with no
    responder), or :class:`Escalate`."""
    warn_before_ms: float | None = Field(default=None, gt=0, le=MAX_MS)
    """Emit a warning event this long before each deadline (for notifications)."""
    asserted_ok: bool = Field(default=False, exclude_if=lambda v: not v)
    """True: trust typed (asserted) names under ``roles``, ``approvals > 1`` and
    ``not_requester`` (teaching notebooks, a single-user demo). False (the default): those
    rules count only principals a surface authenticated — a token or JWT (``serve
    --auth``), an OS user an identity file maps (``--auth FILE``), a ``Principal`` code
    vouches for; a typed name is refused."""

    _roles = field_validator("roles", mode="before")(staticmethod(_role_set))

    @field_validator("roles")
    @classmethod
    def _nonempty(cls, value: frozenset[str] | None) -> frozenset[str] | None:
        return _check_roles(value)

    @field_serializer("roles")
    def _sorted(self, value: frozenset[str] | None) -> list[str] | None:
        return None if value is None else sorted(value)

    @model_validator(mode="after")
    def _coherent(self) -> ApprovalPolicy:
        if self.expires_after_ms is None:
            if self.on_expire != "reject":
                raise ValueError("on_expire needs a deadline: set expires_after_ms")
            if self.warn_before_ms is not None:
                raise ValueError("warn_before_ms needs a deadline: set expires_after_ms")
        return self

    @property
    def escalation(self) -> Escalate | None:
        """The escalation of ``on_expire``, if it escalates."""
        return self.on_expire if isinstance(self.on_expire, Escalate) else None

    @property
    def is_default(self) -> bool:
        """True for the policy every approval has without one (anyone, one decision, a
        reason to reject, no deadline)."""
        return self == _DEFAULT


_DEFAULT = ApprovalPolicy()
