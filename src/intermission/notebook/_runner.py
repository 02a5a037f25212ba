"""What every decision widget shares: decide, resume without blocking the kernel, show the
result, graph and timeline, say when a click lost to a decision made elsewhere, and the
code twins of the buttons (R35, R36, R59)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, TypeVar

import traitlets as t

from .._concurrency import Job, Ticker, background
from ..core.session import AgentSession
from ..errors import (
    AgentVersionError,
    DecisionConflictError,
    IntermissionError,
    RequestInProgressError,
)
from ..hitl.deciding import deciding_as
from ..principals import Actor
from ..stores.decide import decide_and_resume
from ._agents import agent_for, shape_of, unserved_text, version_label
from ._allowed import refusal_text, waiting_head
from ._decided import (
    decided_html,
    decisions_of,
    lost_html,
    outcome_data,
    outcome_of,
    progress_line,
)
from ._html import esc, plain
from ._poll import every
from ._widget import View
from .graph_view import GraphView
from .settings import settings
from .timeline import Timeline

__all__ = ["DecisionView", "ResumeRunner"]

Action = Callable[[AgentSession], None]
W = TypeVar("W", bound="DecisionView")


def _votes(session: AgentSession) -> int:
    """How many approval votes the session's log holds."""
    return sum(1 for e in session.events if e.kind == "approval_voted")


def _decided_now(session: AgentSession) -> bool:
    """True when the session has what a resume applies: every tool task decided, or a
    graph decision written."""
    tasks = session.hitl.tasks
    if tasks:
        return all(t.call_uuid in session.hitl.decisions for t in tasks)
    last = session.events[-1] if len(session.events) else None
    return last is not None and last.kind == "approval_decided"


class ResumeRunner:
    """Runs ``action(session)`` (write a decision) then resumes ``agent``; with a ``store``
    both steps happen under the store's claim, the decision saved before the run. What
    it shows goes to its ``view``'s traits (status, result, graph, timeline, hint, lost,
    progress, busy, outcome, version, unserved).

    ``agent`` is an agent, or an AgentTable (R62): the session then resumes on the table's
    agent for its version (its own, or a newer one that migrates it under the claim), and
    a session whose version the table does not serve shows that (``unserved``) and
    decides nothing."""

    def __init__(
        self, view: DecisionView, agent: Any, session: AgentSession, store: Any = None
    ) -> None:
        self.view = view
        self.agent = agent
        self.session = session
        self.store = store
        self.response: Any = None
        self.error: BaseException | None = None
        self.clicked = False
        """True once a button (not a code twin) started a decision."""
        self._lock = threading.Lock()
        self._busy = False
        self._job: Job | None = None
        self._verb = ""
        self.note = ""
        """Set when another resume applied the same decision meanwhile (says by whom), or
        when the decision was a vote that an approval's policy counts (says what it still
        needs)."""
        self.voted = False
        """True when the last decision made here was a vote and the approval still waits."""
        self.state_hook: Callable[[], None] | None = None
        """Called after each resume (the widget redraws its request area)."""
        self.actor: Actor | None = None
        """Who the widget's last decision records (a migration it runs is theirs too)."""
        self.unserved = ""
        """The sentence saying that no agent at hand runs this session's version ("" when
        one does); the widget's buttons are off while it is set."""
        self._check_served()
        self._seen = self._state_key()
        self._polling: Ticker | None = None

    # -- which agent runs the session (R62) ------------------------------------------------
    def _pick(self) -> Any:
        """The agent that runs the session now (a table's agent for its version); raises
        AgentVersionError (or, for a name the table lacks, IntermissionError)."""
        return agent_for(self.agent, self.session)

    def resolved(self) -> Any:
        """The agent that decides and resumes the session now; raises AgentVersionError,
        changing nothing, when it is not served (the widget then says so)."""
        try:
            return self._pick()
        except IntermissionError as exc:
            self.unserved = plain(unserved_text(exc, self.session))
            self.view.unserved = self.unserved
            raise

    @property
    def at_hand(self) -> Any:
        """The agent that runs the session, or None when none here does."""
        try:
            return self._pick()
        except IntermissionError:
            return None

    @property
    def shape(self) -> Any:
        """An agent of the session's name to tell what it is (a team with a graph, its
        tools): the one that runs it, else the newest served; None when none is here."""
        return shape_of(self.agent, self.session)

    def _check_served(self) -> None:
        """Set ``unserved`` and the view's version line from the session as it is now (a
        migration made elsewhere shows at the next read)."""
        try:
            self._pick()
        except IntermissionError as exc:  # (names are model or store text: plain)
            self.unserved = plain(unserved_text(exc, self.session))
        else:
            self.unserved = ""
        self.view.unserved = self.unserved
        label = version_label(self.session)
        self.view.version = plain(f"agent {label}") if label else ""

    # -- the resume ------------------------------------------------------------------
    def _resume(self, action: Action) -> Any:
        if self.store is not None:
            # checked on a read, then decided and applied under one claim (R39): a
            # losing reviewer never blocks the winner; see stores.decide. A table picks
            # the session's version there, on what the store holds (R62)
            outcome = decide_and_resume(
                self.store, self.session.session_id, action, self.agent, principal=self.actor
            )
            self.session = outcome.session
            waits = outcome.applied_elsewhere or outcome.waiting is not None
            self.note = outcome.describe() if waits else ""
            self.voted = outcome.waiting is not None
            return outcome.response
        agent = self.resolved()  # (its version, or one that migrates it as it resumes)
        waiting = _votes(self.session)
        action(self.session)
        if _votes(self.session) > waiting and not _decided_now(self.session):
            self.voted = True  # a quorum's vote: nothing to resume yet
            needs = progress_line(self.session) or "the approval waits for more decisions"
            self.note = f"recorded; {needs}"
            return None
        # a migration on the way is by who decided (else by an enclosing deciding_as)
        with deciding_as(self.actor) if self.actor is not None else nullcontext():
            return agent.prompt().session(self.session).call()

    @property
    def busy(self) -> bool:
        """True while a decision is being written and the agent resumed."""
        return self._busy

    def _redraw(self) -> None:
        self.view.busy = self._busy
        self.view.progress = progress_line(self.session)
        self._check_served()
        if self.state_hook is not None:
            self.state_hook()

    def _begin(self, verb: str = "") -> bool:
        with self._lock:
            if self._busy:
                return False  # a double click resumes once
            self._busy = True
        self.error = None
        self.note = ""
        self.voted = False
        self._verb = verb
        self.view.lost = ""
        self.view.status = "<i>running…</i>"
        self._redraw()
        return True

    def refused(self, error: BaseException, actor: Any, target: str | None, verdict: str) -> None:
        """A decision refused before it reached the store: noted in the session's audit
        trail, and written to the store's at once when there is one (who tried what, why
        it was refused)."""
        from ..hitl.refusals import refusal, write_refusal

        if getattr(error, "audit", None) is None:
            refusal(self.session, error, actor, target, verdict)
        if self.store is not None:
            write_refusal(self.store, self.session.session_id, error)

    def show_error(self, error: BaseException) -> None:
        """Show an error in the widget (a refused decision: nothing changed). When the
        session was decided meanwhile (elsewhere), say who decided what and when instead."""
        self.error = error
        if self.decided_elsewhere:
            self._show_state()
            return
        if isinstance(error, AgentVersionError):  # a sentence, nothing changed (R62)
            text = unserved_text(error, self.session)
            self.view.status = f"<span class='im-error'>{esc(text)}</span>"
            return
        # a sentence for the person who clicked, never an exception's class name
        text = refusal_text(error, self.session, self.actor)
        self.view.status = f"<span class='im-error'>{esc(text)}</span>"

    def lost(self, verb: str, error: BaseException | None = None) -> None:
        """Say that a click's decision was not recorded because another one came first
        (the one ``error`` names, when it is a DecisionConflictError)."""
        if verb:
            self.view.lost = lost_html(verb, self.session, error)

    def _finish(self, response: Any = None, error: BaseException | None = None) -> None:
        with self._lock:
            self._busy = False
        verb, self._verb = self._verb, ""
        if error is not None:
            self._reload()  # show what the store holds now, never a stale state
            self.show_error(error)
            if isinstance(error, DecisionConflictError) or self.decided_elsewhere:
                self.lost(verb, error)  # another decision won the race: say which
            self.refresh()
            self._redraw()
            self._settled()
            return
        self.response = response
        self._seen = self._state_key()
        self.refresh()
        self._show_state()
        if self.voted:  # a vote an approval's policy counts: what it still waits for
            self.view.status = _vote_line(verb, self.session)
        elif self.note:  # another resume applied the same decision meanwhile: say by whom
            note = self.note[:1].upper() + self.note[1:]
            self.view.status += f" <i class='im-note'>{esc(note)}.</i>"
        self._redraw()
        self._settled()

    def _settled(self) -> None:
        """What the session came to now, for the page (and marimo's cells) to pick up."""
        self.view.outcome = outcome_data(self.session, self.response)
        self.view._bump()

    def _reload(self) -> None:
        if self.store is None:
            return
        try:
            self.session = self.store.load(self.session.session_id)
        except Exception:  # the error to show is the one that happened, not this one
            return

    # -- the session as it is now (R51) ---------------------------------------------------
    def _state_key(self) -> tuple[Any, ...]:
        s = self.session
        events = s.events
        last = (events[-1].run_id, events[-1].seq) if events else None
        version = (getattr(s, "agent", None), getattr(s, "agent_version", None))
        return (getattr(s, "store_version", None), s.status, s.pending_reason, last, version)

    @property
    def decided_elsewhere(self) -> bool:
        """True when the session is past its decision and this widget did not resume it
        (another widget, an Inbox, the CLI or another kernel did, or it was decided before
        this widget was made)."""
        s = self.session
        return (
            self.response is None
            and not s.is_pending
            and s.status in ("done", "failed")
            and bool(decisions_of(s))
        )

    def sync(self) -> bool:
        """Read the session again (from the store when there is one) and redraw when it
        moved on; True when something changed. Skipped while a resume runs here."""
        if self._busy:
            return False
        if self.store is not None:
            try:
                fresh = self.store.load(self.session.session_id)
            except Exception:  # the store is away for a moment: keep what is shown
                return False
            with self._lock:
                if self._busy:
                    return False
                self.session = fresh
        key = self._state_key()
        if key == self._seen:
            return False
        self._seen = key
        self.refresh()
        self._show_state()
        self._redraw()
        self._settled()
        return True

    def start_polling(self) -> None:
        """Re-read the session every ``settings.view_poll_s`` seconds (once shown; never
        on autopilot), so a decision made elsewhere shows without a click."""
        seconds = settings.view_poll_s
        if self._polling is not None or not seconds or settings.autopilot:
            return
        self._polling = every(seconds, self, lambda r: r._tick())

    def stop_polling(self) -> None:
        """Stop re-reading the session."""
        if self._polling is not None:
            self._polling.stop(timeout=0)

    def _tick(self) -> bool:
        self.sync()
        s = self.session
        return s.is_pending or s.status not in ("done", "failed")  # a finished one stays

    def settle(self) -> None:
        """The first drawing's status: a session decided already says by whom."""
        if not self.session.is_pending:
            self._show_state()
        self.view.outcome = outcome_data(self.session, self.response)
        self.view.progress = progress_line(self.session)
        self._check_served()

    def _show_state(self) -> None:
        """Status and result lines from the session: waiting (again), or its status with
        who decided what and when, and the answer it ended with."""
        s = self.session
        view = self.view
        if s.is_pending:
            again = "Waiting again" if self.response is not None else waiting_head(s)
            view.status = f"<b>{esc(again)}:</b> {esc(s.pending_reason)}"
            if self.response is not None:
                content = getattr(self.response, "content", "")
                view.result = f"<div class='im-result'>{esc(content)}</div>"
            return
        view.hint = ""  # nothing left to click here
        who = decided_html(s)
        where = "" if self.response is not None else " <i>(not in this view)</i>"
        view.status = f"<b>{esc(s.status)}</b>" + (
            f"<div class='im-decided'>Decided{where}: {who}</div>" if who else ""
        )
        response = self.response if self.response is not None else outcome_of(s)
        content = getattr(response, "content", "") if response is not None else ""
        view.result = f"<div class='im-result'>{esc(content)}</div>" if content else ""

    def run_now(self, action: Action) -> Any:
        """Decide and resume in this thread; returns the response (code twins use this)."""
        if not self._begin():
            raise RequestInProgressError(self.session.session_id)
        try:
            response = self._resume(action)
        except BaseException as exc:
            self._finish(error=exc)
            raise
        self._finish(response)
        return response

    def run_in_background(self, action: Action, verb: str = "") -> None:
        """What buttons do: decide and resume beside the cell (a thread; an asyncio task in
        the browser, where a click handler may not block), never blocking it. ``verb``
        (say "Reject") names the click if another decision wins the race."""
        if not self._begin(verb):
            return
        self.clicked = True
        self.view.hint = ""

        def work() -> None:
            try:
                response = self._resume(action)
            except BaseException as exc:  # shown in the widget, buttons enabled again
                self._finish(error=exc)
            else:
                self._finish(response)

        self._job = background(work, name="intermission-widget")

    def wait(self, timeout: float | None = 60.0) -> Any:
        """Wait for a button-started resume to end; returns the response."""
        if self._job is not None:
            self._job.wait(timeout)
        return self.response

    # -- display ---------------------------------------------------------------------
    def refresh(self) -> None:
        """Redraw graph and timeline from the session."""
        agent = self.shape
        if hasattr(agent, "spec"):
            self.view.graph = GraphView(agent, self.session).card()
        self.view.timeline = Timeline(self.session).html()


_VOTED = {
    "approve": "Your approval is recorded", "reject": "Your rejection is recorded",
    "approve all": "Your approvals are recorded", "reject all": "Your rejections are recorded",
}  # fmt: skip


def _vote_line(verb: str, session: AgentSession) -> str:
    """The status after a vote that decides nothing yet: ``Your approval is recorded.
    Waiting for one more approval.`` (the progress line above says from whom)."""
    said = _VOTED.get(verb.lower(), "Your vote is recorded")
    return f"<b>{esc(said)}.</b> {esc(waiting_head(session))}."


class DecisionView(View):
    """What decision widgets share for notebooks that work both ways: a person clicks (in
    JupyterLab, Notebook 7, JupyterLite or marimo), nbval runs the code twin. ``runner`` is
    the widget's ResumeRunner."""

    result = t.Unicode("").tag(sync=True)
    """The answer the session ended with (HTML)."""
    graph = t.Unicode("").tag(sync=True)
    """The graph with the session's state, for a team (HTML with SVG)."""
    timeline = t.Unicode("").tag(sync=True)
    """The session's timeline (HTML)."""
    lost = t.Unicode("").tag(sync=True)
    """Said when a click's decision lost to one made elsewhere first (HTML)."""
    progress = t.Unicode("").tag(sync=True)
    """The approval policy's progress (plain text; shown when not empty)."""
    version = t.Unicode("").tag(sync=True)
    """The agent and version the session runs on, ``agent ops@1`` (plain text)."""
    unserved = t.Unicode("").tag(sync=True)
    """Said when no agent at hand runs the session's version: nothing can be decided here
    (plain text; the buttons are off while it is set)."""

    runner: ResumeRunner

    @property
    def session(self) -> AgentSession:
        """The session (a fresh object after each resume through a store)."""
        return self.runner.session

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        self.runner.start_polling()  # shown: keep up with decisions made elsewhere
        return super()._repr_mimebundle_(**kwargs)

    def _show_error(self, error: BaseException) -> None:
        self.runner.show_error(error)

    def _act(self, verb: str, decide: Callable[[], Any]) -> None:
        """What a decision button does: when the session moved on elsewhere meanwhile, show
        that (and that this click was not recorded: another decision came first); else
        make the decision (a refused one is shown, nothing changes) and resume beside the
        cell. ``decide()`` returns the action, or None when nothing is to run yet."""
        runner = self.runner
        if runner.busy:
            return  # a click while a resume runs: ignored, as the page's greyed button
        runner.sync()  # what the store holds now, not what the page showed
        if not self._still_open() and decisions_of(runner.session):
            if runner.response is None:  # not this widget's own earlier decision
                runner.lost(verb)
            return
        runner._check_served()
        if runner.unserved:  # (the page greys the buttons): said again, nothing changes
            self.status = f"<span class='im-error'>{esc(runner.unserved)}</span>"
            return
        try:
            action = decide()
        except Exception as exc:  # a refused decision: shown, nothing changed
            runner.show_error(exc)
            if isinstance(exc, DecisionConflictError):
                runner.lost(verb, exc)
            return
        if action is not None:
            runner.run_in_background(action, verb)

    def _still_open(self) -> bool:
        """True while the decision this widget offers is still to be made."""
        return self.runner.session.is_pending

    @property
    def decided(self) -> bool:
        """True once the session's decision was applied: by this widget (a click or a code
        twin) or anywhere else (another widget, an Inbox, the CLI, another kernel)."""
        runner = self.runner
        runner.wait()
        runner.sync()
        if runner.busy:
            return False
        elsewhere = bool(runner.note) and not runner.voted  # applied by another resume
        return runner.response is not None or elsewhere or runner.decided_elsewhere

    def code_twin(self: W, decide: Callable[[W], Any]) -> Any:
        """The cell after a widget: what its buttons would do, in code.

        - A person clicked already: nothing is decided again; waits for the resume the click
          started and returns its response.
        - The session was decided elsewhere (another widget, an Inbox, the CLI, another
          kernel) or before this widget was made: returns the answer it ended with.
        - On autopilot (nbval, ``make notebooks``; see ``settings.autopilot``): runs
          ``decide(widget)`` — the same path as the buttons — and returns the response.
        - Otherwise the decision is left to a person: says where to click, returns None.
        """
        runner = self.runner
        if runner.clicked:
            return runner.wait()
        runner.sync()
        if runner.decided_elsewhere:  # whoever decided it: the answer it ended with
            return outcome_of(runner.session)
        if settings.autopilot:
            return decide(self)
        self.hint = (
            "<div class='im-hint'>&#8593; Waiting for your decision in the widget above. "
            "After clicking, run the cells below again (or Run &#9658; Run Selected Cell and "
            "All Below).</div>"
        )
        return None

    def wait(self, timeout: float | None = 60.0) -> Any:
        """Wait for a button-started resume; returns the response."""
        return self.runner.wait(timeout)
