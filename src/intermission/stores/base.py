"""The store contract every backend implements, and the pieces they share (R29–R31).

A store keeps one row per session: the canonical snapshot JSON (its event log apart, in
chunks a save appends to and a load leaves unparsed until read), a version for
compare-and-set, the status (indexed, so listing pending sessions is one indexed query),
a claim (who is resuming it, until when) and the idempotency ledger, whose entries are
written the moment they change so a crash between ``started`` and ``completed`` stays
visible.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Literal, Protocol, runtime_checkable

from ..audit import AuditEntry, AuditRecord, AuditVerification
from ..core.history import Checkpoint
from ..core.ledger import LedgerEntry
from ..core.session import InMemoryAgentSession
from ..errors import (
    ConflictError,
    LeaseLostError,
    NothingToResumeError,
    SessionBusyError,
    StoreError,
    UsageError,
)
from .lease import Leases
from .listings import (
    PendingPage,
    PendingSession,
    StuckSession,
    UnreadableSession,
    VersionCount,
    version_filter,
)
from .rows import StoredRow, row_of
from .told import telling

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
    "VersionCount",
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


_CLAIMANT: tuple[int, str] | None = None


def claim_token() -> str:
    """Who claims: host, process and a random part (distinct per claim)."""
    global _CLAIMANT
    pid = os.getpid()
    if _CLAIMANT is None or _CLAIMANT[0] != pid:  # computed once per process (and fork)
        _CLAIMANT = (pid, f"{socket.gethostname()}:{pid}:")
    return _CLAIMANT[1] + os.urandom(4).hex()


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


def check_page(
    limit: Any, agent: Any, before: Any, version: Any = None
) -> tuple[str | None, str | None]:
    """The arguments of ``pending()``; returns the ``(agent, version)`` it filters by (see
    :func:`~intermission.stores.listings.version_filter`)."""
    from .. import _check
    from ..limits import MAX_PAGE

    _check.count("limit", limit, 1, MAX_PAGE)
    _check.text("agent", agent, optional=True)
    if before is not None and not isinstance(before, PendingSession):
        raise UsageError(f"before is an entry of pending(), not {type(before).__name__}")
    return version_filter(version, agent)


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


def save_ahead(store: SessionStore, session: InMemoryAgentSession) -> int:
    """Save ``session`` so that it is durable before any effect of it starts, letting the
    store skip waiting for this commit's own flush where it can (``store.save_ahead``): a
    SQL store commits it at once, visible to everyone, and the flushed commit that starts
    an effect — or the flushed save that ends the resume — flushes it too, since a
    database flushes its log in order. A crash of the database before then loses only
    what nobody was told of and nothing acted on: a save that starts an effect or writes
    a notification (sent as soon as it is visible) is flushed. Other stores save as
    usual."""
    ahead = getattr(store, "save_ahead", None)
    return int(ahead(session)) if callable(ahead) else store.save(session)


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
            with telling(session, lost=(ConflictError, SessionBusyError)):
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
    - ``pending(limit, agent, before, version)``: pending sessions, newest first by when
      they became pending (saves while a session stays pending keep its place), one indexed
      query; page with ``before=page.last``. Returns a :class:`PendingPage`: rows that
      cannot be read are left out and reported in ``page.unreadable`` (id and why).
      ``version="ops@2"``: only those paused under version ``2`` of agent ``ops``
      (``"2"``: of any agent, or of ``agent``).
    - ``versions()`` (the bundled stores): the pending sessions per agent name and version,
      with when the oldest paused (:class:`VersionCount`), one grouped query.
    - ``clock``: the store's clock. It stamps and judges claims, leases and saves, and every
      session loaded or claimed from the store carries it (``session.clock``), so decision
      deadlines are judged alike in every process: PostgreSQL's own clock, the local one
      for SQLite and memory, or the clock a test gives the store.
    - ``stuck(limit)`` (the bundled stores): sessions with an effect of unknown outcome
      that nobody holds, for a person to resolve (:class:`StuckSession`).
    - ``recent(limit)`` (the bundled stores): the ids of the sessions saved last, newest
      first (the console's recently decided approvals are read from these).
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
        self,
        limit: int = 50,
        agent: str | None = None,
        before: PendingSession | None = None,
        *,
        version: str | None = None,
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
