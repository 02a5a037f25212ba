"""One AG-UI run under its thread's claim: what it does is decided there, from what the
store holds then, and the events that end it are sent after the save that ends the claim.

The run claims its thread first — creating it when it does not exist, with its agent in
the insert, so the request that first commits a thread decides whose it is; waiting a
bounded time while another holder has it — and only then reads what to do: refuse
(``WRONG_AGENT``, the interrupt rules), replay a run that already happened, or run: a new
prompt, or a resume whose decisions are recorded and saved first (a crash after that loses
nothing), all under that one claim. A refusal or a replay leaves the claim without a save;
a refused decision's audit entry (who tried what, why) is written to the store's trail.

With authentication on, the run's principal decides its resume (a client-sent
``metadata.reviewer`` is a display note only) and is the requester of a new prompt.

Events stream as the agent makes them, but the ones that end the run (a pause's snapshots,
``RUN_FINISHED``, ``RUN_ERROR``) wait for the claim's final save: when it fails (the lease
was lost, the database is away), the client gets a single ``RUN_ERROR`` instead, and a
replay of the log never shows that run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any, Literal

from ag_ui import core as ag

from ..agents.versions import migrate_session, version_of
from ..core import listeners
from ..core.session import InMemoryAgentSession
from ..errors import (
    AgentVersionError,
    ConflictError,
    DeadlinePassedError,
    DecisionConflictError,
    DecisionRefusedError,
    InvalidDecisionError,
    ReviewerNotAllowedError,
    SessionBusyError,
    SessionNotFoundError,
)
from ..hitl import HITL, decide_graph
from ..hitl.deciding import deciding_as
from ..hitl.refusals import write_refusal
from ..principals import Actor, Principal, surface
from ..stores.base import save_ahead
from .events import STARTS, Translator
from .interrupts import (
    Plan,
    Refusal,
    _iso,
    actor_of_resume,
    decision_of,
    open_interrupts,
    plan,
)
from .replay import (
    finished,
    message_ids,
    paused,
    remember,
    replay,
    run_named,
    runs_of,
    seen_message_ids,
)
from .sse import Cursor

__all__ = ["BUSY_WAIT_S", "Claimed", "busy_message", "prompt_of", "user_id_of"]

BUSY_WAIT_S = 5.0
"""How long a run waits for another holder of its thread before THREAD_BUSY: enough for a
concurrent resume to finish (then it is replayed), short of a dead server's lease (minutes:
the answer names when that claim lapses)."""

Send = Callable[[Cursor, Any], None]
Held = list[tuple[Cursor, Any]]

log = logging.getLogger("intermission.audit")


def user_id_of(messages: list[Any]) -> str | None:
    """The id of the run's last user message."""
    for m in reversed(messages):
        if getattr(m, "role", None) == "user":
            return str(m.id)[:200]
    return None


def prompt_of(messages: list[Any]) -> str | None:
    """The text of the run's last user message."""
    for m in reversed(messages):
        if getattr(m, "role", None) == "user":
            content = m.content
            if isinstance(content, str):
                return content
            parts = [getattr(p, "text", "") for p in content or []]
            return "".join(p for p in parts if isinstance(p, str)) or None
    return None


def busy_message(store: Any, tid: str) -> str:
    """Who holds the thread and when that claim lapses (a dead holder's lease only lapses
    then; a live one renews it)."""
    holder = getattr(store, "_holder", lambda _: None)(tid)
    until = getattr(store, "_claim_until", lambda _: None)(tid)
    who = f" by {holder}" if holder else ""
    when = (
        f"; its claim lapses at {_iso(until)} unless its holder is alive and renews it"
        if until is not None
        else ""
    )
    return f"thread {tid!r} is being run elsewhere{who}{when}; try again later"


def _write_audit(store: Any, tid: str, entries: list[Any]) -> None:
    """Append refused decisions to the thread's audit trail; a failing write is logged,
    never raised (the run is refused either way, and says why)."""
    append = getattr(store, "append_audit", None)
    if append is None:
        return
    try:
        append(tid, entries)
    except Exception:
        log.warning("the audit entry of a refused resume on %r was not written", tid,
                    exc_info=True)  # fmt: skip


class _Unsaved(Exception):
    """Leaves the claim without a save (a replay), with the events to send after."""

    def __init__(self, frames: Held) -> None:
        super().__init__("replayed")
        self.frames = frames


class Claimed:
    """One run of ``agent`` (served as ``name``) for ``data`` on ``store``.

    ``send`` gets each AG-UI event with its cursor; ``holding(thread, token)`` is told
    when the run holds its thread's claim (and ``None`` when it no longer does), so a
    server that stops can release the claims of runs that outlive its drain.
    ``principal``: the authenticated caller (None without auth). ``pick(session,
    agent)``: the agent that runs the claimed session (its own version, or one that
    migrates it; AgentVersionError refuses the run, ``AGENT_VERSION``) — ``agent`` is the
    one a new thread starts on."""

    def __init__(self, store: Any, agent: Any, name: str, data: ag.RunAgentInput,
                 send: Send, holding: Callable[[str, str | None], None],
                 principal: Principal | None = None,
                 pick: Callable[[InMemoryAgentSession, Any], Any] | None = None,
                 ) -> None:  # fmt: skip
        self.store = store
        self.agent = agent
        self.pick = pick
        self.name = name
        self.data = data
        self.send = send
        self.holding = holding
        self.principal = principal
        self.base = 0
        """The thread's last event when it was claimed (refusals are numbered after it)."""

    def run(self) -> None:
        """Claim, decide, act, save; then send what ends the run. Refusals raise
        :class:`Refusal`, store errors their own (nothing of the run's end was sent)."""
        tid = self.data.thread_id
        prompt = prompt_of(self.data.messages)
        give_up = time.monotonic() + BUSY_WAIT_S
        pause = 0.02
        while True:
            try:
                with ExitStack() as stack:
                    try:
                        s = stack.enter_context(self.store.claim(tid))
                    except SessionNotFoundError:
                        self._create(prompt, give_up)
                        continue
                    except SessionBusyError:
                        if time.monotonic() > give_up:
                            raise Refusal("THREAD_BUSY", busy_message(self.store, tid)) from None
                        time.sleep(pause)
                        pause = min(pause * 2, 0.5)
                        continue
                    self.holding(tid, s.claim_token)
                    self.base = s.events.next_seq - 1
                    held = self._decide(s, prompt)
                # here the claim's final save has committed
            except _Unsaved as done:
                held = done.frames
            finally:
                self.holding(tid, None)
            for cursor, event in held:
                self.send(cursor, event)
            return

    def _create(self, prompt: str | None, give_up: float) -> None:
        """Insert the new thread, its agent recorded: the first insert to commit decides
        whose thread it is (a later one finds it there and claims it)."""
        tid = self.data.thread_id
        if self.data.resume:
            raise Refusal("THREAD_NOT_FOUND", f"no thread {tid!r} to resume")
        if not prompt:
            raise Refusal("NO_PROMPT", "a new run needs a user message")
        if time.monotonic() > give_up:  # created and deleted again, over and over
            raise Refusal("THREAD_BUSY", f"thread {tid!r} keeps changing; try again later")
        new = InMemoryAgentSession(tid)
        new.agent = self.name
        try:
            self.store.save(new)
        except ConflictError:
            pass  # created meanwhile by another request: its insert decided the agent

    def _decide(self, s: InMemoryAgentSession, prompt: str | None) -> Held:
        """What to do with the thread as the claim found it; returns the held end."""
        data, tid = self.data, self.data.thread_id
        if s.agent is not None and s.agent != self.name:
            raise Refusal("WRONG_AGENT", f"thread {tid!r} belongs to agent {s.agent!r}")
        last = user_id_of(data.messages)
        if prompt and last is not None and last in seen_message_ids(s):
            prompt = None  # the client re-sent its history: no new user message
        done = None if data.resume or prompt else run_named(s, data.run_id)
        if done is not None:  # a retried POST, nothing new in it: that run again
            raise _Unsaved(list(replay(s, None, data.run_id, done)))
        migrate = self._version(s)
        try:
            p = plan(s, data.resume, prompt, s.clock.now_ms(), self.principal, data.run_id)
        except Refusal as exc:
            if exc.audit:  # refused decisions: kept in the trail, the session untouched
                _write_audit(self.store, tid, exc.audit)
                for entry in exc.audit if listeners.LISTENERS else ():  # (traces: on record)
                    listeners.noted(s, entry)
            raise
        if p.kind == "replay":
            raise _Unsaved(self._replayed(s, p))
        if p.record:
            self._record(s, p)
        if migrate is not None:  # after the decisions: a rewritten call voids them
            who = actor_of_resume(self.principal, next(iter(p.record.values()))) if (
                p.record) else self.principal  # fmt: skip
            with deciding_as(who):  # (raises: the claim is released, nothing saved)
                migrate_session(s, self.agent, migrate)
        if p.record or migrate is not None:
            save_ahead(self.store, s)  # the decisions are durable before anything runs
        return self._execute(s, p)

    def _version(self, s: InMemoryAgentSession) -> str | None:
        """Pick the agent of the claimed session (R62); returns the version to migrate it
        from (None: it runs as it is). A version not served here is refused before any of
        its code runs, nothing changed (the approval stays open for the server that
        serves it)."""
        if self.pick is None or s.agent is None:
            return None
        try:
            self.agent = self.pick(s, self.agent)
        except AgentVersionError as exc:
            raise Refusal("AGENT_VERSION", str(exc)) from None
        paused = s.agent_version
        if paused is None or paused == version_of(self.agent):
            return None
        if paused in getattr(self.agent, "migrations", {}):
            return str(paused)
        return None  # (the request's own check says what differs)

    def _record(self, s: InMemoryAgentSession, p: Plan) -> None:
        """Record the plan's decisions as the run's principal (or, without auth, the
        reviewer the client named, as asserted); a refusal's audit entry is written."""
        first = next(iter(p.record.values()))
        who: Actor | None = actor_of_resume(self.principal, first)
        with surface(first.via):  # (nobody named, without auth: still its surface)
            try:
                if s.hitl.tasks:
                    HITL.submit_all(
                        s, {i: decision_of(v) for i, v in p.record.items()}, agent=self.agent,
                        principal=who,
                    )  # fmt: skip
                    return
                (v,) = p.record.values()
                if v.edited is not None:
                    raise Refusal("INVALID_PAYLOAD", "a confirmation takes no editedArgs")
                verdict: Literal["APPROVE", "REJECT"] = "APPROVE" if v.approve else "REJECT"
                decide_graph(s, verdict, reason=v.reason, principal=who)
            except InvalidDecisionError as exc:
                write_refusal(self.store, s.session_id, exc)  # who tried what, why refused
                if isinstance(exc, DecisionConflictError):
                    raise
                if isinstance(exc, DeadlinePassedError):  # it passed while it was read
                    raise Refusal("INTERRUPT_EXPIRED", f"{exc}") from None
                if isinstance(exc, ReviewerNotAllowedError):
                    raise Refusal("REVIEWER_NOT_ALLOWED", f"{exc}") from None
                if isinstance(exc, DecisionRefusedError):
                    raise Refusal("DECISION_REFUSED", f"{exc}") from None
                raise Refusal("INVALID_PAYLOAD", f"{exc}; nothing was changed") from None

    def _request(self, s: InMemoryAgentSession, text: str | None) -> Any:
        """The agent's request on ``s``: a new prompt names the authenticated caller as
        who asks (recorded on what it asks for); a resume keeps its request's."""
        request = self.agent.prompt(text).session(s)
        principal = self.principal
        if text and principal is not None:
            request = request.principal(Actor(
                name=principal.name, roles=sorted(principal.roles), via="agui",
                authenticated=True,
            ))  # fmt: skip
        return request

    def _execute(self, s: InMemoryAgentSession, p: Plan) -> Held:
        """Run the plan on the claimed session: events go out as they come, the ones that
        end the AG-UI run are returned (held until the save)."""
        tid, rid = self.data.thread_id, self.data.run_id
        prompt = p.prompt if p.kind == "prompt" else None
        then = p.then
        before = list(s.messages)
        user_id = user_id_of(self.data.messages) if prompt or then else None
        outer: dict[str, Any] = {"runs": []}

        def finish(end: Any) -> list[Any]:
            outer["end"] = end
            if not end.pending:
                return [finished(tid, rid, end)]
            found = open_interrupts(s)
            if not found:  # paused for another reason: still not a success (AG-UI 1.0)
                found = [ag.Interrupt(id=f"pending-{end.seq}", reason="input_required",
                                      message=s.pending_reason)]  # fmt: skip
            outer["ids"] = message_ids(s, before, user_id, tr)
            outer["closing"] = paused(s, tid, rid, found, tr, outer["ids"])
            return list(outer["closing"])

        def chained(end: Any) -> bool:  # the resume ended its pause: the message goes on
            return then is not None and not end.pending and len(outer["runs"]) == 1

        tr = Translator(tid, rid, finish, chained)
        held: Held = []
        last = s.events.next_seq - 1
        requests = [prompt] + ([then] if then is not None else [])
        for n, text in enumerate(requests):
            if n and (tr.done or tr.outer is not None or not tr.started):
                break  # the first did not end its pause (or did not end): no second
            for event in self._request(s, text).stream():
                last = event.seq
                out = tr.feed(event)
                if event.kind in STARTS and tr.outer == event.run_id:
                    outer["runs"].append(event.run_id)
                if tr.done:  # the run's end waits for the save
                    held += [((event.seq, k), e) for k, e in enumerate(out)]
                else:
                    for k, e in enumerate(out):
                        self.send((event.seq, k), e)
        end = outer.get("end")
        closing = outer.get("closing") or []
        if (
            tr.done
            and then is not None
            and end is not None
            and end.pending
            and len(outer["runs"]) == 1
        ):  # the message could not run: the end says so, live and in every replay
            closing = [*closing[:-1], self._not_run(s)]
            held[-1] = (held[-1][0], closing[-1])
        remember(s, outer["runs"], rid, end.seq if end is not None else None, closing,
                 outer.get("ids") or message_ids(s, before, user_id, tr),
                 user_id)  # fmt: skip
        if not tr.done:  # the run ended without its end event (cancelled)
            out = tr.close() + tr.error("the run did not finish", "RUN_INCOMPLETE")
            held += [((last, 500 + k), e) for k, e in enumerate(out)]
        return held

    def _not_run(self, s: InMemoryAgentSession) -> Any:
        """The end of a run whose message could not run: applying the decisions recorded
        on the thread paused it again."""
        ids = ", ".join(sorted(i.id for i in open_interrupts(s)))
        return ag.RunErrorEvent(
            code="INTERRUPTS_OPEN",
            message=(
                f"the decisions recorded on thread {s.session_id!r} were applied and it "
                f"paused again on interrupt(s) {ids}: the new message was not run; decide "
                "them (a run with a resume), then send it again"
            ),
        )

    def _replayed(self, s: InMemoryAgentSession, p: Plan) -> Held:
        for events in runs_of(s):
            if events[0].seq <= p.replay_seq <= events[-1].seq or events[0].seq > p.replay_seq:
                return list(replay(s, None, self.data.run_id, events))
        raise Refusal("NOTHING_TO_REPLAY", "the run that applied this resume is not in the log")
