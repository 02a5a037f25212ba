"""Inbox: the pending sessions of a store; open one, decide, resume, save (R37, R47, R59)."""

from __future__ import annotations

from typing import Any

import traitlets as t

from .._clock import SYSTEM_CLOCK
from .._concurrency import Ticker, every
from ..agents.table import AgentTable
from ..errors import IntermissionError, UsageError
from ..stores.base import SessionStore
from ._decided import decisions_of, outcome_of
from ._html import esc, expired_html, id_html, plain
from ._widget import View, esm, widget_ref
from .resume import decision_widget
from .settings import settings

__all__ = ["Inbox"]


def _to_decide(item: Any) -> str:
    """What a pending session waits for: its tool calls, a graph approval, or a resume;
    and for approvals with a policy, what they still need."""
    n = len(item.tasks)
    if n:
        what = f"{n} tool call{'s' if n > 1 else ''}"
    else:
        what = "1 approval" if getattr(item, "request", None) is not None else "a resume"
    progress = getattr(item, "progress", None)
    return esc(what) + (f"<div class='im-progress'>{esc(progress)}</div>" if progress else "")


def _version(item: Any, table: AgentTable | None) -> str:
    """The version a pending session paused on (``ops@1``; "—" when it recorded none),
    and, with a table, whether it is served here (R62)."""
    label = getattr(item, "version_label", None)
    version = getattr(item, "agent_version", None)  # (stores that record it, R62)
    if not isinstance(label, str) or not label:
        label = f"{item.agent}@{version}" if item.agent and version else ""
    if not label:
        return "—"
    if table is not None and version and item.agent in table:
        probe = _Paused(item.session_id, item.agent, version)
        if not table.serves(probe):
            return esc(label) + " <span class='im-error'>(not served here)</span>"
    return esc(label)


class _Paused:
    """What a table needs to tell whether it runs a listed session: name and version."""

    def __init__(self, session_id: str, agent: str, agent_version: str) -> None:
        self.session_id = session_id
        self.agent = agent
        self.agent_version = agent_version


class Inbox(View):
    """A live table of ``store.pending()``: the first pending session is preselected; Open
    shows it in the right decision widget (an ApprovalWidget with its graph, an
    HITLPanel, or a ResumeWidget). The table refreshes after every decision made here and every
    ``poll_s`` seconds (``settings.inbox_poll_s``; off on autopilot, and for
    ``poll_s=None``). ``agents`` maps agent names to agents (or factories) that can resume,
    or is an AgentTable (or a dict of lists of versions, oldest first): a session then
    opens on the version it paused under, or a newer one that migrates it (R62); the table
    shows each session's version. Without an agent for a session's name the Inbox lists
    the session but cannot open it.

    Code twins: ``open_session(id)``, ``refresh()``; ``code_twin(...)`` as on the decision
    widgets (``DecisionView``). What the buttons send: ``click("open", session_id=)``,
    ``click("refresh")``.
    """

    _esm = esm("inbox")
    table = t.Unicode("").tag(sync=True)
    """The pending sessions (HTML)."""
    problems = t.Unicode("").tag(sync=True)
    """Rows that cannot be read and sessions stuck on an effect of unknown outcome (HTML,
    under the table: they never hide the others)."""
    options = t.List(t.Dict()).tag(sync=True)
    """The session picker's entries: ``{"id", "label"}``."""
    selected = t.Unicode("").tag(sync=True)
    """The session the picker preselects."""
    detail = widget_ref()
    """The decision widget of the opened session (shown below the table)."""

    def __init__(
        self,
        store: Any,
        agents: dict[str, Any] | AgentTable | None = None,
        *,
        limit: int = 50,
        poll_s: float | str | None = "default",
    ) -> None:
        self._poller: Ticker | None = None
        if not isinstance(store, SessionStore):
            raise UsageError(f"Inbox takes a session store, not {type(store).__name__}")
        if agents is not None and not isinstance(agents, (dict, AgentTable)):
            raise UsageError(f"agents maps agent names to agents, not {type(agents).__name__}")
        if isinstance(agents, dict) and any(isinstance(v, (list, tuple)) for v in agents.values()):
            agents = AgentTable(agents)  # {"ops": [v1, v2]}: versions, oldest first
        self.store = store
        self.agent_table: AgentTable | None = agents if isinstance(agents, AgentTable) else None
        """The agents as a table of versions (None: one agent per name)."""
        self.agents: dict[str, Any] = dict(agents) if isinstance(agents, dict) else {}
        self.limit = limit
        self.poll_s: float | None = settings.inbox_poll_s if isinstance(poll_s, str) else poll_s
        self.current: Any = None
        """The decision widget of the opened session."""
        self.listed: list[str] = []
        """Every session id this inbox has listed as pending, first seen first."""
        self._ids: list[str] = []
        self.refresh()
        super().__init__()  # opens the widget with everything above in its first state
        if self.poll_s and not settings.autopilot:
            self._poller = every(float(self.poll_s), self._poll, name="intermission-inbox")

    def _actions(self) -> dict[str, Any]:
        return {"open": self._on_open, "refresh": lambda _fields: self.refresh()}

    @property
    def pending_ids(self) -> list[str]:
        """The ids of the sessions listed now, newest first (as the table shows them)."""
        return list(self._ids)

    # -- the list --------------------------------------------------------------------
    def refresh(self) -> list[Any]:
        """Re-read the pending list (keeping the selection when it is still pending).
        Rows that cannot be read and sessions stuck on an effect of unknown outcome are
        listed under the table (``self.problems``), never hiding the others."""
        page = self.store.pending(limit=self.limit)
        bad = [(u.session_id, u.why) for u in getattr(page, "unreadable", [])]
        items: list[Any] = []
        for p in page:
            try:
                p.tasks  # noqa: B018 (parsed now: a damaged column is reported, not raised)
            except IntermissionError as exc:
                bad.append((p.session_id, str(exc)))
                continue
            items.append(p)
        stuck = getattr(self.store, "stuck", None)
        self.problems = "".join(
            [f"<div class='im-error'>unreadable: {esc(sid)}: {esc(why)}</div>" for sid, why in bad]
            + [
                f"<div class='im-error'>needs a person: {esc(x.session_id)}: {esc(x.why)} "
                f"(<code>python -m intermission resolve|forget</code>, or the console)</div>"
                for x in (stuck(limit=self.limit) if stuck is not None else [])
            ]
        )
        # judged by the store's clock, like every decision on its sessions
        now = getattr(self.store, "clock", SYSTEM_CLOCK).now_ms()
        rows = "".join(
            f"<tr><td>{esc(p.session_id)}</td><td>{esc(p.agent)}</td>"
            f"<td>{_version(p, self.agent_table)}</td>"
            f"<td>{_to_decide(p)}</td><td>{esc(p.reason)}{expired_html(p.deadline_ms, now)}"
            + "".join(f" {id_html(t.call_uuid)}" for t in p.tasks)
            + "</td></tr>"
            for p in items
        )
        self.table = (
            "<div class='im-inbox'><table><colgroup><col style='width:20%'>"
            "<col style='width:12%'><col style='width:12%'><col style='width:12%'><col>"
            "</colgroup><tr><th>session</th><th>agent</th><th>version</th><th>to decide</th>"
            "<th>reason</th></tr>"
            f"{rows}</table></div>"
            if items
            else "<div class='im-inbox'><i>no pending sessions</i></div>"
        )
        ids = [p.session_id for p in items]
        self.listed += [i for i in ids if i not in self.listed]
        keep = self.selected if self.selected in ids else (ids[0] if ids else "")
        # an id with bidi controls gets a label with them neutralised
        options = [{"id": i, "label": plain(i)} for i in ids]
        if options != self.options:
            self.options = options
        self.selected = keep
        if ids != self._ids:
            self._ids = ids
            self._settled()
        return items

    def _settled(self) -> None:
        """What the inbox shows now, for the page (and marimo's cells) to pick up."""
        opened = self.current.outcome if self.current is not None else None
        self.outcome = {"pending": list(self._ids), "opened": opened}
        self._bump()

    def _poll(self) -> None:
        try:
            if self.current is None or not self.current.runner.busy:
                self.refresh()
            if self.current is not None:
                self.current.runner.sync()  # decided elsewhere: the widget says so
        except Exception:  # the store is away: the next poll tries again
            return

    def close(self) -> None:
        """Stop polling and close the widget."""
        poller = getattr(self, "_poller", None)
        if poller is not None:
            poller.stop(timeout=0)
        super().close()

    # -- opening ---------------------------------------------------------------------
    def _agent(self, name: str | None) -> Any:
        if self.agent_table is not None and name in self.agent_table:
            return self.agent_table  # (the widget picks the session's version from it)
        known = self.agent_table.names() if self.agent_table is not None else sorted(self.agents)
        agent = self.agents.get(name or "")
        if agent is None:
            given = f"it knows {known}" if known else "it was made without agents"
            raise UsageError(
                f"no agent named {name!r} in this inbox ({given}), so it can list the "
                f"session but not resume it: give it one, Inbox(store, {{{name!r}: agent}})"
            )
        return agent if hasattr(agent, "prompt") else agent()  # an agent, or a factory

    def _on_open(self, fields: dict[str, Any]) -> None:
        sid = self._text(fields, "session_id") or self.selected
        if not sid:
            return
        self.status = ""
        self.open_session(sid)

    def open_session(self, session_id: str) -> Any:
        """Show one session and return its decision widget (see ``decision_widget``)."""
        session = self.store.load(session_id)
        agent = self._agent(session.agent)
        widget = decision_widget(agent, session, store=self.store)
        inner = widget.runner.state_hook

        def after() -> None:  # a decision made here refreshes the list next to it
            if inner is not None:
                inner()
            if not widget.runner.busy:
                self.refresh()

        widget.runner.state_hook = after
        widget.observe(lambda _change: self._settled(), names=["revision"])  # marimo's cells
        self.current = widget
        self.detail = widget  # the widget draws the session's graph: one graph
        self.selected = session_id
        self.hint = self.status = ""
        self._settled()  # the cells reading the inbox learn what is open now
        return widget

    # -- code twins ------------------------------------------------------------------
    def _decided_elsewhere(self) -> Any:
        """The first session this inbox listed that is now past its decision (whoever
        decided it: here, another Inbox, the CLI, another kernel), or None."""
        for sid in self.listed:
            try:
                s = self.store.load(sid)
            except Exception:  # deleted since, or the store is away
                continue
            if not s.is_pending and s.status in ("done", "failed") and decisions_of(s):
                return s
        return None

    @property
    def decided(self) -> bool:
        """True once the opened session (or, with none opened, a session this inbox
        listed) was decided and resumed, here or anywhere else."""
        if self.current is not None and self.current.decided:
            return True
        return self.current is None and self._decided_elsewhere() is not None

    def code_twin(self, decide: Any) -> Any:
        """The cell after the Inbox (see :class:`DecisionView`): when a person opened a
        session and decided it, that response; on autopilot ``decide(inbox)``; else a hint."""
        if self.current is not None and self.current.runner.clicked:
            return self.current.runner.wait()
        if self.current is not None:
            self.current.runner.sync()
            if self.current.runner.decided_elsewhere:
                return outcome_of(self.current.runner.session)
        else:
            done = self._decided_elsewhere()
            if done is not None:
                self.refresh()
                return outcome_of(done)
        if settings.autopilot:
            return decide(self)
        self.hint = (
            "<div class='im-hint'>&#8593; Pick a session, click <b>Open</b> and decide it above. "
            "Then run the cells below again.</div>"
        )
        return None

    def __repr__(self) -> str:
        return f"<Inbox {len(getattr(self, '_ids', []))} pending session(s)>"
