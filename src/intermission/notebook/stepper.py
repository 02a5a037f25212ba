"""Stepper: advance a graph N nodes at a time and redraw it, for teaching (R37a, R59)."""

from __future__ import annotations

from typing import Any

import traitlets as t

from .._text import visible
from ..core.engine import FlowEngine
from ..core.session import InMemoryAgentSession
from ..core.spec import GraphSpec
from ..errors import NothingToResumeError
from ._html import esc
from ._widget import View, esm
from .graph_view import GraphView

__all__ = ["Stepper"]


_WORDS = {
    "ready": "Ready: Step runs the next node(s)",
    "reset": "Reset: back at the start",
    "budget": "Stopped after the steps asked for: Step or Run goes on",
    "done": "Finished: every branch reached its end (Reset to start again)",
    "parked": "A branch parked itself (interrupt): Step or Run tries it again",
    "stopped": "Paused: the session waits",
    "pending": "Paused: the session waits",
}


class Stepper(View):
    """Step / Run / Reset over a GraphSpec (FlowEngine) or a TeamAgent (``prompt`` starts
    it). Stepping a finished run does nothing and says so (no error), so the cells after a
    Stepper work whatever was clicked. Code twins: ``step(n)``, ``run()``, ``reset()``;
    what the buttons send: ``click("step", n=)``, ``click("run")``, ``click("reset")``."""

    _esm = esm("stepper")
    steps = t.Int(1).tag(sync=True)
    """The Steps box: how many nodes Step advances."""
    graph = t.Unicode("").tag(sync=True)
    """The graph with the run's state (HTML with SVG)."""

    def __init__(
        self, agent_or_spec: Any, session: InMemoryAgentSession | None = None, *, prompt: str = ""
    ) -> None:
        self.target = agent_or_spec
        self.session = session or InMemoryAgentSession.of("stepper")
        self.prompt = prompt
        self._initial = dict(self.session.context.data)
        self._started = False
        self._draw("ready")
        super().__init__()  # opens the widget with everything above in its first state

    def _actions(self) -> dict[str, Any]:
        return {"step": self._on_step, "run": lambda _f: self._busy_with(self.run),
                "reset": lambda _f: self._busy_with(self.reset)}  # fmt: skip

    def _on_step(self, fields: dict[str, Any]) -> None:
        n = fields.get("n")
        if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 1000:
            self.steps = n
        self._busy_with(self.step)

    def _busy_with(self, work: Any) -> None:
        self.busy = True
        try:
            work()
        finally:
            self.busy = False

    def _draw(self, status: str) -> None:
        self.graph = GraphView(self.target, self.session).card()
        positions = ", ".join(self.session.context.trace.positions())
        words = _WORDS.get(status, status)
        if status in ("stopped", "pending") and self.session.pending_reason:
            words = f"{words}: {self.session.pending_reason}"
        if positions:
            where = f"next node(s): {esc(positions)}"
        elif status in ("ready", "reset"):
            where = "next node(s): the start"
        else:
            where = "nothing left to run"
        self.status = f"<b>{esc(words)}</b> · {where}"
        self.outcome = {"status": status, "next": list(self.session.context.trace.positions())}
        self._bump()

    def step(self, n: int | None = None) -> str:
        """Advance ``n`` nodes (default: the Steps box); returns the run status."""
        steps = n or int(self.steps)
        if isinstance(self.target, GraphSpec):
            try:
                status: str = FlowEngine().eval(self.target, self.session.context, steps).status
            except NothingToResumeError:  # it ran to its end already (a click, say)
                status = "done"
        else:
            prompt = None if self._started else self.prompt
            self.target.step(self.session, steps, prompt)
            self._started = True
            status = self.session.status
        self._draw(status)
        return status

    def run(self) -> str:
        """Run to the end (or the next pause)."""
        return self.step(10_000)

    def reset(self) -> None:
        """Forget positions and data: start again from the start node."""
        ctx = self.session.context
        ctx.trace.clear()
        ctx.data.clear()
        ctx.data.update(self._initial)
        self.session.pending(False, None)
        self.session.traces.clear()
        self._started = False
        self._draw("reset")

    def __repr__(self) -> str:
        positions = ", ".join(self.session.context.trace.positions()) or "-"
        return visible(f"<Stepper {self.session.session_id}: next {positions}>")
