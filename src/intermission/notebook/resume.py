"""Moving a session on from the notebook: the right decision widget for it, and a plain
Resume for a session with nothing to decide."""

from __future__ import annotations

from typing import Any

import traitlets as t

from .._text import visible
from ..core.session import AgentSession
from ._agents import shape_of
from ._runner import DecisionView, ResumeRunner
from ._widget import esm, widget_ref
from .approval import ApprovalWidget
from .hitl_panel import HITLPanel

__all__ = ["ResumeWidget", "decision_widget"]


class ResumeWidget(DecisionView):
    """A session with nothing to decide that can go on (paused, or forked at a node):
    Resume continues it (an empty prompt). When it pauses for a decision (a graph approval,
    a tool batch) the widget turns into the widget that decides it (``next``, shown in its
    place). ``agent`` may be an AgentTable: the session's version resumes (R62), and one
    it does not serve is said, with Resume off. Code twin: ``resume()``; what the button
    sends: ``click("resume")``."""

    _esm = esm("resume")
    can_resume = t.Bool(False).tag(sync=True)
    """True while Resume may be clicked."""
    next = widget_ref()
    """The decision widget this one turned into when the session paused for a decision."""
    note = t.Unicode("").tag(sync=True)
    """Said above that widget (HTML)."""

    def __init__(self, agent: Any, session: AgentSession, *, store: Any = None) -> None:
        self.runner = ResumeRunner(self, agent, session, store)
        self.runner.state_hook = self._enable
        self._enable()
        self.runner.refresh()
        self.runner.settle()
        super().__init__()  # opens the widget with everything above in its first state

    def _actions(self) -> dict[str, Any]:
        return {"resume": self._on_resume}

    def _enable(self) -> None:
        r = self.runner
        s = r.session
        done = s.status in ("done", "failed")
        self.can_resume = not (r.busy or done or r.unserved)
        decides = bool(s.hitl.tasks) or hasattr(r.shape, "spec")
        if self.next is None and not r.busy and s.is_pending and decides:
            self._turn_into_decision()

    def _turn_into_decision(self) -> None:
        r = self.runner
        widget = decision_widget(r.agent, r.session, store=r.store)
        widget.runner.start_polling()
        r.stop_polling()
        widget.observe(lambda _change: self._bump(), names=["revision"])  # marimo's cells
        self.note = "<div class='im-ask'><b>Paused for a decision</b>: decide it here.</div>"
        self.next = widget

    @property
    def active(self) -> Any:
        """The widget that moves the session on now: this one, or the one it turned into."""
        if self.next is None:
            return self
        return self.next.active if isinstance(self.next, ResumeWidget) else self.next

    def _still_open(self) -> bool:
        return self.runner.session.status not in ("done", "failed")

    def _on_resume(self, _fields: dict[str, Any]) -> None:
        self._act("Resume", lambda: _nothing)

    def resume(self) -> Any:
        """Code twin of Resume: continue the session, return the response."""
        return self.runner.run_now(_nothing)

    def __repr__(self) -> str:
        s = self.runner.session
        return visible(f"<ResumeWidget {s.session_id}: {s.status}>")


def _nothing(_session: AgentSession) -> None:
    """The decision of a plain resume: none."""


def decision_widget(agent: Any, session: AgentSession, *, store: Any = None) -> Any:
    """The widget that moves ``session`` on: an HITLPanel for a tool batch (even one
    decided already), an ApprovalWidget for a team graph waiting for approval, else a
    ResumeWidget (a paused session, a fork taken at a node, a generic pending). ``agent``
    may be an AgentTable: the widget resumes the session's version (R62)."""
    if session.hitl.tasks:
        return HITLPanel(agent, session, store=store)
    if session.is_pending and hasattr(shape_of(agent, session), "spec"):
        return ApprovalWidget(agent, session, store=store)
    return ResumeWidget(agent, session, store=store)
