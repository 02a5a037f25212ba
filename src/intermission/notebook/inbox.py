"""Inbox: the pending sessions of a store; open one, decide, resume, save (R37)."""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from ..errors import UsageError
from ._html import esc
from .approval import ApprovalWidget
from .graph_view import GraphView
from .hitl_panel import HITLPanel

__all__ = ["Inbox"]


class Inbox(w.VBox):
    """A table of ``store.pending()``; pick a session to see its graph and request and
    decide it. ``agents`` maps agent names to agents (or factories) that can resume."""

    def __init__(self, store: Any, agents: dict[str, Any], *, limit: int = 50) -> None:
        self.store = store
        self.agents = agents
        self.limit = limit
        self.table = w.HTML()
        self.picker = w.Dropdown(description="Session")
        self.open_button = w.Button(description="Open", button_style="primary")
        self.open_button.add_class("inbox-open")
        self.open_button.on_click(lambda _b: self.open_session(self.picker.value))
        self.refresh_button = w.Button(description="Refresh")
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.detail = w.VBox()
        self.current: Any = None
        super().__init__(
            [self.table, w.HBox([self.picker, self.open_button, self.refresh_button]), self.detail]
        )
        self.add_class("inbox")
        self.refresh()

    def refresh(self) -> list[Any]:
        """Reload the pending list."""
        items: list[Any] = self.store.pending(limit=self.limit)
        rows = "".join(
            f"<tr><td>{esc(p.session_id)}</td><td>{esc(p.agent)}</td><td>{len(p.tasks)}</td>"
            f"<td>{esc(p.reason)}</td></tr>"
            for p in items
        )
        self.table.value = (
            "<table class='im-inbox'><tr><th>session</th><th>agent</th><th>tasks</th>"
            f"<th>reason</th></tr>{rows}</table>"
            if items
            else "<i>no pending sessions</i>"
        )
        self.picker.options = [p.session_id for p in items]
        return items

    def _agent(self, name: str | None) -> Any:
        agent = self.agents.get(name or "")
        if agent is None:
            raise UsageError(
                f"no agent named {name!r} in this inbox (known: {sorted(self.agents)})"
            )
        return agent if hasattr(agent, "prompt") else agent()  # an agent, or a factory

    def open_session(self, session_id: str) -> Any:
        """Show one session and return its decision widget (ApprovalWidget or HITLPanel)."""
        session = self.store.load(session_id)
        agent = self._agent(session.agent)
        if session.hitl.tasks:  # a tool batch, even when someone decided it already
            widget: Any = HITLPanel(agent, session, store=self.store)
        else:
            widget = ApprovalWidget(agent, session, store=self.store)
        graph = w.HTML()
        if hasattr(agent, "spec"):
            bundle = GraphView(agent, session)._repr_mimebundle_()
            graph.value = bundle.get("image/svg+xml") or bundle.get("text/html", "")
        self.detail.children = [graph, widget]
        self.current = widget
        return widget

    def __repr__(self) -> str:
        return f"<Inbox {len(self.picker.options)} pending session(s)>"
