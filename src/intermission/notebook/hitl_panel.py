"""HITLPanel: decide pending tool calls one by one (by call UUID), with editable
arguments, then resume (R36)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import ipywidgets as w

from ..core.session import AgentSession
from ..decisions import HITLDecision, HITLTask
from ..errors import InvalidDecisionError
from ..hitl import HITL
from ._html import esc
from ._runner import ResumeRunner

__all__ = ["HITLPanel"]


class _Row:
    def __init__(self, panel: HITLPanel, task: HITLTask) -> None:
        self.task = task
        self.head = w.HTML(
            f"<b>{esc(task.tool_name)}</b> <code>{esc(task.call_uuid)}</code> — {esc(task.reason)}"
        )
        self.args = w.Textarea(value=json.dumps(task.args, indent=1), rows=3)
        self.args.add_class("hitl-args")
        self.buttons = {}
        for verdict, style in (("approve", "success"), ("reject", "danger"), ("skip", "warning")):
            b = w.Button(description=verdict.title(), button_style=style)
            b.add_class(f"hitl-{verdict}")
            b.on_click(lambda _b, v=verdict: panel._click(self.task.call_uuid, v))
            self.buttons[verdict] = b
        self.state = w.HTML()
        self.box = w.VBox([self.head, self.args, w.HBox([*self.buttons.values(), self.state])])


class HITLPanel(w.VBox):
    """One row per pending tool call: arguments (editable JSON), reason, Approve / Reject /
    Skip; when every row is decided the agent resumes. Code twins: ``approve(uuid)``,
    ``reject(uuid, reason)``, ``skip(uuid)``, ``decide_all(...)``."""

    def __init__(
        self, agent: Any, session: AgentSession, *, store: Any = None, reviewer: str = ""
    ) -> None:
        self.runner = ResumeRunner(agent, session, store)
        self.reviewer = w.Text(value=reviewer, description="Reviewer")
        self.approve_all_button = w.Button(description="Approve all", button_style="success")
        self.approve_all_button.add_class("hitl-approve-all")
        self.approve_all_button.on_click(lambda _b: self._click_all())
        self.rows_box = w.VBox()
        self._decided: dict[str, HITLDecision] = {}
        self.rows: dict[str, _Row] = {}
        r = self.runner
        r.state_hook = self._build_rows
        super().__init__(
            [self.reviewer, self.rows_box, self.approve_all_button, r.status, r.result, r.timeline]
        )
        self.add_class("hitl-panel")
        self._build_rows()
        r.refresh()

    @property
    def session(self) -> AgentSession:
        """The session (a fresh object after each resume through a store)."""
        return self.runner.session

    def _build_rows(self) -> None:
        self._decided = {}
        self.rows = {t.call_uuid: _Row(self, t) for t in HITL.pending_tasks(self.runner.session)}
        self.rows_box.children = [row.box for row in self.rows.values()]
        self.runner.buttons = [b for row in self.rows.values() for b in row.buttons.values()]
        self.runner.buttons.append(self.approve_all_button)
        self.approve_all_button.disabled = not self.rows

    def _decision(
        self, call_uuid: str, verdict: str, args: dict[str, Any] | None, note: str | None
    ) -> HITLDecision:
        row = self.rows.get(call_uuid)
        if row is None:
            raise InvalidDecisionError(
                f"no pending row for call {call_uuid!r}", call_uuid=call_uuid
            )
        if verdict == "approve":
            if args is None:
                try:
                    args = json.loads(row.args.value)
                except ValueError as exc:
                    raise InvalidDecisionError(f"arguments are not JSON: {exc}") from None
            decision = HITLDecision.approve()
            if args != row.task.args:
                decision = decision.modified_args(dict(args or {}))
            if note:
                decision = decision.comment(note)
        elif verdict == "reject":
            decision = HITLDecision.reject(note)
        else:
            decision = HITLDecision.skip(note)
        if self.reviewer.value:
            decision = decision.reviewer(self.reviewer.value)
        # validate now against the session (nothing is written until all rows are decided)
        HITL._check(self.runner.session, call_uuid, decision)
        return decision

    def _record(self, call_uuid: str, decision: HITLDecision) -> bool:
        self._decided[call_uuid] = decision
        row = self.rows[call_uuid]
        row.state.value = f"<i>{esc(decision.verdict)}</i>"
        for b in row.buttons.values():
            b.disabled = True
        return len(self._decided) == len(self.rows)

    def _submit_action(self) -> Any:
        decisions = dict(self._decided)
        return lambda s: HITL.submit_all(s, decisions)

    def _click(self, call_uuid: str, verdict: str) -> None:
        try:
            decision = self._decision(call_uuid, verdict, None, None)
        except Exception as exc:
            self.runner.status.value = f"<span style='color:#c62828'>error: {esc(exc)}</span>"
            return
        if self._record(call_uuid, decision):
            self.runner.run_in_background(self._submit_action())

    def _click_all(self) -> None:
        for uuid in self.rows:
            if uuid not in self._decided:
                self._decided[uuid] = self._decision(uuid, "approve", None, None)
        self.runner.run_in_background(self._submit_action())

    # -- code twins ------------------------------------------------------------------
    def _twin(self, call_uuid: str, verdict: str, args: Any, note: str | None) -> Any:
        if self._record(call_uuid, self._decision(call_uuid, verdict, args, note)):
            return self.runner.run_now(self._submit_action())
        return None

    def approve(
        self, call_uuid: str, args: dict[str, Any] | None = None, comment: str | None = None
    ) -> Any:
        """Approve one call (optionally with edited args); resumes when all are decided."""
        return self._twin(call_uuid, "approve", args, comment)

    def reject(self, call_uuid: str, reason: str | None = None) -> Any:
        """Reject one call; resumes when all are decided."""
        return self._twin(call_uuid, "reject", None, reason)

    def skip(self, call_uuid: str, comment: str | None = None) -> Any:
        """Skip one call; resumes when all are decided."""
        return self._twin(call_uuid, "skip", None, comment)

    def decide_all(self, decisions: str | Mapping[str, str] = "approve") -> Any:
        """Decide every row (one verdict, or ``{uuid: verdict}``) and resume."""
        if not self.rows:
            s = self.runner.session
            waits = f" (it waits for: {s.pending_reason})" if s.is_pending else ""
            raise InvalidDecisionError(
                f"session {s.session_id!r} has no pending tool calls to decide{waits}; "
                "a graph approval is decided with ApprovalWidget or decide_graph"
            )
        for uuid in list(self.rows):
            if uuid in self._decided:
                continue
            verdict = decisions if isinstance(decisions, str) else decisions[uuid]
            self._decided[uuid] = self._decision(uuid, verdict, None, None)
        return self.runner.run_now(self._submit_action())

    def wait(self, timeout: float | None = 30.0) -> Any:
        """Wait for a button-started resume; returns the response."""
        return self.runner.wait(timeout)

    def __repr__(self) -> str:
        s = self.runner.session
        return f"<HITLPanel {s.session_id}: {len(self.rows)} pending call(s)>"
