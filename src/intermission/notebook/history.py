"""History: scrub a session's checkpoints and fork from any of them (R45, R59)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import Any

import traitlets as t

from .._text import visible
from ..core.fork import EFFECTS
from ..core.history import Checkpoint
from ..core.session import AgentSession
from ..errors import UsageError
from ._html import esc
from ._widget import View, esm, widget_ref
from .graph_view import GraphView
from .resume import decision_widget
from .settings import settings
from .timeline import render_timeline

__all__ = ["History"]

_EFFECT_LABELS = {
    "shared": "shared — an effect runs once in the family",
    "dry-run": "dry-run — preview: no tool or new effect runs",
    "separate": "separate — a ledger of its own (harmless tools only)",
}


def _when(at_ms: float) -> str:
    stamp = _dt.datetime.fromtimestamp(at_ms / 1000, _dt.timezone.utc)
    return stamp.strftime("%H:%M:%S UTC")


class History(View):
    """A slider over ``session.history``: at each checkpoint the graph as it stood (for
    a team) and the timeline up to that point. **Fork from here** makes a fork at the
    shown checkpoint (``effects``: shared, dry-run or separate; saved in ``store`` when
    given) and opens it below in the widget that moves it on — an ApprovalWidget, an
    HITLPanel, or a ResumeWidget. The session itself never changes.

    Code twins: ``show(index)`` (the slider), ``fork_from_here(new_id, effects=...)``
    (the button; returns the opened widget) and ``code_twin(...)`` for the cell after.
    What the page sends: ``click("show", index=)``, ``click("fork", fork_id=, effects=)``.
    """

    _esm = esm("history")
    indices = t.List(t.Int()).tag(sync=True)
    """The checkpoints' indices, oldest first (the slider's stops)."""
    index = t.Int(0).tag(sync=True)
    """The checkpoint on show (setting it draws that one, as the slider does)."""
    label = t.Unicode("").tag(sync=True)
    """What the checkpoint on show is (HTML)."""
    graph = t.Unicode("").tag(sync=True)
    """The graph as it stood then, for a team (HTML with SVG)."""
    timeline = t.Unicode("").tag(sync=True)
    """The timeline up to then (HTML)."""
    fork_id = t.Unicode("").tag(sync=True)
    """The Fork id field (the next free name by default)."""
    effects = t.Unicode("shared").tag(sync=True)
    """How the fork shares effects: shared, dry-run or separate."""
    effect_options = t.List(t.List(t.Unicode())).tag(sync=True)
    """The Effects choices: ``[key, label]``."""
    can_fork = t.Bool(False).tag(sync=True)
    """True while Fork from here may be clicked."""
    opened = widget_ref()
    """The widget of the newest fork made here."""
    opened_title = t.Unicode("").tag(sync=True)
    """Said above that widget (HTML)."""

    def __init__(self, agent: Any, session: AgentSession | str, *, store: Any = None) -> None:
        if isinstance(session, str):
            if store is None:
                raise UsageError("History(agent, session_id) needs store=... to load it from")
            session = store.load(session)
        if not callable(getattr(session, "fork", None)):
            raise UsageError(f"History takes a session, not {type(session).__name__}")
        self.agent = agent
        self.session: Any = session
        self.store = store
        self._checkpoints: list[Checkpoint] = []
        self.forks: list[Any] = []
        """The forks made here, oldest first."""
        self._current: Any = None
        self.clicked = False
        """True once a person clicked Fork from here."""
        self.effect_options = [[key, label] for key, label in _EFFECT_LABELS.items()]
        self.observe(lambda _c: self._draw(), names=["index"])
        self.refresh()
        super().__init__()  # opens the widget with everything above in its first state

    def _actions(self) -> dict[str, Any]:
        return {"show": self._on_show, "fork": self._on_fork}

    @property
    def current(self) -> Any:
        """The widget that moves the newest fork on now: the one opened for it, or the
        decision widget a Resume turned it into when it paused again (None before a fork)."""
        widget = self._current
        return getattr(widget, "active", widget)

    # -- reading the history -----------------------------------------------------------
    @property
    def checkpoints(self) -> list[Checkpoint]:
        """The session's checkpoints, oldest first (as of the last :meth:`refresh`)."""
        return list(self._checkpoints)

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The checkpoint on show."""
        return next((cp for cp in self._checkpoints if cp.index == self.index), None)

    def refresh(self) -> None:
        """Read the session again (from the store when given) and redraw; the slider
        moves to the newest checkpoint."""
        if self.store is not None:
            self.session = self.store.load(self.session.session_id)
        self._checkpoints = self.session.history  # (walks the patches: once, here)
        cps = self._checkpoints
        self.fork_id = self._free_id()
        self.indices = [cp.index for cp in cps]
        before = self.index
        if cps:
            self.index = cps[-1].index
        if self.index == before:
            self._draw()  # (a new value is drawn by the index's observer)

    def show(self, index: int) -> Checkpoint:
        """Code twin of the slider: show checkpoint ``index``; returns it."""
        found = next((cp for cp in self._checkpoints if cp.index == index), None)
        if found is None:
            kept = [cp.index for cp in self._checkpoints]
            raise UsageError(f"no checkpoint {index} (kept: {kept})")
        if self.index == index:
            self._draw()
        self.index = index  # (the observer draws a new value)
        return found

    def at(self, index: int | None = None) -> Any:
        """The session as it stood at checkpoint ``index`` (default: the one on show), as
        a throwaway fork that is never saved and runs nothing."""
        at = self.index if index is None else index
        sid = self.session.session_id
        return self.session.fork(f"{sid}@{at}", at, effects="separate")

    def _draw(self) -> None:
        cp = self.checkpoint
        if cp is None:
            self.label = (
                f"<i>session {esc(self.session.session_id)} has no checkpoint yet: run it "
                "first (every request end takes one)</i>"
            )
            self.graph = self.timeline = ""
            self.can_fork = False
            return
        self.can_fork = True
        where = ", ".join(cp.positions) or "—"
        waits = (
            f" · <span class='im-reason-text'>waiting: {esc(cp.pending_reason)}</span>"
            if cp.pending_reason
            else ""
        )
        newest = cp.index == self._checkpoints[-1].index
        label = (
            f"<b>checkpoint {cp.index}</b> of {esc(self.session.session_id)}"
            f"{' (the newest)' if newest else ''} · {_when(cp.at)} · <b>{esc(cp.status)}</b>"
            f" at {esc(where)}{waits} · {cp.events} events"
        )
        then = self.at(cp.index)
        graph = None
        if hasattr(self.agent, "spec"):
            graph = GraphView(self.agent, then).card()
        timeline = render_timeline(list(then.events), session_id=then.session_id)
        # everything is worked out before anything changes on the page, so the label never
        # names a checkpoint while the graph (rendered by dot, the slow part) shows another
        if graph is not None:
            self.graph = graph
        self.timeline = timeline
        self.label = label

    # -- forking -------------------------------------------------------------------------
    def _free_id(self) -> str:
        sid = self.session.session_id
        taken = {f.session_id for f in self.forks}
        n = len(self.forks) + 1
        while f"{sid}.fork{n}" in taken:
            n += 1
        return f"{sid}.fork{n}"

    def fork_from_here(self, new_session_id: str | None = None, effects: str | None = None) -> Any:
        """Code twin of Fork from here: fork at the checkpoint on show and open the fork
        below; returns its widget (``.session`` is the fork)."""
        new_id = new_session_id if new_session_id is not None else self.fork_id.strip()
        how = effects if effects is not None else self.effects
        if how not in EFFECTS:
            raise UsageError(f"effects is one of {EFFECTS}, not {how!r}")
        cp = self.checkpoint
        if cp is None:
            raise UsageError("there is no checkpoint to fork from yet")
        if self.store is not None:
            fork = self.store.fork(self.session.session_id, new_id, cp.index, effects=how)
        else:
            fork = self.session.fork(new_id, cp.index, effects=how)
        widget = decision_widget(self.agent, fork, store=self.store)
        self.forks.append(fork)
        self._current = widget
        widget.runner.start_polling()
        widget.observe(lambda _change: self._settled(), names=["revision"])  # marimo's cells
        self.opened_title = (
            f"<h4>Fork {esc(new_id)} — from checkpoint {cp.index}, effects {esc(how)}</h4>"
        )
        self.opened = widget
        self.fork_id = self._free_id()
        self.status = self.hint = ""
        self._settled()
        return widget

    def _settled(self) -> None:
        """The newest fork's outcome, for the page (and marimo's cells) to pick up."""
        current = self.current
        self.outcome = {
            "forks": [f.session_id for f in self.forks],
            "current": getattr(current, "outcome", None),
        }
        self._bump()

    # -- what the page sends ---------------------------------------------------------------
    def _on_show(self, fields: dict[str, Any]) -> None:
        index = fields.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            self.show(index)

    def _on_fork(self, fields: dict[str, Any]) -> None:
        for name in ("fork_id", "effects"):
            value = self._text(fields, name)
            if value is not None:
                setattr(self, name, value)
        self.fork_from_here()
        self.clicked = True

    def code_twin(self, fork: Callable[[History], Any]) -> Any:
        """The cell after the History: when a person clicked Fork from here, the widget
        of that fork; on autopilot ``fork(history)`` (say ``h.fork_from_here(...)``);
        else a hint where to click, and None."""
        if self.clicked and self.current is not None:
            return self.current
        if settings.autopilot:
            return fork(self)
        self.hint = (
            "<div class='im-hint'>&#8593; Move the slider to a checkpoint and click <b>Fork "
            "from here</b>; decide the fork in the widget that opens. Then run the cells below "
            "again.</div>"
        )
        return None

    def __repr__(self) -> str:
        cps, forks = len(self.checkpoints), len(self.forks)
        sid = visible(self.session.session_id)
        return f"<History {sid}: {cps} checkpoint(s), {forks} fork(s)>"
