"""The session as a Temporal workflow: the workflow is the session's store.

It keeps the session in a :class:`~intermission.stores.MemoryStore` of its own, clocked by
the workflow's time, so everything a store does — versions, the effect ledger, the audit
chain, deadlines judged by the store's clock — is what it always is, and it all lives in
the workflow's history. The agent runs between pauses in the ``intermission.advance``
activity (a worker killed inside it is replaced: the activity heartbeats, see
:mod:`.activities`); a pause waits in ``workflow.wait_condition`` at no compute, with the
deadline as a durable timer.

A decision is the ``decide`` Update. Its validator applies the decision to a copy, with the
same code every store uses (``HITL.submit_all`` or ``decide_graph``, as the signed person,
judged by the agent's ``ApprovalPolicy``), and refuses it — before it enters history —
when the signature does not verify, the pause it names has ended, or the policy says no
(roles, quorum of distinct people, not the requester, a reason to reject, the deadline).
The handler then records it; a decision that completes the approval resumes the session,
and the Update returns once that resume has ended.

Determinism: the workflow runs unsandboxed (intermission's own code, which takes its time
from the session's clock — here ``workflow.now()`` — and starts no thread). Nothing it
holds in memory outside the store reaches a command.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError

from ..audit import AuditEntry, note
from ..core import listeners
from ..core.session import InMemoryAgentSession
from ..errors import IntermissionError
from ..stores.memory import MemoryStore
from ..stores.rows import row_of
from . import registry
from .wire import Advance, Advanced, Decided, Decision, Refusal, Start, State, verified

__all__ = ["PENDING", "SEARCH_ATTRIBUTES", "SessionWorkflow"]

PENDING = SearchAttributeKey.for_bool("IntermissionPending")
AGENT = SearchAttributeKey.for_keyword("IntermissionAgent")
SESSION = SearchAttributeKey.for_keyword("IntermissionSession")
SEARCH_ATTRIBUTES = (PENDING, AGENT, SESSION)
"""What the workflow sets, so pending approvals are found by a visibility query (the
worker registers them when it starts)."""

ADVANCE_HEARTBEAT = timedelta(seconds=10)
"""A worker that stops heartbeating for this long is taken for dead and the run goes to
another worker (the activity heartbeats every second)."""


class _WorkflowClock:
    """The store's clock: the workflow's time (the same on replay)."""

    def now_ms(self) -> float:
        return workflow.now().timestamp() * 1000.0


@workflow.defn(name="intermission.session", sandboxed=False)
class SessionWorkflow:
    """One session: runs it, waits at its pauses, takes decisions as Updates."""

    @workflow.init
    def __init__(self, start: Start) -> None:
        self._sid = start.session_id
        self._agent = start.agent
        queue = workflow.info().task_queue
        self._store = MemoryStore(
            clock=_WorkflowClock(), heartbeat=False, audit_key=registry.audit_key(queue)
        )
        self._seen_refusals: set[str] = set()
        self._pause = 0
        """How many pauses so far; a decision names the one it decides."""
        self._applied = 0
        """The last pause whose resume has ended."""
        self._go = False
        self._resuming = False
        self._status = "new"
        self._answer: str | None = None
        self._pending_since: float | None = None
        self._checked: tuple[Decision, InMemoryAgentSession, int, int] | None = None

    @workflow.run
    async def run(self, start: Start) -> Decided:
        """Run the session to its end, pausing as often as it pauses."""
        from .store import workflow_id

        queue = workflow.info().task_queue
        if not verified(start, registry.key(queue)):
            raise ApplicationError(
                "the start is not signed with this worker's key: who asked cannot be told",
                type="UsageError", non_retryable=True,
            )  # fmt: skip
        started_ms = workflow.info().start_time.timestamp() * 1000.0
        if start.not_after_ms is None or started_ms > start.not_after_ms:
            raise ApplicationError(  # (a signed start read out of a history, sent again)
                "the start is stale: a signed start is good for one start, within minutes",
                type="UsageError", non_retryable=True,
            )  # fmt: skip
        if workflow.info().workflow_id != workflow_id(start.session_id):
            raise ApplicationError(  # (a decision is bound to the session's own workflow)
                f"session {start.session_id!r} runs as workflow {workflow_id(start.session_id)!r}",
                type="UsageError", non_retryable=True,
            )  # fmt: skip
        try:
            return await self._run(start)
        except ActivityError as exc:  # the agent refused for good (see activities)
            cause = exc.cause
            self._status, self._answer = "failed", str(getattr(cause, "message", cause))
            self._resuming = False
            self._applied = self._pause
            self._publish()
            return Decided(verdict="", status="failed", answer=self._answer)

    async def _run(self, start: Start) -> Decided:
        out = await self._advance(None, start)
        while True:
            self._take(out)
            if self._status != "pending":
                break
            self._pause += 1
            self._pending_since = self._store.clock.now_ms()
            self._publish()
            deadline = row_of(self._store.load(self._sid)).deadline_ms
            timeout = None
            if deadline is not None:  # a durable timer: on_expire applies at the resume
                timeout = max(deadline - self._store.clock.now_ms(), 0.0) / 1000.0 + 0.001
            try:
                await workflow.wait_condition(lambda: self._go, timeout=timeout)
            except asyncio.TimeoutError:
                self._resuming = True
            self._go = False
            out = await self._advance(self._store.load(self._sid).to_json(), None)
            self._resuming = False
            self._applied = self._pause
        self._applied = self._pause
        self._publish()
        return Decided(verdict="", status=self._status, answer=self._answer)

    async def _advance(self, snapshot: str | None, start: Start | None) -> Advanced:
        job = Advance(
            session_id=self._sid, agent=self._agent, snapshot=snapshot, start=start,
            not_before_ms=self._store.clock.now_ms(),
        )  # fmt: skip
        result: Advanced = await workflow.execute_activity(
            "intermission.advance",
            job,
            result_type=Advanced,
            start_to_close_timeout=timedelta(hours=1),
            heartbeat_timeout=ADVANCE_HEARTBEAT,
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
        )
        return result

    def _take(self, out: Advanced) -> None:
        """Store the session as the run left it, with what it noted for the audit trail
        (the store chains it, and derives the effect records from the ledger's moves)."""
        session = InMemoryAgentSession.restore(out.snapshot)
        row = self._store.raw_row(self._sid)
        session.store_version = 0 if row is None else int(row[1])
        for entry in out.audit:
            note(session, entry)
        with _told_once():
            self._store.save(session)
        self._status, self._answer = out.status, out.answer

    def _publish(self) -> None:
        workflow.upsert_search_attributes([
            PENDING.value_set(self._status == "pending"),
            AGENT.value_set(self._agent),
            SESSION.value_set(self._sid),
        ])  # fmt: skip

    # -- decisions -----------------------------------------------------------------------
    def _apply(self, session: InMemoryAgentSession, d: Decision) -> None:
        from ..decisions import HITLDecision
        from ..hitl.api import HITL, deciding_for
        from ..hitl.deciding import deciding_as
        from ..hitl.graph import decide_graph
        from ..stores.decide import runner_for

        runner = runner_for(registry.agents(workflow.info().task_queue), session)
        with deciding_for(runner), deciding_as(d.actor):
            if session.hitl.tasks:
                calls = d.calls or [t.call_uuid for t in session.hitl.tasks]
                if d.verdict == "approve":
                    decision = HITLDecision.approve()
                else:
                    decision = HITLDecision.reject(d.reason)
                if d.comment:
                    decision = decision.comment(d.comment)
                HITL.submit_all(session, dict.fromkeys(calls, decision), agent=runner)
            else:
                verdict: Literal["APPROVE", "REJECT"] = (
                    "APPROVE" if d.verdict == "approve" else "REJECT"
                )
                decide_graph(session, verdict, reason=d.reason, comment=d.comment)

    @workflow.update(name="decide")
    async def decide(self, d: Decision) -> Decided:
        """Record a decision (checked first by :meth:`check`); returns once the resume it
        causes has ended, or at once for a vote that completes nothing."""
        from ..stores.decide import _only_votes

        checked, self._checked = self._checked, None
        if checked is not None and checked[0] == d:  # (what the validator applied, unchanged)
            session, decisions, since = checked[1], checked[2], checked[3]
        else:
            session = self._store.load(self._sid)
            decisions, since = len(session.hitl.decisions), session.events.next_seq
            self._apply(session, d)
        waiting = _only_votes(session, decisions, since)
        with _told_once():
            self._store.save(session)
        if waiting is not None:
            return Decided(verdict=d.verdict, waiting=waiting, status="pending")
        mine = self._pause
        self._go = self._resuming = True
        await workflow.wait_condition(lambda: self._applied >= mine)
        return Decided(verdict=d.verdict, status=self._status, answer=self._answer)

    @decide.validator
    def check(self, d: Decision) -> None:
        """Refuse a decision before it enters history (see the module docstring)."""
        if not verified(d, registry.key(workflow.info().task_queue)):
            workflow.logger.warning("a decision on %s not signed with this worker's key was "
                                    "refused (it names %s)", self._sid, d.actor.name)  # fmt: skip
            raise _refused(
                "DecisionRefusedError",
                "the decision is not signed by a surface "
                "that shares this worker's key: refused, whoever it names",
            )
        if d.session_id != self._sid or d.run_id != workflow.info().run_id:
            raise _refused("UsageError", f"this workflow run does not run session "
                           f"{d.session_id!r} (run {d.run_id!r})")  # fmt: skip
        if self._resuming:
            raise _refused(
                "SessionBusyError",
                f"session {self._sid!r} is being resumed: the approval this decision was "
                f"made for (pause {d.pause}) is closed",
            )
        if self._status != "pending" or d.pause != self._pause:
            raise _refused(
                "NothingToResumeError",
                f"the approval this decision was made for (pause {d.pause}) is no longer "
                f"open: session {self._sid!r} is {self._status}"
                + (f" at pause {self._pause}" if self._status == "pending" else ""),
            )
        copy = self._store.load(self._sid)
        decisions, since = len(copy.hitl.decisions), copy.events.next_seq
        try:
            with listeners.muted():
                self._apply(copy, d)
        except IntermissionError as exc:
            raise _refused(type(exc).__name__, str(exc), getattr(exc, "rule", None)) from None
        # the handler runs next, in this same workflow task, on the state this copy was
        # loaded from: it saves this copy rather than deciding twice
        self._checked = (d, copy, decisions, since)

    @workflow.signal(name="refused")
    def refused(self, *args: Any) -> None:
        """A refused decision, for the audit trail only (it changes no session). Taken as
        plain values: a signal that is not one signed Refusal is ignored — a handler that
        raised would fail every workflow task after it, and the session with it."""
        try:
            (value,) = args
            r = value if isinstance(value, Refusal) else Refusal.model_validate(value)
        except Exception:  # (whatever it is, it is not ours to keep)
            workflow.logger.warning("a malformed refusal signal on %s was ignored", self._sid)
            return
        if not isinstance(r, Refusal):
            return
        ours = r.session_id == self._sid and r.run_id == workflow.info().run_id
        if not ours or r.nonce in self._seen_refusals:
            return
        if not verified(r, registry.key(workflow.info().task_queue)):
            workflow.logger.warning("an unsigned refusal signal on %s was ignored", self._sid)
            return
        self._seen_refusals.add(r.nonce)
        self._store.append_audit(self._sid, [AuditEntry.model_validate(r.entry)])

    @workflow.query(name="state")
    def state(self) -> State:
        """The session as the workflow holds it, and its audit trail."""
        row = self._store.raw_row(self._sid)
        snapshot = None if row is None else self._store.load(self._sid).to_json()
        return State(
            snapshot=snapshot,
            run_id=workflow.info().run_id,
            version=0 if row is None else int(row[1]),
            pause=self._pause,
            now_ms=self._store.clock.now_ms(),
            updated_ms=self._store.clock.now_ms(),
            pending_since_ms=(
                self._pending_since if self._status == "pending" and not self._resuming else None
            ),
            audit_rows=list(self._store._audit.get(self._sid, ())),
        )


@contextmanager
def _told_once() -> Iterator[None]:
    """Listeners (traces, an outbox) hear a save once: never again when a worker replays
    the history to rebuild the workflow."""
    if workflow.unsafe.is_replaying():
        with listeners.muted():
            yield
    else:
        yield


def _refused(kind: str, message: str, rule: Any = None) -> ApplicationError:
    return ApplicationError(message, {"error": kind, "rule": rule}, type=kind, non_retryable=True)
