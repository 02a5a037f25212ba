"""The store contract every backend implements, and the pieces they share (R29–R31).

A store keeps one row per session: the canonical snapshot JSON (its event log apart, in
chunks a save appends to and a load leaves unparsed until read), a version for
compare-and-set, the status (indexed, so listing pending sessions is one indexed query),
a claim (who is resuming it, until when) and the idempotency ledger, whose entries are
written the moment they change so a crash between ``started`` and ``completed`` stays
visible.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, Protocol, runtime_checkable

from .._json import canonical_dumps
from ..audit import AuditEntry, AuditRecord, AuditVerification
from ..core.history import Checkpoint
from ..core.ledger import LedgerEntry
from ..core.session import InMemoryAgentSession
from ..core.snapshot import restore_stored, state_json
from ..decisions import HITLTask
from ..errors import (
    ConflictError,
    LeaseLostError,
    NothingToResumeError,
    SessionBusyError,
    StoreError,
    UsageError,
)
from ..hitl.graph import ApprovalKeys, approval_deadline
from .lease import Leases

__all__ = [
    "DEFAULT_LEASE_MS",
    "RESUMABLE",
    "StoreMethods",
    "PendingSession",
    "SessionStore",
    "StoredRow",
    "claim_token",
    "claimed",
    "row_of",
]

DEFAULT_LEASE_MS = 5 * 60 * 1000.0
"""How long a claim holds when its owner dies without releasing it (SIGKILL, power loss);
a live owner renews it (see :mod:`intermission.stores.lease`)."""

RESUMABLE = ("pending", "paused", "failed")
"""Statuses ``store.resume()`` accepts: parked for a human, stopped by a step budget or an
interrupt, or stopped by an error (say, an effect of unknown outcome). A ``done`` (or
never run) session has nothing to resume: ``store.claim()`` takes it for a new prompt."""


_Row = tuple[str, str | None, str | None, str, float | None, float, str, str | None]


class PendingSession(_Row):
    """One entry of ``store.pending()``. Tasks and request are parsed when first read, so
    listing a page costs what the indexed query costs. A tuple of the stored columns
    underneath: a page of rows becomes a page of entries without a call per field."""

    def __new__(
        cls,
        session_id: str,
        agent: str | None,
        reason: str | None,
        tasks_json: str = "[]",
        deadline_ms: float | None = None,
        updated_ms: float = 0.0,
        request_json: str = "null",
        progress: str | None = None,
    ) -> PendingSession:
        """An entry from its columns (stores build them with :meth:`from_rows`)."""
        row = (session_id, agent, reason, tasks_json, deadline_ms, updated_ms, request_json,
               progress)  # fmt: skip
        return tuple.__new__(cls, row)

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[Any]]) -> list[PendingSession]:
        """Entries from stored rows ``(id, agent, reason, tasks, deadline, updated, request,
        progress)``."""
        return list(map(partial(tuple.__new__, cls), rows))

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self[0]

    @property
    def agent(self) -> str | None:
        """The agent (or graph) the session belongs to."""
        return self[1]

    @property
    def reason(self) -> str | None:
        """Why it waits (the reason given to ``pending``)."""
        return self[2]

    @property
    def deadline_ms(self) -> float | None:
        """The earliest task deadline, if any."""
        return self[4]

    @property
    def updated_ms(self) -> float:
        """When it was last saved."""
        return self[5]

    @property
    def progress(self) -> str | None:
        """What its approvals with a policy have and still need, in words (None: it has
        none), e.g. ``deploy: 1 of 2 approvals (alice, sre) — waiting for one more from
        sre``."""
        return self[7] if len(self) > 7 else None

    @property
    def tasks(self) -> list[HITLTask]:
        """The undecided tool calls (empty for graph approvals)."""
        cache = self.__dict__
        tasks: list[HITLTask] | None = cache.get("tasks")
        if tasks is None:
            tasks = cache["tasks"] = [
                HITLTask.model_validate(t) for t in json.loads(self[3] or "[]")
            ]
        return tasks

    @property
    def request(self) -> Any:
        """What the human is asked to review (``approval.request`` of graph approvals)."""
        cache = self.__dict__
        if "request" not in cache:
            cache["request"] = json.loads(self[6]) if self[6] else None
        return cache["request"]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PendingSession) and (self[0], self[5]) == (other[0], other[5])

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self[0], self[5]))

    def __repr__(self) -> str:
        return f"PendingSession({self[0]!r}, agent={self[1]!r}, reason={self[2]!r})"


_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class StoredRow:
    """The indexed columns derived from a snapshot."""

    session_id: str
    status: str
    agent: str | None
    reason: str | None
    tasks_json: str
    deadline_ms: float | None
    request_json: str
    state_json: str
    """The canonical snapshot without its event log (stores keep the log apart)."""
    due_ms: float | None = None
    """When the next deadline step of an approval with a policy falls due (the sweeper's
    index; None: nothing scheduled)."""
    progress: str | None = None
    """Where its approvals with a policy stand (see PendingSession.progress)."""


def column_text(text: str | None) -> str | None:
    """A display copy of free text for a listing column: NUL and lone surrogates, which
    no database keeps in a text column, written as escapes (the snapshot keeps the exact
    text; the same on every store)."""
    if text is None or (text.isascii() and "\x00" not in text):
        return text
    return "".join(
        f"\\u{ord(c):04x}" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in text
    )


def row_of(session: InMemoryAgentSession) -> StoredRow:
    """The row of a session: its canonical snapshot text and the indexed columns."""
    hitl = session.hitl
    tasks = [t for t in hitl.tasks if t.call_uuid not in hitl.decisions]
    deadlines = [d for t in tasks if (d := _deadline_of(t)) is not None]
    if not hitl.tasks and session.is_pending:  # a graph approval's own deadline (R23b)
        graph_deadline = (
            approval_deadline(session) if hitl.approval_keys is None else _graph_deadline(session)
        )
        deadlines += [graph_deadline] if graph_deadline is not None else []
    request = session.context.get("approval.request")
    due, progress = _policy_columns(session)
    return StoredRow(
        session_id=session.session_id,
        status=session.status,
        agent=column_text(session.agent),
        reason=column_text(session.pending_reason),
        tasks_json=canonical_dumps([t.model_dump(mode="json") for t in tasks]) if tasks else "[]",
        deadline_ms=min(deadlines) if deadlines else None,
        request_json=canonical_dumps(request) if request is not None else "null",
        state_json=state_json(session),
        due_ms=due,
        progress=progress,
    )


def _deadline_of(task: HITLTask) -> float | None:
    """A task's deadline as listings show it: for a policy's, its last (an escalation
    keeps it open past the first)."""
    if task.policy is not None and task.policy.expires_after_ms is not None:
        return task.decide_by_ms
    return task.deadline_ms


def _graph_deadline(session: InMemoryAgentSession) -> float | None:
    from ..hitl.graph import binding_deadline, keys_of

    try:
        return binding_deadline(session, keys_of(session.hitl.approval_keys) or ApprovalKeys())
    except UsageError:  # (a hand-edited policy key): listed without a deadline
        return None


def _policy_columns(session: InMemoryAgentSession) -> tuple[float | None, str | None]:
    """``due_ms`` and ``progress`` of a session's approvals with a policy (None, None for
    one without: a scan of its tasks)."""
    hitl = session.hitl
    if hitl.approval_keys is None and all(t.policy is None for t in hitl.tasks):
        return None, None
    from ..hitl.timeouts import due_ms, progress_of

    parts = []
    if session.is_pending:
        for task in hitl.tasks:
            if task.policy is not None and task.call_uuid not in hitl.decisions:
                found = progress_of(session, task.call_uuid)
                if found is not None:
                    parts.append(f"{task.tool_name}: {found.text}")
        if not hitl.tasks:
            found = progress_of(session)
            if found is not None and session.context.get(found.target) is None:
                parts.append(found.text)
    return due_ms(session), column_text("; ".join(parts)) if parts else None


_CLAIMANT: tuple[int, str] | None = None


def claim_token() -> str:
    """Who claims: host, process and a random part (distinct per claim)."""
    global _CLAIMANT
    pid = os.getpid()
    if _CLAIMANT is None or _CLAIMANT[0] != pid:  # computed once per process (and fork)
        _CLAIMANT = (pid, f"{socket.gethostname()}:{pid}:")
    return _CLAIMANT[1] + os.urandom(4).hex()


def pending_of(
    session_id: str,
    agent: str | None,
    reason: str | None,
    tasks_json: str,
    deadline: float | None,
    updated: float,
    request_json: str,
    progress: str | None = None,
) -> PendingSession:
    """Build a PendingSession from stored columns (nothing parsed yet)."""
    return PendingSession(
        session_id, agent, reason, tasks_json, deadline, updated, request_json, progress
    )


def session_from(
    state: str,
    chunks: Sequence[tuple[int, str]],
    version: int,
    ledger: dict[str, LedgerEntry],
) -> InMemoryAgentSession:
    """Rebuild a session from its row and its event chunks (see restore_stored); ledger
    rows (written live) win over the snapshot's."""
    session = InMemoryAgentSession.__new__(InMemoryAgentSession)
    restore_stored(session, state, chunks)
    session.ledger.update(ledger)
    session.ledger_dirty = set()  # what the store holds is not for it to write again
    session.store_version = version
    return session


def ledger_text(entry: LedgerEntry) -> str:
    """How a store keeps a ledger entry (canonical JSON: lone surrogates escaped)."""
    return canonical_dumps(entry.model_dump(mode="json"))


def ledger_of(text: str) -> LedgerEntry:
    """A stored ledger entry (json.loads reads escaped lone surrogates; pydantic's JSON
    parser refuses them)."""
    return LedgerEntry.model_validate(json.loads(text))


class _Claimable(Protocol):
    leases: Leases

    def _take(self, session_id: str, token: str, resumable_only: bool) -> InMemoryAgentSession:
        """Claim and load, or raise SessionNotFound / NothingToResume / SessionBusy."""
        ...

    def _release(self, session_id: str, token: str) -> None:
        """Clear the claim if ``token`` still holds it."""
        ...

    def _final_save(self, session: InMemoryAgentSession) -> None:
        """Save and release; ConflictError / SessionBusyError when the claim was lost."""
        ...

    def _holder(self, session_id: str) -> str | None:
        """Who claims the session now."""
        ...


def check_id(session_id: Any) -> str:
    """A session id argument (typed error before any query)."""
    from ..core.session import check_session_id

    check_session_id(session_id)
    return str(session_id)


def check_saved(session: Any) -> InMemoryAgentSession:
    """A session argument of ``save``."""
    if not isinstance(session, InMemoryAgentSession):
        kind = type(session).__name__
        raise UsageError(f"save takes a session (InMemoryAgentSession), not {kind}")
    return session


def check_page(limit: Any, agent: Any, before: Any) -> None:
    """The arguments of ``pending()``."""
    from .. import _check
    from ..limits import MAX_PAGE

    _check.count("limit", limit, 1, MAX_PAGE)
    _check.text("agent", agent, optional=True)
    if before is not None and not isinstance(before, PendingSession):
        raise UsageError(f"before is an entry of pending(), not {type(before).__name__}")


def check_options(lease_ms: Any, **flags: Any) -> None:
    """Store constructor options."""
    from .. import _check

    _check.number("lease_ms", lease_ms, 1, 1e10)
    for name, value in flags.items():
        if name == "outage_s":
            _check.number(name, value, 0, 3600)
        else:
            _check.flag(name, value)


class StoreMethods:
    """What every store builds on its own load/save and claim primitives (``_take``,
    ``_release``, ``_final_save``): claims (R30, R40), history and forks (R43, R44)."""

    # -- claims (R30, R40) -------------------------------------------------------------
    def resume(self, session_id: str) -> AbstractContextManager[InMemoryAgentSession]:
        """Claim, load, yield; save and release on success, release only on error.
        Refuses a session with nothing to resume (NothingToResumeError) before claiming."""
        return claimed(self, check_id(session_id), resumable_only=True)  # type: ignore[arg-type]

    def claim(self, session_id: str) -> AbstractContextManager[InMemoryAgentSession]:
        """Like :meth:`resume` for a session in any status (a new prompt on a done one)."""
        return claimed(self, check_id(session_id), resumable_only=False)  # type: ignore[arg-type]

    def load(self, session_id: str) -> InMemoryAgentSession:
        """Provided by the store."""
        raise NotImplementedError

    def save(self, session: InMemoryAgentSession) -> int:
        """Provided by the store."""
        raise NotImplementedError

    def history(self, session_id: str) -> list[Checkpoint]:
        """The checkpoints of a stored session, oldest first."""
        return self.load(session_id).history

    def fork(
        self,
        session_id: str,
        new_session_id: str,
        at: int | Checkpoint | None = None,
        *,
        effects: Literal["shared", "dry-run", "separate"] = "shared",
    ) -> InMemoryAgentSession:
        """Fork a stored session at a checkpoint (see ``InMemoryAgentSession.fork``) and
        save the fork; returns it, ready to change and resume. Its family shares the ledger
        (``effects="shared"``): an effect runs at most once across them. A fork of a
        dry-run preview is a preview too (R48)."""
        fork = self.load(session_id).fork(new_session_id, at, effects=effects)
        self.save(fork)
        return fork


def not_resumable(session_id: str, status: str) -> NothingToResumeError:
    """The error for ``store.resume()`` of a session whose status has nothing to resume."""
    return NothingToResumeError(
        f"session {session_id!r} is {status}: there is nothing to resume (someone else "
        "may have resumed it already); nothing was claimed. To send a new prompt, use "
        "store.claim(session_id)",
        session_id=session_id,
    )


@contextmanager
def claimed(
    store: _Claimable, session_id: str, *, resumable_only: bool
) -> Iterator[InMemoryAgentSession]:
    """Claim, load, yield; save and release on a clean exit; release only on an error.

    The claim is a lease, renewed while the block runs. A holder whose lease lapsed and
    was taken over cannot save: it gets LeaseLostError saying what ran meanwhile."""
    token = claim_token()
    session = store._take(session_id, token, resumable_only)
    lease = store.leases.hold(session_id, token)
    session.claim_token = token
    first_seq = session.events.next_seq
    ledger_before = dict(session.ledger)
    try:
        yield session
        try:
            store._final_save(session)
        except (ConflictError, SessionBusyError) as exc:
            ran = what_ran(session, first_seq, ledger_before)
            raise LeaseLostError(session_id, store._holder(session_id), ran) from exc
    except BaseException:
        store.leases.release(lease)
        try:
            store._release(session_id, token)
        except StoreError:
            pass  # the database is away: the claim lapses on its own when the lease ends
        raise
    finally:
        session.claim_token = None
    store.leases.release(lease)


def what_ran(
    session: InMemoryAgentSession, first_seq: int, ledger_before: dict[str, LedgerEntry]
) -> list[str]:
    """Effects and tool calls of this resume (for LeaseLostError: the truth of what ran)."""
    ran = [
        f"effect {key!r} {entry.status}"
        for key, entry in sorted(session.ledger.items())
        if ledger_before.get(key) != entry
    ]
    ran += [
        f"tool {e.tool_name} (call {e.call_uuid})"
        for e in session.events
        if e.kind == "tool_call_end" and e.seq >= first_seq
    ]
    return ran


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions wait while nobody works on them.

    - ``save(session)``: insert, or update when the stored version is the one the session was
      loaded at and the stored session is of its generation (ledger family: not one saved
      anew under the id after a delete); otherwise :class:`~intermission.ConflictError`
      (``replaced`` for another generation). ``put_snapshot`` likewise. Refused
      with :class:`~intermission.SessionBusyError` while someone else holds a claim.
    - ``load(session_id)``: the session, or :class:`~intermission.SessionNotFoundError`.
    - ``delete(session_id)``: remove the session and its ledger.
    - ``pending(limit, agent, before)``: pending sessions, newest first, one indexed query;
      page with ``before=<last item>``.
    - ``resume(session_id)``: claim, load, yield, save and release atomically on a clean
      exit; release without saving on any error (the save's own included). A second
      resumer is refused with ``SessionBusyError`` before anything runs; a session that
      is not resumable (``done``) with ``NothingToResumeError`` before claiming. The claim
      is a lease, renewed while the block runs and fenced: a holder whose lease lapsed
      and was taken over cannot save (``LeaseLostError``).
    - ``claim(session_id)``: the same for any status (a new prompt on a finished session).

    Ledger entries of ``session.once`` are written the moment they change and only ever
    move forward (R39): no save, from any copy, turns ``completed`` or ``started`` back.
    A stale copy that passes compare-and-set (nobody saved the row since it was loaded)
    saves its other changes; its old ledger entries are not written.

    The audit trail (see :mod:`intermission.audit`): entries noted on a session are written
    in the transaction of its save (none when the save fails or is refused; they stay
    noted), ledger writes with their ``effect.*`` record, a fork's first record links to
    its parent's head; every record is numbered per session id, stamped with the store's
    clock and hash-chained. ``delete`` keeps the records and ends their chain.

    - ``append_audit(session_id, entries)``: entries that change no session (a refused
      decision), in a transaction of their own.
    - ``audit(session_id)``: the records, oldest first.
    - ``verify_audit(session_id)``: an :class:`~intermission.AuditVerification` naming the
      first broken record, if any.
    """

    def save(self, session: InMemoryAgentSession) -> int:
        """Save; returns the new version."""
        ...

    def load(self, session_id: str) -> InMemoryAgentSession:
        """Load a session."""
        ...

    def delete(self, session_id: str) -> None:
        """Delete a session."""
        ...

    def pending(
        self, limit: int = 50, agent: str | None = None, before: PendingSession | None = None
    ) -> list[PendingSession]:
        """Pending sessions, newest first."""
        ...

    def resume(self, session_id: str) -> AbstractContextManager[InMemoryAgentSession]:
        """Claim a session for resuming (see the class docstring)."""
        ...

    def claim(self, session_id: str) -> AbstractContextManager[InMemoryAgentSession]:
        """Claim a session whatever its status (see the class docstring)."""
        ...

    def history(self, session_id: str) -> list[Checkpoint]:
        """The checkpoints of a stored session (R43)."""
        ...

    def fork(
        self,
        session_id: str,
        new_session_id: str,
        at: int | Checkpoint | None = None,
        *,
        effects: Literal["shared", "dry-run", "separate"] = "shared",
    ) -> InMemoryAgentSession:
        """Fork a stored session and save the fork (R44)."""
        ...

    def put_snapshot(self, snapshot: Any) -> int:
        """Store a snapshot given as JSON text, dict or model (validated first)."""
        ...

    def append_audit(self, session_id: str, entries: Sequence[AuditEntry]) -> list[AuditRecord]:
        """Append audit entries on their own (see the class docstring)."""
        ...

    def audit(self, session_id: str) -> list[AuditRecord]:
        """A session id's audit records, oldest first."""
        ...

    def verify_audit(self, session_id: str) -> AuditVerification:
        """Check a session id's audit chain."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
