"""``open_store("temporal://HOST:PORT/NAMESPACE")``: the sessions that run as workflows,
read and decided through the calls every store answers.

The workflow is the store of its session (see :mod:`.workflow`); this is a client of
them. ``pending()`` is a visibility query on the search attributes the workflows set,
``load()``, ``audit()`` and ``verify_audit()`` read a workflow by its ``state`` query, and
``decide()`` sends the signed ``decide`` Update, whose validator judges it before it enters
history. Writes that would go round the workflow — ``save``, ``resume``, ``claim``,
``put_snapshot``, ``fork``, ``delete`` — are refused with a UsageError: on Temporal only the
workflow changes its session.

The client is asynchronous (temporalio); this store is called from synchronous code (the
CLI, a widget's click), so it keeps one event loop of its own on a daemon thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from .. import errors as _errors
from .._clock import SYSTEM_CLOCK
from ..audit import AuditEntry, AuditRecord, AuditVerification
from ..core.session import InMemoryAgentSession
from ..errors import (
    DecisionRefusedError,
    InvalidDecisionError,
    MissingDependencyError,
    SessionNotFoundError,
    StoreUnavailableError,
    UsageError,
)
from ..principals import Actor
from ..stores import audit_chain
from ..stores.base import check_page
from ..stores.listings import PendingSession, pending_of
from ..stores.rows import row_of
from .wire import Decided, Decision, Refusal, State, resolve_key, sign, signed_start

__all__ = ["DEFAULT_TASK_QUEUE", "TemporalStore", "connect", "workflow_id"]

T = TypeVar("T")

DEFAULT_TASK_QUEUE = "intermission"
QUERY_TIMEOUT_S = 10.0
"""How long a read waits for a worker to answer a workflow's ``state`` query."""


def workflow_id(session_id: str) -> str:
    """The workflow that runs a session (one per session id)."""
    return f"intermission-{session_id}"


def _target(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme != "temporal" or not parts.hostname or port == -1:
        raise UsageError(
            f"a Temporal store is temporal://HOST:PORT/NAMESPACE[?task_queue=Q], not {url!r}"
        )
    namespace = parts.path.strip("/") or "default"
    return f"{parts.hostname}:{port or 7233}", namespace


def _queue_of(url: str) -> str | None:
    """The ``task_queue`` a ``temporal://`` URL names (its sessions), if any."""
    from urllib.parse import parse_qs

    found = parse_qs(urlsplit(url).query).get("task_queue")
    return found[-1] if found else None


async def connect(url: str) -> Any:
    """A temporalio Client for ``temporal://HOST:PORT/NAMESPACE``, with the pydantic data
    converter intermission's workflows use."""
    try:
        from temporalio.client import Client
        from temporalio.contrib.pydantic import pydantic_data_converter
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise MissingDependencyError("temporalio", "temporal") from exc
    host, namespace = _target(url)
    try:
        return await Client.connect(host, namespace=namespace,
                                    data_converter=pydantic_data_converter)  # fmt: skip
    except RuntimeError as exc:
        raise StoreUnavailableError(f"Temporal at {host} did not answer: {exc}") from exc


class _Loop:
    """An event loop on a daemon thread, for calling the async client from sync code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="intermission-temporal")  # fmt: skip
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class TemporalStore:
    """Sessions running as Temporal workflows, behind the store calls (see the module
    docstring). ``target``: ``temporal://HOST:PORT/NAMESPACE[?task_queue=Q]``; ``key``: the
    decision-signing key (else ``$INTERMISSION_TEMPORAL_KEY``)."""

    decides_itself = True
    """Its sessions take decisions through :meth:`decide` (the surfaces ask for this)."""

    def __init__(
        self, target: str, *, task_queue: str | None = None, key: str | None = None
    ) -> None:
        _target(target)  # (a UsageError before any thread starts)
        self.target = target
        self.task_queue = task_queue or _queue_of(target) or DEFAULT_TASK_QUEUE
        """The queue its sessions run on (``task_queue=``, else the URL's ``?task_queue=``,
        else ``intermission``): ``start`` starts there and ``pending`` lists those only."""
        self.clock = SYSTEM_CLOCK
        self._key = resolve_key(key)
        self._loop = _Loop()
        try:
            self.client = self._loop.run(connect(target))
        except BaseException:
            self._loop.close()
            raise

    # -- starting ------------------------------------------------------------------------
    def start(
        self, agent: str, prompt: str, session_id: str, *, principal: Actor | None = None
    ) -> str:
        """Start ``agent`` on a new session as a workflow; returns the workflow id."""
        from temporalio.common import WorkflowIDReusePolicy

        from .wire import Start

        start = signed_start(Start(session_id=session_id, agent=agent, prompt=prompt,
                                   requester=principal), self._key)  # fmt: skip
        handle = self._loop.run(self.client.start_workflow(
            "intermission.session", start, id=workflow_id(session_id),
            task_queue=self.task_queue, id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        ))  # fmt: skip
        return str(handle.id)

    def result(self, session_id: str) -> Decided:
        """Wait for the session's workflow to end; what it ended with."""
        handle = self.client.get_workflow_handle(workflow_id(session_id), result_type=Decided)
        result: Decided = self._loop.run(handle.result())
        return result

    # -- reading ---------------------------------------------------------------------------
    def _state(self, session_id: str) -> State:
        from temporalio.service import RPCError

        handle = self.client.get_workflow_handle(workflow_id(session_id))
        try:
            state: State = self._loop.run(handle.query(
                "state", result_type=State, rpc_timeout=timedelta(seconds=QUERY_TIMEOUT_S)
            ))  # fmt: skip
        except RPCError as exc:
            if "not found" in str(exc).lower():
                raise SessionNotFoundError(session_id) from exc
            raise StoreUnavailableError(f"Temporal could not read {session_id!r}: {exc}") from exc
        return state

    def load(self, session_id: str) -> InMemoryAgentSession:
        """The session as its workflow holds it now."""
        state = self._state(session_id)
        if state.snapshot is None:
            raise SessionNotFoundError(session_id)
        session = InMemoryAgentSession.restore(state.snapshot)
        session.store_version = state.version
        session.clock = self.clock
        return session

    def pending(
        self,
        limit: int = 50,
        agent: str | None = None,
        before: PendingSession | None = None,
        *,
        version: str | None = None,
    ) -> list[PendingSession]:
        """The sessions waiting for a person, newest first (a visibility query on
        ``IntermissionPending``, then each workflow's state)."""
        agent, number = check_page(limit, agent, before, version)  # (as every store checks)
        query = (
            "IntermissionPending = true AND ExecutionStatus = 'Running' AND "
            f"TaskQueue = '{_literal(self.task_queue, 'task_queue')}'"
        )
        if agent is not None:
            query += f" AND IntermissionAgent = '{_literal(agent, 'agent')}'"

        async def ids() -> list[str]:
            return [w.id async for w in self.client.list_workflows(query)]

        found = []
        for wid in self._loop.run(ids()):
            sid = wid.removeprefix("intermission-")
            try:
                state = self._state(sid)
            except (SessionNotFoundError, StoreUnavailableError):
                continue  # (one workflow that cannot answer hides no other)
            if state.snapshot is None or state.pending_since_ms is None:
                continue  # (resumed since the visibility record was written)
            s = InMemoryAgentSession.restore(state.snapshot)
            if number is not None and s.agent_version != number:
                continue
            row = row_of(s)
            found.append(pending_of(
                sid, row.agent, row.reason, row.tasks_json, row.deadline_ms, state.updated_ms,
                row.request_json, state.pending_since_ms, row.progress, row.agent_version,
            ))  # fmt: skip
        found.sort(key=lambda p: (-p.pending_since, p.session_id))
        if before is not None:
            found = [p for p in found if (p.pending_since, p.session_id) < (
                before.pending_since, before.session_id)]  # fmt: skip
        return found[:limit]

    def audit(self, session_id: str) -> list[AuditRecord]:
        """The session's audit records, kept by its workflow."""
        rows = self._state(session_id).audit_rows
        return [audit_chain.parse(session_id, tuple(r)) for r in rows]  # type: ignore[arg-type]

    def verify_audit(self, session_id: str) -> AuditVerification:
        """Check the session's audit chain as its workflow returns it."""
        rows = [tuple(r) for r in self._state(session_id).audit_rows]
        key = audit_chain.resolve_key(None)
        return audit_chain.verify(session_id, rows, lambda _p, _s: None, key)  # type: ignore[arg-type]

    # -- deciding ----------------------------------------------------------------------
    def decide(
        self,
        session_id: str,
        verdict: Literal["approve", "reject"],
        *,
        principal: Actor,
        reason: str | None = None,
        comment: str | None = None,
        calls: Sequence[str] | None = None,
        pause: int | None = None,
    ) -> Decided:
        """Decide the session's open approval as ``principal`` (the surface's authenticated
        person): one signed Update, judged by the workflow's validator before it enters
        history. Returns once the resume it causes has ended (at once for a vote a quorum
        still waits on). A refused decision raises its typed error and is written to the
        audit trail only. ``pause``: the pause the decider saw (default: the current one;
        a surface that showed an approval passes the one it showed, so a decision made on a
        stale view is refused)."""
        from temporalio.client import WorkflowUpdateFailedError
        from temporalio.service import RPCError

        from ..stores.base import not_resumable

        if verdict not in ("approve", "reject"):
            raise UsageError(f"verdict is 'approve' or 'reject', not {verdict!r}")
        if not isinstance(principal, Actor):
            raise UsageError("principal is the Actor the surface authenticated")
        state = self._state(session_id)
        if pause is None:
            pause = state.pause
        decision = sign(Decision(
            session_id=session_id, run_id=state.run_id, pause=pause, verdict=verdict,
            calls=list(calls) if calls else None, reason=reason, comment=comment,
            actor=principal,
        ), self._key)  # fmt: skip
        handle = self.client.get_workflow_handle(workflow_id(session_id))
        try:
            done: Decided = self._loop.run(
                handle.execute_update("decide", decision, result_type=Decided)
            )
        except RPCError as exc:  # the workflow ended: nothing waits for a decision
            if "completed" not in str(exc).lower() and "not found" not in str(exc).lower():
                raise StoreUnavailableError(f"Temporal refused the decision: {exc}") from exc
            if "not found" in str(exc).lower():
                raise SessionNotFoundError(session_id) from exc
            raise not_resumable(session_id, "done") from None
        except WorkflowUpdateFailedError as exc:
            refused = _typed(exc, session_id, calls, principal, verdict)
            from ..hitl.refusals import refusal_entry

            entry = refusal_entry(refused, principal, calls[0] if calls else None, verdict)
            self.append_audit(session_id, [entry])
            raise refused from None
        return done

    def append_audit(self, session_id: str, entries: Sequence[AuditEntry]) -> list[AuditRecord]:
        """Entries for the audit trail only (a refused decision), sent as signed signals."""
        import uuid

        run_id = self._state(session_id).run_id
        handle = self.client.get_workflow_handle(workflow_id(session_id), run_id=run_id)
        for entry in audit_chain.check_entries(entries):
            signal = sign(Refusal(session_id=session_id, run_id=run_id, nonce=uuid.uuid4().hex,
                                  entry=entry), self._key)  # fmt: skip
            self._loop.run(handle.signal("refused", signal))
        return []

    # -- writes that would go round the workflow ---------------------------------------
    def _refuse(self, what: str) -> UsageError:
        return UsageError(
            f"{what} is not done on a Temporal store: the workflow holds the session and "
            "changes it itself; decide with store.decide() (or the CLI's approve/reject)"
        )

    def save(self, session: InMemoryAgentSession) -> int:
        """Refused (see the module docstring)."""
        raise self._refuse("save")

    def put_snapshot(self, snapshot: Any) -> int:
        """Refused (see the module docstring)."""
        raise self._refuse("put_snapshot")

    def delete(self, session_id: str) -> None:
        """Refused (see the module docstring)."""
        raise self._refuse("delete")

    def resume(self, session_id: str) -> AbstractContextManager[InMemoryAgentSession]:
        """Refused (see the module docstring)."""
        raise self._refuse("resume")

    def claim(self, session_id: str) -> AbstractContextManager[InMemoryAgentSession]:
        """Refused (see the module docstring)."""
        raise self._refuse("claim")

    def fork(self, *args: Any, **kwargs: Any) -> InMemoryAgentSession:
        """Refused (see the module docstring)."""
        raise self._refuse("fork")

    def history(self, session_id: str) -> list[Any]:
        """The checkpoints of the session."""
        return self.load(session_id).history

    def run_forever(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` (a worker) on this store's loop; its concurrent future."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop.loop)

    def close(self) -> None:
        """Drop the client and stop its loop. The client's core (Rust) is freed on the
        loop's thread while the interpreter is whole: one freed at exit, from a thread the
        interpreter is finalizing, aborts the process."""
        client = self.__dict__.pop("client", None)
        if client is not None and not self._loop.loop.is_closed():
            import gc

            async def drop() -> None:
                nonlocal client
                client = None
                gc.collect()

            try:
                self._loop.run(drop())
            except RuntimeError:
                pass
        self._loop.close()

    def __enter__(self) -> TemporalStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[str]:  # pragma: no cover - not a mapping
        raise TypeError("a TemporalStore is not iterable")

    def __repr__(self) -> str:
        return f"<TemporalStore {self.target} queue={self.task_queue!r}>"


def _literal(value: str, what: str) -> str:
    """``value`` for a visibility query's quoted literal; one that would need escaping is
    refused (agent names and task queues are plain names)."""
    if any(c in value for c in ("'", "\\", '"', "\n", "\r", "\x00")):
        raise UsageError(
            f"{what} {value!r} holds a quote, a backslash or a control character, which no "
            "agent name or task queue of intermission holds"
        )
    return value


def _typed(
    exc: Any, session_id: str, calls: Sequence[str] | None, who: Actor, verdict: str
) -> InvalidDecisionError:
    """The typed error a validator's refusal stands for: the error class it names when that
    is a policy refusal (rule, reviewer and verdict kept), else an InvalidDecisionError
    whose ``kind`` names it."""
    cause = exc.cause
    kind = getattr(cause, "type", None) or "InvalidDecisionError"
    message = getattr(cause, "message", None) or str(exc)
    details = list(getattr(cause, "details", ()) or ())
    rule = details[0].get("rule") if details and isinstance(details[0], dict) else None
    call = calls[0] if calls else None
    found = getattr(_errors, kind, None)
    if isinstance(found, type) and issubclass(found, DecisionRefusedError):
        return found(message, rule=rule or "policy", reviewer=who.name, verdict=verdict,
                     session_id=session_id, call_uuid=call)  # fmt: skip
    error = InvalidDecisionError(message, call_uuid=call)
    error.kind = kind  # type: ignore[attr-defined]
    error.session_id = session_id  # type: ignore[attr-defined]
    return error
