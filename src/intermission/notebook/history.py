"""History: scrub a session's checkpoints and fork from any of them (R45)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import Any

import ipywidgets as w

from .._text import visible
from ..core.fork import EFFECTS
from ..core.history import Checkpoint
from ..core.session import AgentSession
from ..errors import UsageError
from ._html import CSS, esc
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


class History(w.VBox):
    """A slider over ``session.history``: at each checkpoint the graph as it stood (for
    a team) and the timeline up to that point. **Fork from here** makes a fork at the
    shown checkpoint (``effects``: shared, dry-run or separate; saved in ``store`` when
    given) and opens it below in the widget that moves it on — an ApprovalWidget, an
    HITLPanel, or a ResumeWidget. The session itself never changes.

    Code twins: ``show(index)`` (the slider), ``fork_from_here(new_id, effects=...)``
    (the button; returns the opened widget) and ``code_twin(...)`` for the cell after.
    """

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
        self.slider = w.IntSlider(description="Checkpoint", continuous_update=False)
        self.slider.add_class("history-slider")
        self.slider.observe(lambda _c: self._draw(), names=["value"])
        self.label = w.HTML()
        self.label.add_class("history-label")
        self.graph = w.HTML()
        self.graph.add_class("history-graph")
        self.timeline = w.HTML()
        self.timeline.add_class("history-timeline")
        self.fork_id = w.Text(description="Fork id")
        self.fork_id.add_class("history-fork-id")
        self.effects = w.Dropdown(
            description="Effects",
            options=[(label, key) for key, label in _EFFECT_LABELS.items()],
            value="shared",
            layout=w.Layout(width="32em"),
        )
        self.effects.add_class("history-effects")
        self.fork_button = w.Button(description="Fork from here", button_style="primary",
                                    icon="code-fork")  # fmt: skip
        self.fork_button.add_class("history-fork")
        self.fork_button.on_click(lambda _b: self._fork_clicked())
        self.status = w.HTML()
        self.status.add_class("history-status")
        self.hint = w.HTML()
        self.opened = w.VBox()
        self.opened.add_class("history-opened")
        super().__init__(
            [
                w.HTML(CSS), self.slider, self.label, self.graph, self.timeline,
                w.HBox([self.fork_id, self.effects, self.fork_button]),
                self.hint, self.status, self.opened,
            ]
        )  # fmt: skip
        self.add_class("im-history")
        self.refresh()

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
        return next((cp for cp in self._checkpoints if cp.index == self.slider.value), None)

    def refresh(self) -> None:
        """Read the session again (from the store when given) and redraw; the slider
        moves to the newest checkpoint."""
        if self.store is not None:
            self.session = self.store.load(self.session.session_id)
        self._checkpoints = self.session.history  # (walks the patches: once, here)
        cps = self._checkpoints
        self.fork_id.value = self._free_id()
        before = self.slider.value
        with self.slider.hold_trait_notifications():
            if cps:
                # max first from a low min, so min never passes max on the way
                self.slider.min, self.slider.max = 0, cps[-1].index
                self.slider.min = cps[0].index
                self.slider.value = cps[-1].index
            self.slider.disabled = len(cps) < 2
        if self.slider.value == before:
            self._draw()  # (a new value is drawn by the slider's observer)

    def show(self, index: int) -> Checkpoint:
        """Code twin of the slider: show checkpoint ``index``; returns it."""
        found = next((cp for cp in self._checkpoints if cp.index == index), None)
        if found is None:
            kept = [cp.index for cp in self._checkpoints]
            raise UsageError(f"no checkpoint {index} (kept: {kept})")
        if self.slider.value == index:
            self._draw()
        self.slider.value = index  # (the observer draws a new value)
        return found

    def at(self, index: int | None = None) -> Any:
        """The session as it stood at checkpoint ``index`` (default: the one on show), as
        a throwaway fork that is never saved and runs nothing."""
        at = self.slider.value if index is None else index
        sid = self.session.session_id
        return self.session.fork(f"{sid}@{at}", at, effects="separate")

    def _draw(self) -> None:
        cp = self.checkpoint
        if cp is None:
            self.label.value = (
                f"<i>session {esc(self.session.session_id)} has no checkpoint yet: run it "
                "first (every request end takes one)</i>"
            )
            self.graph.value = self.timeline.value = ""
            self.fork_button.disabled = True
            return
        self.fork_button.disabled = False
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
            self.graph.value = graph
        self.timeline.value = timeline
        self.label.value = label

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
        new_id = new_session_id if new_session_id is not None else self.fork_id.value.strip()
        how = effects if effects is not None else self.effects.value
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
        self.opened.children = [
            w.HTML(
                f"<h4>Fork {esc(new_id)} — from checkpoint {cp.index}, effects "
                f"{esc(how)}</h4>"
            ),
            widget,
        ]
        self.fork_id.value = self._free_id()
        self.status.value = self.hint.value = ""
        return widget

    def _fork_clicked(self) -> None:
        try:
            self.fork_from_here()
            self.clicked = True
        except Exception as exc:  # shown here; nothing was made
            self.status.value = (
                f"<span class='im-error'>error: "
                f"{esc(type(exc).__name__)}: {esc(exc)}</span>"
            )

    def code_twin(self, fork: Callable[[History], Any]) -> Any:
        """The cell after the History: when a person clicked Fork from here, the widget
        of that fork; on autopilot ``fork(history)`` (say ``h.fork_from_here(...)``);
        else a hint where to click, and None."""
        if self.clicked and self.current is not None:
            return self.current
        if settings.autopilot:
            return fork(self)
        self.hint.value = (
            "<div class='im-hint'>&#8593; Move the slider to a checkpoint and click <b>Fork "
            "from here</b>; decide the fork in the widget that opens. Then run the cells below "
            "again.</div>"
        )
        return None

    def __repr__(self) -> str:
        cps, forks = len(self.checkpoints), len(self.forks)
        sid = visible(self.session.session_id)
        return f"<History {sid}: {cps} checkpoint(s), {forks} fork(s)>"
