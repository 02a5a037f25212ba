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
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from .._clock import SYSTEM_CLOCK, Clock
from .._json import canonical_dumps
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
    SnapshotSchemaError,
    StoreError,
    UsageError,
    _utc,
)
from ..hitl.graph import approval_deadline
from .lease import Leases

__all__ = [
    "DEFAULT_LEASE_MS",
    "RESUMABLE",
    "PendingPage",
    "PendingSession",
    "SessionStore",
    "StoreMethods",
    "StoredRow",
    "StuckSession",
    "UnreadableSession",
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


_Row = tuple[str, str | None, str | None, str, float | None, float, str, float]


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
        pending_since: float | None = None,
    ) -> PendingSession:
        """An entry from its columns (stores build them with :meth:`from_rows`)."""
        since = updated_ms if pending_since is None else pending_since
        row = (session_id, agent, reason, tasks_json, deadline_ms, updated_ms, request_json, since)
        return tuple.__new__(cls, row)

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[Any]]) -> list[PendingSession]:
        """Entries from stored rows ``(id, agent, reason, tasks, deadline, updated, request,
        pending_since)`` (further columns are ignored)."""
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
        """When it was last saved (by the store's clock)."""
        return self[5]

    @property
    def pending_since(self) -> float:
        """When it became pending (by the store's clock); saves while it stays pending
        keep it, so pages keyed on it never skip or repeat a session that stays open."""
        return self[7]

    @property
    def tasks(self) -> list[HITLTask]:
        """The undecided tool calls (empty for graph approvals). A stored column that
        cannot be read raises SnapshotSchemaError (listings report the session as
        unreadable)."""
        cache = self.__dict__
        tasks: list[HITLTask] | None = cache.get("tasks")
        if tasks is None:
            try:
                parsed = [HITLTask.model_validate(t) for t in json.loads(self[3] or "[]")]
            except (ValueError, TypeError) as exc:  # (pydantic's ValidationError is one)
                raise _unreadable_column(self[0], "tasks", exc) from None
            tasks = cache["tasks"] = parsed
        return tasks

    @property
    def request(self) -> Any:
        """What the human is asked to review (``approval.request`` of graph approvals)."""
        cache = self.__dict__
        if "request" not in cache:
            try:
                cache["request"] = json.loads(self[6]) if self[6] else None
            except ValueError as exc:
                raise _unreadable_column(self[0], "request", exc) from None
        return cache["request"]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PendingSession) and (self[0], self[5]) == (other[0], other[5])

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self[0], self[5]))

    def __repr__(self) -> str:
        return f"PendingSession({self[0]!r}, agent={self[1]!r}, reason={self[2]!r})"


def _unreadable_column(session_id: str, column: str, exc: BaseException) -> SnapshotSchemaError:
    first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return SnapshotSchemaError(
        f"the stored {column} of session {session_id!r} cannot be read ({first}); the row "
        "was damaged or written by another program: look at it with `python -m "
        "intermission show`, or delete it",
        path=column,
    )


class UnreadableSession(NamedTuple):
    """A stored session a listing left out because its row cannot be read: ``why`` says
    what is wrong (cut short, written by a newer intermission, damaged)."""

    session_id: str
    why: str
    pending_since: float | None = None
    """Its place in ``pending()`` order (None when it is not known)."""


class PendingPage(list[PendingSession]):
    """A page of ``store.pending()``: the readable entries, newest first, and
    :attr:`unreadable`, the rows of the same range that could not be read (reported, not
    listed: one bad row never hides the others)."""

    unreadable: list[UnreadableSession]
    ids: list[str]
    """Every row of the page's range in order, readable or not (their session ids)."""

    def __init__(
        self,
        entries: Iterable[PendingSession] = (),
        unreadable: Iterable[UnreadableSession] = (),
        ids: Iterable[str] | None = None,
    ) -> None:
        super().__init__(entries)
        self.unreadable = list(unreadable)
        self.ids = [p[0] for p in self] if ids is None else list(ids)

    @property
    def last(self) -> PendingSession | None:
        """The oldest row this page covered, readable or not: ``before=page.last`` pages
        on without meeting an unreadable row twice."""
        last = self[-1] if self else None
        for u in self.unreadable:
            if u.pending_since is None:
                continue
            key = (u.pending_since, u.session_id)
            if last is None or key < (last.pending_since, last.session_id):
                last = PendingSession(u.session_id, None, None, pending_since=u.pending_since)
        return last


class StuckSession(NamedTuple):
    """A session that needs a person: an effect it started (``session.once``) never
    recorded its outcome (its process died, or the write was lost), and nobody holds the
    session's claim now (a holder that died is listed once its lease lapsed). Check the
    external system, then resolve or forget the effect
    (:func:`~intermission.stores.resolve_unknown_effect`, ``python -m intermission
    resolve|forget``, the console)."""

    session_id: str
    agent: str | None
    status: str
    key: str
    """The effect's idempotency key."""
    started_ms: float

    @property
    def why(self) -> str:
        """One line for a listing."""
        return (
            f"effect {self.key!r} started at {_utc(self.started_ms)} and its outcome was "
            "never recorded: check the external system, then resolve it (it happened) or "
            "forget it (it did not)"
        )


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


def column_text(text: str | None) -> str | None:
    """A display copy of free text for a listing column: NUL and lone surrogates, which
    no database keeps in a text column, written as escapes (the snapshot keeps the exact
    text; the same on every store)."""
    if text is None or (text.isascii() and "\x00" not in text):
        return text
    return "".join(
        f"\\u{ord(c):04x}" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in text
    )


def _tasks_json(tasks: list[Any]) -> str:
    """The listed tasks, without their argument schemas (the snapshot keeps those)."""
    if not tasks:
        return "[]"
    return canonical_dumps([t.model_dump(mode="json", exclude={"args_schema"}) for t in tasks])


def row_of(session: InMemoryAgentSession) -> StoredRow:
    """The row of a session: its canonical snapshot text and the indexed columns."""
    hitl = session.hitl
    tasks = [t for t in hitl.tasks if t.call_uuid not in hitl.decisions]
    deadlines = [t.deadline_ms for t in tasks if t.deadline_ms is not None]
    if not hitl.tasks and session.is_pending:  # a graph approval's own deadline (R23b)
        graph_deadline = approval_deadline(session)
        deadlines += [graph_deadline] if graph_deadline is not None else []
    request = session.context.get("approval.request")
    return StoredRow(
        session_id=session.session_id,
        status=session.status,
        agent=column_text(session.agent),
        reason=column_text(session.pending_reason),
        tasks_json=_tasks_json(tasks),
        deadline_ms=min(deadlines) if deadlines else None,
        request_json=canonical_dumps(request) if request is not None else "null",
        state_json=state_json(session),
    )


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
    pending_since: float | None = None,
) -> PendingSession:
    """Build a PendingSession from stored columns (nothing parsed yet)."""
    return PendingSession(
        session_id, agent, reason, tasks_json, deadline, updated, request_json, pending_since
    )


def session_from(
    state: str,
    chunks: Sequence[tuple[int, str]],
    version: int,
    ledger: dict[str, LedgerEntry],
    clock: Clock = SYSTEM_CLOCK,
) -> InMemoryAgentSession:
    """Rebuild a session from its row and its event chunks (see restore_stored); ledger
    rows (written live) win over the snapshot's. The session tells time by ``clock``, the
    store's: every process judges its deadlines alike."""
    session = InMemoryAgentSession.__new__(InMemoryAgentSession)
    restore_stored(session, state, chunks)
    session.ledger.update(ledger)
    session.ledger_dirty = set()  # what the store holds is not for it to write again
    session.store_version = version
    session.clock = clock
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

    def _release(self, session_id: str, token: str, *, wait: bool = False) -> None:
        """Clear the claim if ``token`` still holds it; ``wait``: while the database is
        away, try again for as long as a must-not-lose write would."""
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
        elif name == "outbox" and value is None:
            pass  # (the database's own setting)
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
        status=status,
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
    saving = False
    try:
        yield session
        saving = True
        try:
            store._final_save(session)
        except (ConflictError, SessionBusyError) as exc:
            ran = what_ran(session, first_seq, ledger_before)
            raise LeaseLostError(session_id, store._holder(session_id), ran) from exc
    except BaseException:
        store.leases.release(lease)
        try:
            # a save that failed (a full disk, the database away) must not leave the
            # thread busy for the whole lease once the database is back: the release
            # waits for it as long as the save did
            store._release(session_id, token, wait=saving)
        except StoreError:
            pass  # still away: the claim lapses on its own when the lease ends
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
    - ``pending(limit, agent, before)``: pending sessions, newest first by when they became
      pending (saves while a session stays pending keep its place), one indexed query; page
      with ``before=page.last``. Returns a :class:`PendingPage`: rows that cannot be read
      are left out and reported in ``page.unreadable`` (id and why).
    - ``clock``: the store's clock. It stamps and judges claims, leases and saves, and every
      session loaded or claimed from the store carries it (``session.clock``), so decision
      deadlines are judged alike in every process: PostgreSQL's own clock, the local one
      for SQLite and memory, or the clock a test gives the store.
    - ``stuck(limit)`` (the bundled stores): sessions with an effect of unknown outcome
      that nobody holds, for a person to resolve (:class:`StuckSession`).
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

    def close(self) -> None:
        """Release connections."""
        ...
