"""What every approval widget shares: decide, resume without blocking the kernel, show
the result, graph and timeline, and the code twins of the buttons (R35, R36)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import ipywidgets as w

from .._concurrency import Job, background
from ..core.session import AgentSession
from ..errors import RequestInProgressError
from ._html import esc
from .graph_view import GraphView
from .settings import settings
from .timeline import Timeline

__all__ = ["CodeTwins", "ResumeRunner"]

Action = Callable[[AgentSession], None]
W = TypeVar("W", bound="CodeTwins")


class ResumeRunner:
    """Runs ``action(session)`` (write a decision) then resumes ``agent``; with a ``store``
    both steps happen under the store's claim, the decision saved before the run."""

    def __init__(self, agent: Any, session: AgentSession, store: Any = None) -> None:
        self.agent = agent
        self.session = session
        self.store = store
        self.response: Any = None
        self.error: BaseException | None = None
        self.status = w.HTML(layout=w.Layout(margin="4px 0"))
        self.status.add_class("approval-status")
        self.result = w.HTML()
        self.result.add_class("approval-result")
        self.graph = w.HTML()
        self.graph.add_class("approval-graph")
        self.timeline = w.HTML()
        self.hint = w.HTML()
        self.hint.add_class("im-hint-box")
        self.clicked = False
        """True once a button (not a code twin) started a decision."""
        self._lock = threading.Lock()
        self._busy = False
        self._job: Job | None = None
        self.buttons: list[w.Button] = []
        self.state_hook: Callable[[], None] | None = None
        """Called after each resume (the widget redraws its request area)."""

    # -- the resume ------------------------------------------------------------------
    def _resume(self, action: Action) -> Any:
        if self.store is not None:
            sid = self.session.session_id
            with self.store.resume(sid) as s:
                action(s)
            with self.store.resume(sid) as s:
                self.session = s
                return self.agent.prompt().session(s).call()
        action(self.session)
        return self.agent.prompt().session(self.session).call()

    @property
    def busy(self) -> bool:
        """True while a decision is being written and the agent resumed."""
        return self._busy

    def _redraw(self) -> None:
        for b in self.buttons:
            b.disabled = self._busy or not self.session.is_pending
        if self.state_hook is not None:
            self.state_hook()

    def _begin(self) -> bool:
        with self._lock:
            if self._busy:
                return False  # a double click resumes once
            self._busy = True
        self.error = None
        self.status.value = "<i>running…</i>"
        self._redraw()
        return True

    def show_error(self, error: BaseException) -> None:
        """Show an error in the widget (a refused decision: nothing changed)."""
        self.error = error
        self.status.value = (
            f"<span class='im-error' style='color:#c62828'>error: "
            f"{esc(type(error).__name__)}: {esc(error)}</span>"
        )

    def _finish(self, response: Any = None, error: BaseException | None = None) -> None:
        with self._lock:
            self._busy = False
        if error is not None:
            self._reload()  # show what the store holds now, never a stale state
            self.show_error(error)
            self.refresh()
            self._redraw()
            return
        self.response = response
        self.refresh()
        pending = self.session.is_pending
        self.status.value = (
            f"<b>waiting again:</b> {esc(self.session.pending_reason)}"
            if pending
            else f"<b>{esc(self.session.status)}</b>"
        )
        self.result.value = f"<div class='im-result'>{esc(getattr(response, 'content', ''))}</div>"
        self._redraw()

    def _reload(self) -> None:
        if self.store is None:
            return
        try:
            self.session = self.store.load(self.session.session_id)
        except Exception:  # the error to show is the one that happened, not this one
            return

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

    def run_in_background(self, action: Action) -> None:
        """What buttons do: decide and resume beside the cell (a thread; an asyncio task in
        the browser, where a click handler may not block), never blocking it."""
        if not self._begin():
            return
        self.clicked = True
        self.hint.value = ""

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
        if hasattr(self.agent, "spec"):
            view = GraphView(self.agent, self.session)
            bundle = view._repr_mimebundle_()
            self.graph.value = bundle.get("image/svg+xml") or bundle.get("text/html", "")
        self.timeline.value = Timeline(self.session).html()


class CodeTwins:
    """What decision widgets share for notebooks that work both ways: a person clicks in
    JupyterLab, nbval runs the code twin. ``runner`` is the widget's ResumeRunner."""

    runner: ResumeRunner

    @property
    def session(self) -> AgentSession:
        """The session (a fresh object after each resume through a store)."""
        return self.runner.session

    @property
    def decided(self) -> bool:
        """True once a decision was applied (by a click or a code twin) and the session no
        longer waits for this widget."""
        self.runner.wait()
        return self.runner.response is not None and not self.runner.busy

    def code_twin(self: W, decide: Callable[[W], Any]) -> Any:
        """The cell after a widget: what its buttons would do, in code.

        - A person clicked already: nothing is decided again; waits for the resume the click
          started and returns its response.
        - On autopilot (nbval, ``make notebooks``; see ``settings.autopilot``): runs
          ``decide(widget)`` — the same path as the buttons — and returns the response.
        - Otherwise the decision is left to a person: says where to click, returns None.
        """
        runner = self.runner
        if runner.clicked:
            return runner.wait()
        if settings.autopilot:
            return decide(self)
        runner.hint.value = (
            "<div class='im-hint'>&#8593; Waiting for your decision in the widget above. "
            "After clicking, run the cells below again (or Run &#9658; Run Selected Cell and "
            "All Below).</div>"
        )
        return None
