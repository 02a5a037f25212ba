"""Sessions: the pending flag and everything a paused run needs to continue (R1–R6, R32)."""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

from .. import _check
from .._check import shown
from .._clock import SYSTEM_CLOCK, Clock
from .._json import check_json, check_text
from ..audit import AuditEntry, Via, by_hand, note
from ..decisions import EffectApproval, HITLState
from ..errors import (
    EffectOutcomeUnknownError,
    NotSerializableError,
    ToolUnavailableError,
    UsageError,
)
from ..limits import MAX_EVENTS, MAX_MESSAGES
from ..messages import ChatMessage
from ..principals import Actor
from . import listeners
from .agent_state import claim
from .context import GRAPH_RUNNING, FlowContext
from .events_log import EventLog
from .history import Checkpoint, History
from .ledger import (
    FORGOTTEN,
    LedgerEntry,
    advances,
    effect_audit,
    new_attempt,
    new_family,
    new_generation,
)
from .listeners import LISTENERS
from .session_status import SessionStatus

if TYPE_CHECKING:
    from ..hitl.graph import ApprovalKeys

__all__ = ["AgentSession", "InMemoryAgentSession", "LedgerHook", "SessionStatus"]

T = TypeVar("T")
S = TypeVar("S")

_LEDGER_LOCK = threading.Lock()
"""Check-then-write of in-memory ledgers (forks in threads may share one)."""

LedgerHook = Callable[[Any, str, LedgerEntry, bool, AuditEntry | None], LedgerEntry]
"""``hook(session, key, entry, force, who)`` → the entry now stored: how a store makes
ledger changes durable the moment they happen, with their audit record (``who``: the record
of a change by hand; see ``InMemoryAgentSession._ledger_put``). A store's bound method, so
a session and its store hold no reference cycle."""


def check_session_id(session_id: object) -> None:
    """A session id is a non-empty string every store can keep as a key."""
    if not isinstance(session_id, str) or not session_id:
        raise UsageError(f"a session id is a non-empty string, not {shown(session_id)}")
    check_text("session id", session_id, allow_nul=False)


def check_effect_key(key: object) -> None:
    """An idempotency key is a non-empty string every store can keep as a key."""
    if not isinstance(key, str) or not key:
        raise UsageError(f"an effect key is a non-empty string, not {shown(key)}")
    check_text("effect key", key, allow_nul=False)


@runtime_checkable
class AgentSession(Protocol):
    """What agents and graphs need from a session (the seed's ``AgentSession``)."""

    session_id: str
    context: FlowContext
    messages: list[ChatMessage]
    events: EventLog
    traces: dict[str, Any]
    hitl: HITLState
    ledger: dict[str, LedgerEntry]
    status: SessionStatus
    agent: str | None
    agent_fingerprint: str | None
    agent_version: str | None
    release: str | None
    clock: Clock

    def pending(self, pending: bool, reason: str | None = None) -> None:
        """Park (True) or release (False) the session; see R1."""
        ...

    @property
    def is_pending(self) -> bool:
        """Exactly "the context is stopped" (R2)."""
        ...

    @property
    def pending_reason(self) -> str | None:
        """Why the session is parked."""
        ...

    def add_message(self, message: ChatMessage) -> None:
        """Append to the chat history (bounded)."""
        ...

    def once(self, key: str, fn: Callable[[], T]) -> T:
        """Run an external effect once per key (R32)."""
        ...

    def agent_state(self, name: str, cls: type[S]) -> S | None:
        """The state agent ``name`` keeps in this session, as its ``cls``."""
        ...


class InMemoryAgentSession:
    """A session held in memory; persist it with :meth:`snapshot` or a store.

    Example:
        ```python
        from intermission import HITL, HITLDecision, InMemoryAgentSession
        from intermission.examples import build_ops_agent

        agent, session = build_ops_agent(), InMemoryAgentSession.of("s-1")
        agent.prompt("Please delete user 1001").session(session).call()  # pauses before the tool
        print(session.is_pending, session.pending_reason)
        #> True Sensitive operation: human confirmation required
        later = InMemoryAgentSession.restore(session.to_json())  # JSON text: keep it anywhere
        (task,) = HITL.pending_tasks(later)
        HITL.submit(later, task, HITLDecision.approve())
        print(agent.prompt().session(later).call().content, later.is_pending)
        #> Done: user 1001 deleted. False
        ```
    """

    def __init__(
        self,
        session_id: str = "tmp",
        *,
        max_messages: int = 50,
        max_events: int = 1000,
        max_checkpoints: int = 50,
        clock: Clock | None = None,
    ) -> None:
        check_session_id(session_id)
        _check.count("max_messages", max_messages, 0, MAX_MESSAGES)
        _check.count("max_events", max_events, 0, MAX_EVENTS)
        _check.count("max_checkpoints", max_checkpoints, 0, MAX_EVENTS)
        if clock is not None and not callable(getattr(clock, "now_ms", None)):
            raise UsageError(f"clock has a now_ms() method (FakeClock), not {shown(clock)}")
        self.session_id = session_id
        self.context = FlowContext(session_id)
        self.context.session = self
        self.max_messages = max_messages
        self.messages: list[ChatMessage] = []
        self.events = EventLog(max_events)
        self.traces: dict[str, Any] = {}
        """Each agent's own state (opaque here: JSON with a ``kind``, or the agent's model
        once it claimed it; see :meth:`agent_state`)."""
        self.hitl = HITLState()
        self.ledger: dict[str, LedgerEntry] = {}
        self.status: SessionStatus = "new"
        self.agent: str | None = None
        """The name of the agent that made this session (its first top-level request)."""
        self.agent_fingerprint: str | None = None
        """That agent's fingerprint (what decides its effects): another agent is refused
        with AgentMismatchError unless it adopts the session. None until an agent ran it,
        and in a session saved before fingerprints were recorded: the next agent to run
        it records its own."""
        self.agent_version: str | None = None
        """The version of that agent (``.version("2")``, else its fingerprint) the session
        runs on: a paused session resumes on this version, or is migrated on purpose (R62).
        None until an agent ran it, and in sessions saved before versions were recorded."""
        self.release: str | None = None
        """The intermission release that last ran the session (recorded at each request)."""
        self.clock: Clock = clock or SYSTEM_CLOCK
        self._reason: str | None = None
        self.requester: Actor | None = None
        """Who sent the current request (``agent.prompt(p).principal(...)``; None when it
        named nobody): recorded on the approvals it asks for."""
        self.ledger_hook: LedgerHook | None = None
        """Called on every ledger change; stores use it to make ``started`` durable."""
        self.ledger_dirty: set[str] = set()
        """Keys changed while no store was attached: the next save writes them."""
        self.store_version: int = 0
        """The version this object was loaded at (compare-and-set, R29)."""
        self.claim_token: str | None = None
        """Set while a store's ``resume()`` holds the claim on this session."""
        self._history = History(max_checkpoints)
        self.parent: tuple[str, int] | None = None
        """For a fork: ``(session_id, checkpoint index)`` it was forked from (R44)."""
        self.generation: str = new_generation()
        """This session's own generation (a fork gets a new one): effect ids are numbered
        within it (R48)."""
        self.family: str | None = new_family()
        """The ledger family this session shares with its ``shared`` forks: a generation of
        its own, minted here, never the session id (R48). None only in a session restored
        from a snapshot written before families were minted: its ledger is keyed by its
        id, as it always was."""
        self.effects: Literal["real", "dry-run"] = "real"
        """``dry-run``: a preview fork where no tool call or unrun effect runs (R44)."""
        self.effect_wait_s = 30.0
        """How long ``once`` waits for a fork of the family that is running the same
        effect, to return its result (then EffectOutcomeUnknownError)."""
        self.meta: dict[str, dict[str, Any]] = {}
        """What extensions keep with the session, saved in its snapshot and carried by its
        forks: one JSON object per extension name, versioned by the extension (tracing
        keeps the span a paused request ended with under ``otel``). Empty unless an
        extension is in use, and then nothing of it is stored."""

    @classmethod
    def of(
        cls, session_id: str = "tmp", max_messages: int = 50, max_events: int = 1000
    ) -> InMemoryAgentSession:
        """Create a session (the seed's ``InMemoryAgentSession.of(id)``)."""
        return cls(session_id, max_messages=max_messages, max_events=max_events)

    def agent_state(self, name: str, cls: type[S]) -> S | None:
        """The state agent ``name`` keeps in this session, as its ``cls`` (None when there is
        none, or it belongs to another kind of agent)."""
        return claim(self.traces, name, cls)

    # -- history and forks (R43, R44) --------------------------------------------------
    @property
    def history(self) -> list[Checkpoint]:
        """Where the session stood at every request end (and every node, with
        ``checkpoints="node"``), oldest first; bounded by ``max_checkpoints``."""
        return self._history.checkpoints()

    def record_checkpoint(self) -> None:
        """Take a checkpoint now (agents and the engine do at every request end)."""
        self._history.record(self, self.clock.now_ms())

    @property
    def ledger_id(self) -> str:
        """The ledger this session's effects go to: its family's (the session id for a
        session from before families were minted)."""
        return self.family or self.session_id

    def fork(
        self,
        new_session_id: str,
        at: int | Checkpoint | None = None,
        *,
        effects: Literal["shared", "dry-run", "separate"] = "shared",
    ) -> InMemoryAgentSession:
        """An independent session as this one stood at a checkpoint (the latest, or
        ``at``): same context, agent state, pending state, decisions and event log as
        then; ``fork.parent == (session_id, index)``. Change it before it resumes (edit the
        context, decide differently), then resume it like any session; this one never
        changes. ``effects``: ``shared`` (one ledger for the family: an effect runs at most
        once across forks), ``dry-run`` (no tool call and no effect that has not run
        already runs: each is recorded as skipped), ``separate`` (a new family, with a
        ledger of its own).

        A fork of a dry-run preview is a preview too, whatever ``effects`` says: a preview's
        ledger holds skips, not the family's effects, so nothing forked from it may run one
        (an effect runs at most once among a root's descendants, R48). To make a previewed
        path real, fork the original at the same checkpoint and decide it again."""
        from .fork import fork_session

        return fork_session(self, new_session_id, at, effects)

    # -- pending (R1, R2) ------------------------------------------------------------
    def pending(self, pending: bool, reason: str | None = None) -> None:
        """``True``: stop the running flow at its next check point and keep ``reason``.
        ``False``: clear the flag; ``reason`` None clears the reason, else sets it."""
        _check.flag("pending", pending)
        _check.text("reason", reason, optional=True)
        ctx = self.context
        if pending:
            ctx.stop()
            self.status = "pending"
        else:
            ctx._set_stopped(False)
            if self.status == "pending":
                self.status = "running"
        self._reason = reason

    @property
    def is_pending(self) -> bool:
        """True while the context is stopped (R2)."""
        return self.context.is_stopped

    @property
    def pending_reason(self) -> str | None:
        """The reason given to :meth:`pending`."""
        return self._reason

    # -- history (R6a) ---------------------------------------------------------------
    def add_message(self, message: ChatMessage) -> None:
        """Append to the chat history; system messages are not stored; oldest evicted."""
        if not isinstance(message, ChatMessage):
            raise UsageError(f"add_message takes a ChatMessage, not {type(message).__name__}")
        if message.role == "system":
            return
        self.messages.append(message)
        overflow = len(self.messages) - self.max_messages
        if overflow > 0:
            del self.messages[:overflow]

    # -- idempotency ledger (R32, R39) ----------------------------------------------
    def _ledger_put(
        self, key: str, entry: LedgerEntry, *, force: bool = False, who: AuditEntry | None = None
    ) -> LedgerEntry:
        """Record ``entry``; returns the entry now in the ledger, which is another one when
        the store holds a newer state of the effect (another process moved it on).

        The hook first: a store makes the entry durable (and may refuse it) before the
        effect runs. ``force``: a human override (resolve/forget), written as it is, and
        audited as ``who`` (with no store, ``who`` is noted for the next save)."""
        hook = self.ledger_hook
        if hook is not None:
            entry = hook(self, key, entry, force, who)
        else:
            if who is not None:  # the facts of the change with it (the save writes the rest)
                note(self, effect_audit(key, entry, who) or who)
            # in memory the same rule as in a store: forks may share this very dict
            with _LEDGER_LOCK:
                old = self.ledger.get(key)
                if not force and not advances(old, entry):
                    return old if old is not None else entry
                self.ledger_dirty.add(key)
                self.ledger[key] = entry
            return entry
        self.ledger[key] = entry
        return entry

    def _ledger_start(self, key: str, approval: EffectApproval | None = None) -> LedgerEntry | None:
        """The completed entry for ``key``, or None after recording ``started`` (with the
        ``approval`` that authorised this attempt, R60)."""
        check_effect_key(key)
        entry = self.ledger.get(key)
        if entry is not None and entry.status == "completed":
            return entry
        if self.effects == "dry-run":  # a preview: record what would run, run nothing
            now = self.clock.now_ms()
            skipped = LedgerEntry(
                status="skipped", started_ms=now, ended_ms=now, by=self.session_id,
                result=f"[dry run] effect {key!r} not run",
            )  # fmt: skip
            self.ledger[key] = skipped
            self.ledger_dirty.add(key)
            return skipped
        if entry is not None and entry.status == "started" and entry.by in (None, self.session_id):
            raise EffectOutcomeUnknownError(key, session_id=self.session_id)  # (our own crash)
        if approval is None and self.context.attrs.get(GRAPH_RUNNING):
            approval = _graph_link(self)  # a graph approval let the run get here (R60)
        mine = LedgerEntry(
            status="started", started_ms=self.clock.now_ms(), attempt=new_attempt(),
            by=self.session_id, approval=approval,
        )  # fmt: skip
        stored = self._ledger_put(key, mine)
        # another session of the family (a fork) is running this very effect: wait for it
        # to end and take its result, rather than calling its outcome unknown
        sibling = stored != mine and stored.status == "started" and stored.by not in (
            None, self.session_id,
        )  # fmt: skip
        deadline = time.monotonic() + (self.effect_wait_s if sibling else 0.0)
        pause = 0.02
        while stored != mine and stored.status == "started" and time.monotonic() < deadline:
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
            stored = self._ledger_put(key, mine)
        if stored == mine:  # (equal, not identical: a retried write reads it back)
            return None
        if stored.status == "completed":  # done meanwhile by another copy (a fork, a process)
            return stored
        raise EffectOutcomeUnknownError(key, session_id=self.session_id)

    def _ledger_end(self, key: str, result: Any = None, error: BaseException | None = None) -> None:
        now = self.clock.now_ms()
        entry = self.ledger[key]
        if error is not None:
            if isinstance(error, ToolUnavailableError) and error.sent:
                return  # the call reached its server and no answer came: outcome unknown
            self._ledger_put(key, entry.failed(f"{type(error).__name__}: {error}", now))
            return
        try:
            check_json(f"result of effect {shown(key)}", result)
        except NotSerializableError:
            # the effect ran: record that, without the result no store could keep
            kept = entry.completed(None, now).model_copy(
                update={"error": f"result not kept: a {type(result).__name__} is not JSON"}
            )
            self._ledger_put(key, kept)
            raise
        self._ledger_put(key, entry.completed(result, now))

    def once(
        self,
        key: str,
        fn: Callable[[], T],
        *,
        approval: EffectApproval | ApprovalKeys | None = None,
    ) -> T:
        """Run ``fn`` once per ``key`` for this session and record its result.

        Later calls return the recorded result without running ``fn``. The ledger marks the
        effect ``started`` before it runs and ``completed`` after, so a crash in between is
        visible (``unknown``) instead of silently repeated. The result must be JSON (a
        result that is not is refused with NotSerializableError once the effect is
        recorded as completed). A stored session shares its ledger with every copy and
        fork: an effect one of them completed is returned here, not run again.
        ``approval``: the approval that authorised the effect (agents pass the tool call's;
        recorded with the start, it decides who may resolve an unknown outcome, R60).
        Inside a flow graph the session's graph approval, decided ``APPROVE`` for this
        request, is linked without it; ``approval=ApprovalKeys(...)`` names another graph
        approval's keys, and then the effect runs only if that one holds ``APPROVE``.
        """
        _check.function("fn", fn)
        done = self._ledger_start(key, _approval(self, key, approval))
        if done is not None:
            if LISTENERS:
                listeners.effect(self, key, "replayed")
            return done.result  # type: ignore[no-any-return]
        try:
            result = fn()
        except BaseException as exc:
            self._ledger_end(key, error=exc)
            raise
        self._ledger_end(key, result)
        if LISTENERS:
            listeners.effect(self, key, "ran")
        return result

    async def once_async(
        self,
        key: str,
        fn: Callable[[], Awaitable[T] | T],
        *,
        approval: EffectApproval | ApprovalKeys | None = None,
    ) -> T:
        """Async twin of :meth:`once` (``fn`` may be sync or async)."""
        _check.function("fn", fn)
        done = self._ledger_start(key, _approval(self, key, approval))
        if done is not None:
            if LISTENERS:
                listeners.effect(self, key, "replayed")
            return done.result  # type: ignore[no-any-return]
        try:
            result = fn()
            if inspect.isawaitable(result):
                result = await result
        except BaseException as exc:
            self._ledger_end(key, error=exc)
            raise
        self._ledger_end(key, result)
        if LISTENERS:
            listeners.effect(self, key, "ran")
        return result

    def resolve_effect(
        self,
        key: str,
        result: Any,
        *,
        principal: Any = None,
        via: Via | None = None,
        roles: Sequence[str] = (),
        reason: str | None = None,
    ) -> None:
        """Record by hand that an effect of unknown outcome did complete with ``result``
        (written to the store at once when the session came from one), audited as
        ``effect.resolved`` by ``principal`` (a name, or a principal) through ``via``
        (default ``api``), with ``reason``."""
        check_effect_key(key)
        check_json(f"result of effect {shown(key)}", result)
        who = by_hand("effect.resolved", key, principal, via=via, roles=roles, reason=reason)
        _under_approval(self, key, principal, via, "resolve")
        entry = self.ledger.get(key) or LedgerEntry(
            status="started", started_ms=0.0, attempt=new_attempt()
        )
        self._ledger_put(key, entry.completed(result, self.clock.now_ms()), force=True, who=who)

    def forget_effect(
        self,
        key: str,
        *,
        principal: Any = None,
        via: Via | None = None,
        roles: Sequence[str] = (),
        reason: str | None = None,
    ) -> None:
        """Mark an effect as not done, so the next ``once`` runs it again: after a crash
        left it ``started`` and a human checked that it did not happen. Recorded as a
        failed attempt (``error`` says it was forgotten by hand), so a stale copy that
        still holds the old entry cannot bring it back; audited as ``effect.forgotten``
        (``principal``, ``via``, ``reason`` as for :meth:`resolve_effect`)."""
        check_effect_key(key)
        who = by_hand("effect.forgotten", key, principal, via=via, roles=roles, reason=reason)
        entry = self.ledger.get(key)
        if entry is None:
            return
        _under_approval(self, key, principal, via, "forget")
        forgotten = entry.model_copy(
            update={"status": "failed", "error": FORGOTTEN, "ended_ms": self.clock.now_ms()}
        )
        self._ledger_put(key, forgotten, force=True, who=who)

    # -- snapshots (R28) -------------------------------------------------------------
    def snapshot(self) -> Any:
        """A validated :class:`~intermission.SessionSnapshot` of everything in the session."""
        from .snapshot import take_snapshot

        return take_snapshot(self)

    def to_json(self) -> str:
        """Canonical JSON of :meth:`snapshot`."""
        from .snapshot import snapshot_json

        return snapshot_json(self)

    @classmethod
    def restore(cls, data: Any) -> InMemoryAgentSession:
        """Rebuild a session from a snapshot (model, dict or JSON text)."""
        from .snapshot import restore_session

        session = cls.__new__(cls)
        restore_session(session, data)
        return session

    def __repr__(self) -> str:
        state = f" pending={self._reason!r}" if self.is_pending else f" {self.status}"
        return f"<InMemoryAgentSession {self.session_id!r}{state}>"


def _approval(session: Any, key: str, approval: Any) -> EffectApproval | None:
    """``approval`` checked: an EffectApproval, or None; the ApprovalKeys of a graph
    approval: the link minted from what the session holds under them, which must be an
    ``APPROVE`` (else UsageError, and the effect does not run)."""
    if approval is None or isinstance(approval, EffectApproval):
        return approval
    from ..hitl.graph import ApprovalKeys

    if not isinstance(approval, ApprovalKeys):
        raise UsageError(
            f"approval is an EffectApproval or a graph approval's ApprovalKeys, not "
            f"{type(approval).__name__}"
        )
    done = session.ledger.get(key)
    if done is not None and done.status == "completed":
        return None  # (replayed: nothing starts)
    link = _graph_link(session, approval)
    if link is None:
        raise UsageError(
            f"effect {key!r} is declared as authorised by the graph approval at "
            f"{approval.decision!r}, which holds no approval of this request: decide it "
            "(approve) before the node runs the effect"
        )
    return link


def _graph_link(session: Any, keys: Any = None) -> EffectApproval | None:
    from ..hitl.unknown_outcome import graph_link

    return graph_link(session, keys)


def _under_approval(session: Any, key: str, principal: Any, via: Any, action: Any) -> None:
    """An approved effect is resolved or forgotten under its approval's policy, and
    forgetting it reopens that approval (R60; see intermission.hitl.unknown_outcome)."""
    from ..hitl.unknown_outcome import by_hand_under_approval

    by_hand_under_approval(session, key, principal, via, action)
