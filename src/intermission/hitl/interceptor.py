"""HITLInterceptor: suspend a whole tool batch before anything runs, apply decisions on resume
(R18–R23b)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from .. import _check
from .._check import shown
from ..agents.interceptors import ReActInterceptor, ToolExchange
from ..agents.tools import held_tool
from ..audit import AuditEntry, note
from ..core import listeners
from ..decisions import DecisionRecord, EffectApproval, HITLTask, fingerprint
from ..errors import UsageError
from ..events import HITLDecidedEvent, HITLExpiredEvent, HITLPendingEvent
from ..policies import ApprovalPolicy
from ..principals import Actor
from ..traces import ReActTrace
from .graph import DEADLINE_REVIEWER

__all__ = ["HITLInterceptor", "Policy"]

Policy = Callable[[ReActTrace, dict[str, Any]], "str | None"]
"""``policy(trace, args)`` → a reason (ask a human) or None (run without asking)."""
ApproverPolicy = Callable[[str | None, HITLTask], bool]
"""``policy(reviewer, task)`` → may this reviewer decide? (sets of names travel in the task;
a callable is read from the interceptor of the agent instance, R49)."""

DEFAULT_REASON = "Sensitive operation: human confirmation required"
DESTRUCTIVE_REASON = "May change the world (a destructive tool): human confirmation required"
_DESTRUCTIVE = "\x00destructive"  # the key of on_destructive's policy (no tool is named so)
SKIP_TEXT = "Skipped by the reviewer: continue with the next step."
REJECT_TEXT = "Rejected by the reviewer: human approval was not given."


@dataclass(frozen=True)
class _Asks:
    """How one ``on_tool`` / ``on_destructive`` asks: when (``when(trace, args)`` gives a
    reason, or always), the old-style deadline, and the approval policy."""

    when: Policy | None
    deadline_ms: float | None
    policy: ApprovalPolicy | None
    notify_args: bool | list[str] | None = None


def _notify_args(value: Any) -> bool | list[str] | None:
    """``on_tool(notify_args=)`` as a task keeps it (None: all, the default)."""
    if value is True:
        return None
    if value is False:
        return False
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise UsageError(f"notify_args is True, False or argument names, not {shown(value)}")
    names = list(value)
    if not all(isinstance(n, str) and n for n in names):
        raise UsageError(f"notify_args names arguments (non-empty str), not {shown(value)}")
    return sorted(set(names))


def _split(policy: Any, when: Any) -> tuple[Policy | None, ApprovalPolicy | None]:
    """``policy=`` is an ApprovalPolicy, or (as before) the function of when to ask."""
    _check.function("when", when, optional=True)
    if isinstance(policy, ApprovalPolicy):
        return when, policy
    _check.function("policy", policy, optional=True)
    if policy is not None and when is not None:
        raise UsageError("give when to ask once: policy=function or when=function, not both")
    return policy or when, None


class HITLInterceptor(ReActInterceptor):
    """Ask a human before some tools run.

    A deadline (``on_tool(..., deadline_ms=...)``) counts from when the call is proposed,
    in epoch milliseconds of the session's clock — the clock that judges decisions and
    expires the task at resume (the agent's ``.clock(...)`` only stamps events).
    ``on_expire="reject"`` (the default): a decision after the deadline is
    refused with DeadlinePassedError, and the next resume rejects the call as
    ``system:deadline``. ``on_expire="wait"``: the deadline only marks the task expired
    (an event, ``HITL.expired_tasks``); it stays decidable.

    An :class:`~intermission.ApprovalPolicy` (``on_tool(name, policy=ApprovalPolicy(...))``)
    says who may decide, how many must approve and what its deadline does; it travels with
    the task, so every surface judges decisions by it. The task also records who sent the
    request (``agent.prompt(p).session(s).principal(...)``).

    Example:
        >>> hitl = HITLInterceptor().on_tool("delete_user").approvers({"lead"})
        >>> two = HITLInterceptor().on_tool("deploy", policy=ApprovalPolicy(approvals=2))
    """

    def __init__(self, on_expire: Literal["reject", "wait"] = "reject") -> None:
        if on_expire not in ("reject", "wait"):
            raise UsageError(f"on_expire is 'reject' or 'wait', not {shown(on_expire)}")
        self._policies: dict[str, _Asks] = {}
        self._approvers: dict[str, frozenset[str] | ApproverPolicy] = {}
        self._last: str | None = None
        self._on_approved: Callable[[str, dict[str, Any]], Any] | None = None
        self.on_expire = on_expire

    def on_tool(
        self,
        name: str,
        policy: ApprovalPolicy | Policy | None = None,
        *,
        deadline_ms: float | None = None,
        when: Policy | None = None,
        notify_args: bool | Iterable[str] = True,
    ) -> HITLInterceptor:
        """Ask before ``name`` runs. ``policy``: an :class:`~intermission.ApprovalPolicy`
        (who may decide, how many, deadlines), or — as before — a function
        ``policy(trace, args)`` returning a reason to ask (None: run without asking);
        ``when``: that function, next to an ApprovalPolicy. Without one it always asks.
        ``notify_args``: which arguments notifications about the call show — all (True),
        none (False) or the named ones (``["env"]``); secrets are redacted in any case."""
        _check.text("name", name, empty=False)
        ask, rules = _split(policy, when)
        _check.number("deadline_ms", deadline_ms, 0, 1e13, optional=True)
        self._policies[name] = _Asks(ask, deadline_ms, rules, _notify_args(notify_args))
        self._last = name
        return self

    def on_destructive(
        self,
        policy: ApprovalPolicy | Policy | None = None,
        *,
        deadline_ms: float | None = None,
        when: Policy | None = None,
        notify_args: bool | Iterable[str] = True,
    ) -> HITLInterceptor:
        """Ask before every tool that may change the world (R46): an MCP tool unless it
        says it only reads (``readOnlyHint``) or is not destructive (``destructiveHint:
        false`` — unset counts as destructive, as the MCP spec's defaults say), and a
        Python tool marked ``@tool(destructive=True)``. ``on_tool(name)`` for a tool takes
        precedence over this. "Destructive" is read from the tool the running agent
        instance holds (R49), never from another agent's tool of the same name.
        ``policy``, ``when`` and ``notify_args``: as for :meth:`on_tool`."""
        ask, rules = _split(policy, when)
        _check.number("deadline_ms", deadline_ms, 0, 1e13, optional=True)
        self._policies[_DESTRUCTIVE] = _Asks(ask, deadline_ms, rules, _notify_args(notify_args))
        self._last = _DESTRUCTIVE
        return self

    def approvers(self, allowed: Iterable[str] | ApproverPolicy) -> HITLInterceptor:
        """Who may decide for the last ``on_tool`` or ``on_destructive`` (a set of
        reviewers or a callable, R23c)."""
        if self._last is None:
            raise UsageError("call on_tool(...) before approvers(...)")
        if callable(allowed):
            self._approvers[self._last] = allowed
            return self
        if isinstance(allowed, str) or not isinstance(allowed, Iterable):
            raise UsageError(
                "approvers takes reviewer names (a set of str) or a function of "
                f"(reviewer, task), not {shown(allowed)}"
            )
        items = list(allowed)
        if not all(isinstance(n, str) and n for n in items):
            raise UsageError(f"approvers are reviewer names (non-empty str), not {shown(allowed)}")
        names = frozenset(items)
        self._approvers[self._last] = names
        return self

    def on_approved(self, callback: Callable[[str, dict[str, Any]], Any]) -> HITLInterceptor:
        """Called with ``(tool_name, args)`` when a decision says ``always_allow()``."""
        self._on_approved = _check.function("callback", callback)
        return self

    def policy_data(self) -> Any:
        """The approval policy as JSON data (part of the agent's fingerprint): which tools
        ask (and whether destructive ones do), each policy's and approver policy's code,
        deadlines, approver names, what expiry means and each ApprovalPolicy (who may
        decide, how many, its deadlines). Reasons a policy returns and the ``on_approved``
        callback are not: they decide nothing that runs."""
        from ..agents.fingerprint import code_id

        def approvers(key: str) -> Any:
            found = self._approvers.get(key)
            if found is None:
                return None
            return code_id(found) if callable(found) else sorted(found)

        def ask(key: str, asks: _Asks) -> list[Any]:
            row = ["*destructive" if key == _DESTRUCTIVE else key, code_id(asks.when),
                   asks.deadline_ms, approvers(key)]  # fmt: skip
            if asks.policy is not None:  # (without one: the fingerprint it always had)
                row.append(asks.policy.model_dump(mode="json"))
            return row

        return {
            "on_expire": self.on_expire,
            "ask": [ask(key, asks) for key, asks in sorted(self._policies.items())],
        }

    def approver_policy(self, tool: Any) -> ApproverPolicy | None:
        """The callable approver policy this interceptor gives ``tool`` (a tool the agent
        holds), or None: the one of ``on_tool(tool.name)``, else of ``on_destructive``
        for a destructive tool (R49: read from the instance, never a table of names)."""
        name = getattr(tool, "name", None)
        if name in self._policies:
            key = name
        elif _DESTRUCTIVE in self._policies and getattr(tool, "destructive", False):
            key = _DESTRUCTIVE
        else:
            return None
        found = self._approvers.get(key)
        return found if callable(found) else None

    def _key(self, trace: ReActTrace, tool_name: str) -> str | None:
        """The policy key that asks about ``tool_name``, or None (it runs unasked)."""
        if tool_name in self._policies:
            return tool_name
        if _DESTRUCTIVE in self._policies and _destructive(trace, tool_name):
            return _DESTRUCTIVE
        return None

    def _targets(self, trace: ReActTrace, exchanges: list[ToolExchange]) -> list[HITLTask]:
        tasks = []
        now = _now(trace)
        for ex in exchanges:
            key = self._key(trace, ex.tool_name)
            if key is None:
                continue
            asks = self._policies[key]
            fallback = DESTRUCTIVE_REASON if key == _DESTRUCTIVE else DEFAULT_REASON
            reason = asks.when(trace, dict(ex.args)) if asks.when else fallback
            if reason is None:
                continue
            approvers = self._approvers.get(key)
            held = held_tool(trace.agent, trace.agent_name, ex.tool_name)
            deadline = asks.deadline_ms
            rules = asks.policy
            if rules is not None and rules.expires_after_ms is not None:
                deadline = rules.expires_after_ms  # the policy's deadline governs
            requester = getattr(trace.session, "requester", None)
            tasks.append(
                HITLTask(
                    call_uuid=ex.call_uuid,
                    tool_name=ex.tool_name,
                    args=dict(ex.args),
                    reason=reason,
                    agent=trace.agent_name,
                    created_ms=now,
                    deadline_ms=now + deadline if deadline is not None else None,
                    approvers=sorted(approvers) if isinstance(approvers, frozenset) else None,
                    approver_policy=callable(approvers),
                    on_expire=self.on_expire if deadline is not None else None,
                    args_schema=_copy(held) if held is not None else None,
                    policy=rules,
                    requester=requester if isinstance(requester, Actor) else None,
                    notify_args=asks.notify_args,
                )
            )
        return tasks

    def on_action_start(self, trace: ReActTrace, exchanges: list[ToolExchange]) -> None:
        """Suspend the batch (R19), or apply the decisions of a resumed batch (R21–R23a)."""
        session = trace.session
        state = session.hitl
        targets = self._targets(trace, exchanges)
        if not targets:
            return
        known = {t.call_uuid: t for t in state.tasks}
        # keep when a task was created (its deadline, who asked, its votes and deadline
        # steps), but judge the arguments that would run now: an approval of other
        # arguments is void (R23a)
        targets = [_kept(t, k) if (k := known.get(t.call_uuid)) is not None else t
                   for t in targets]  # fmt: skip
        fresh = [t for t in targets if t.call_uuid not in known]
        if any(t.policy is not None for t in targets):
            from .timeouts import apply_task_deadlines

            state.tasks = list(targets)  # (what fell due is recorded on these)
            apply_task_deadlines(session, _now(trace), trace.emit)
            targets = list(state.tasks)
        self._expire(trace, targets)
        undecided = []
        for task in targets:
            record = state.decisions.get(task.call_uuid)
            if record is not None and record.fingerprint != fingerprint(task.args):
                del state.decisions[task.call_uuid]  # approval void: args changed (R23a)
                record = None
            if record is not None and not self._may_decide(trace, task, record):
                # defense in depth (R23c): a decision recorded without the agent's policy
                # at hand (an old snapshot, a hand-edited row) is void, never applied
                del state.decisions[task.call_uuid]
                record = None
            if record is None:
                undecided.append(task)
        if undecided:
            self._suspend(trace, targets, undecided)
            for task in fresh:
                if task.policy is not None or task.requester is not None:
                    _opened(session, task)
            return
        by_uuid = {ex.call_uuid: ex for ex in exchanges}
        single = len(targets) == 1
        for task in targets:
            record = state.decisions[task.call_uuid].model_copy(update={"applied": True})
            ex = by_uuid[task.call_uuid]
            if record.verdict == "approve" and record.modified_args:
                ex.args.update(record.modified_args)
            trace.emit(
                HITLDecidedEvent,
                call_uuid=task.call_uuid,
                tool_name=task.tool_name,
                args=dict(ex.args),
                decision=record.model_copy(deep=True),
            )
            if record.verdict == "approve":
                ex.note = record.comment
                ex.meta["approved"] = True  # a person's approval: run once (see _invoke)
                # which approval authorised it: recorded with the effect's start, its policy
                # judges who may resolve or forget the effect if its outcome is unknown (R60)
                ex.meta["approval"] = EffectApproval.of(task, record)
                if record.always_allow and self._on_approved is not None:
                    self._on_approved(task.tool_name, dict(ex.args))
            elif record.verdict == "skip":
                ex.result = record.comment or SKIP_TEXT
            elif single:
                trace.set_final_answer(record.comment or REJECT_TEXT, abnormal=True)
            else:
                ex.result = "Rejected by the reviewer" + (
                    f": {record.comment}" if record.comment else "."
                )
        state.tasks.clear()
        state.decisions.clear()
        state.agent = None

    def _may_decide(self, trace: ReActTrace, task: HITLTask, record: DecisionRecord) -> bool:
        """True when ``record``'s reviewer may decide ``task`` by this running instance's
        approvers and approval policy (a rejection or a timeout the deadline recorded
        always stands)."""
        if record.reviewer == DEADLINE_REVIEWER or record.timed_out:
            return True
        key = self._key(trace, task.tool_name)
        rules = self._policies[key].policy if key is not None else None
        if rules is not None:
            from .policy import satisfied, vote_of

            votes = list(record.votes) or [vote_of(record.actor, record.verdict, record.time_ms)]
            if not satisfied(rules, votes, task.requester):
                return False
        allowed = self._approvers.get(key) if key is not None else None
        if allowed is None:
            return True
        if callable(allowed):
            return bool(allowed(record.reviewer, task))
        return record.reviewer in allowed

    def _expire(self, trace: ReActTrace, targets: list[HITLTask]) -> None:
        state = trace.session.hitl
        now = _now(trace)
        for task in targets:
            if task.policy is not None and task.policy.expires_after_ms is not None:
                continue  # its policy's deadline steps were recorded (see timeouts)
            expired = task.deadline_ms is not None and now >= task.deadline_ms
            if not expired or task.call_uuid in state.decisions:
                continue
            if task.call_uuid not in state.expired:
                state.expired.append(task.call_uuid)
                trace.emit(
                    HITLExpiredEvent,
                    call_uuid=task.call_uuid,
                    tool_name=task.tool_name,
                    resolution=self.on_expire,
                )
            if self.on_expire == "reject":
                state.decisions[task.call_uuid] = DecisionRecord(
                    call_uuid=task.call_uuid,
                    tool_name=task.tool_name,
                    verdict="reject",
                    comment="Rejected: the approval deadline passed.",
                    reviewer=DEADLINE_REVIEWER,
                    time_ms=now,
                    fingerprint=task.fingerprint,
                )
                # on the trail as any expiry (verify_audit asks a record of each decision);
                # listeners were told by the HITLExpiredEvent above, not twice
                with listeners.muted():
                    note(trace.session, AuditEntry(
                        action="task.expired", via="system", target=task.call_uuid,
                        detail={"tool": task.tool_name, "resolution": "reject",
                                "deadline_ms": task.deadline_ms},
                    ))  # fmt: skip

    def _suspend(
        self, trace: ReActTrace, targets: list[HITLTask], undecided: list[HITLTask]
    ) -> None:
        session = trace.session
        state = session.hitl
        state.agent = trace.agent_name
        state.tasks = list(targets)
        summary = (
            (undecided[0].reason or DEFAULT_REASON)
            if len(undecided) == 1
            else f"{len(undecided)} operations await human confirmation"
        )
        session.pending(True, summary)
        trace.final_answer = summary
        trace.abnormal = True
        trace.route = "action"  # resume replays the same calls, no model call (R22)
        # the event gets copies: what a reader does to it never reaches the session (R42);
        # without the argument schemas, which the session's tasks keep (the log stays lean)
        tasks = [t.model_copy(update={"args_schema": None}).model_copy(deep=True)
                 for t in undecided]  # fmt: skip
        trace.emit(HITLPendingEvent, tasks=tasks, reason=summary)


def _kept(task: HITLTask, known: HITLTask) -> HITLTask:
    """``task`` as proposed now, with what the stored one recorded since it was asked."""
    return task.model_copy(update={
        "created_ms": known.created_ms, "deadline_ms": known.deadline_ms,
        "requester": known.requester, "votes": known.votes,
        "escalated_ms": known.escalated_ms, "warned_ms": known.warned_ms,
    })  # fmt: skip


def _opened(session: Any, task: HITLTask) -> None:
    """The audit entry of a task that asks under a policy: who asked, and by what rules."""
    who = task.requester
    detail: dict[str, Any] = {"tool": task.tool_name}
    if task.policy is not None:
        detail["policy"] = task.policy.model_dump(mode="json")
    if task.deadline_ms is not None:
        detail["deadline_ms"] = task.deadline_ms
    note(session, AuditEntry(
        action="task.opened", actor=who.name if who else None,
        roles=list(who.roles) if who else [], via=who.via if who else None,
        authenticated=bool(who and who.authenticated), target=task.call_uuid,
        reason=task.reason, detail=detail,
    ))  # fmt: skip


def _destructive(trace: ReActTrace, tool_name: str) -> bool:
    """True when ``tool_name`` is a tool this agent instance holds marked destructive
    (R49: never a table of names another agent could overwrite). A name no tool of the
    agent has is not: it fails as an unknown tool without running anything."""
    found = held_tool(trace.agent, trace.agent_name, tool_name)
    return bool(found is not None and getattr(found, "destructive", False))


_SCHEMAS: weakref.WeakKeyDictionary[Any, tuple[int, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)
"""Tool → a copy of its schema that tasks share (copied once per tool, not per task; a
task's schema is never changed in place, and HITL hands out copies)."""


def _copy(tool: Any) -> dict[str, Any]:
    """The tool's argument schema for a task (a copy: the tool keeps its own)."""
    import copy

    schema = tool.parameters
    kept = _SCHEMAS.get(tool)
    if kept is None or kept[0] != id(schema):  # (parameters replaced: copy again)
        kept = _SCHEMAS[tool] = (id(schema), copy.deepcopy(schema))
    return kept[1]


def _now(trace: ReActTrace) -> float:
    """Deadline time: the session's clock, never the agent's ``.clock(...)`` (that one
    stamps events). One clock stamps a deadline, judges a decision (HITL.submit) and
    expires the task at resume, so a task refused as late is always rejected by the next
    resume, whatever clock the agent carries."""
    return float(trace.session.clock.now_ms())
