"""Moving a session on from the notebook: the right decision widget for it, and a plain
Resume for a session with nothing to decide."""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from ..core.session import AgentSession
from ._html import CSS
from ._runner import CodeTwins, ResumeRunner
from .approval import ApprovalWidget
from .hitl_panel import HITLPanel

__all__ = ["ResumeWidget", "decision_widget"]


class ResumeWidget(CodeTwins, w.VBox):
    """A session with nothing to decide that can go on (paused, or forked at a node):
    Resume continues it (an empty prompt). When it pauses for a decision (a graph approval,
    a tool batch) the widget turns into the widget that decides it (``next``, shown in its
    place). Code twin: ``resume()``."""

    def __init__(self, agent: Any, session: AgentSession, *, store: Any = None) -> None:
        self.next: Any = None
        """The decision widget this one turned into when the session paused for a decision."""
        self.runner = ResumeRunner(agent, session, store)
        self.resume_button = w.Button(description="Resume", button_style="primary", icon="play")
        self.resume_button.add_class("history-resume")
        self.resume_button.on_click(lambda _b: self._click())
        self.runner.buttons = []
        self.runner.state_hook = self._enable
        r = self.runner
        super().__init__([w.HTML(CSS), self.resume_button, r.hint, r.status, r.result, r.graph,
                          r.timeline])  # fmt: skip
        self.add_class("resume-widget")
        self._enable()
        r.refresh()
        r.settle()

    def _enable(self) -> None:
        r = self.runner
        s = r.session
        done = s.status in ("done", "failed")
        self.resume_button.disabled = r.busy or done
        decides = bool(s.hitl.tasks) or hasattr(r.agent, "spec")
        if self.next is None and not r.busy and s.is_pending and decides:
            self._turn_into_decision()

    def _turn_into_decision(self) -> None:
        r = self.runner
        widget = decision_widget(r.agent, r.session, store=r.store)
        widget.runner.start_polling()
        r.stop_polling()
        self.next = widget
        note = w.HTML(
            "<div class='im-ask'><b>Paused for a decision</b>: decide it here.</div>"
        )
        self.children = [w.HTML(CSS), note, widget]

    @property
    def active(self) -> Any:
        """The widget that moves the session on now: this one, or the one it turned into."""
        return self if self.next is None else self.next.active if isinstance(
            self.next, ResumeWidget) else self.next  # fmt: skip

    def _click(self) -> None:
        if not self.runner.sync():  # moved on elsewhere: shown now instead
            self.runner.run_in_background(_nothing)

    def resume(self) -> Any:
        """Code twin of Resume: continue the session, return the response."""
        return self.runner.run_now(_nothing)


def _nothing(_session: AgentSession) -> None:
    """The decision of a plain resume: none."""


def decision_widget(agent: Any, session: AgentSession, *, store: Any = None) -> Any:
    """The widget that moves ``session`` on: an HITLPanel for a tool batch (even one
    decided already), an ApprovalWidget for a team graph waiting for approval, else a
    ResumeWidget (a paused session, a fork taken at a node, a generic pending)."""
    if session.hitl.tasks:
        return HITLPanel(agent, session, store=store)
    if session.is_pending and hasattr(agent, "spec"):
        return ApprovalWidget(agent, session, store=store)
    return ResumeWidget(agent, session, store=store)
