"""ApprovalWidget: decide a graph approval (the seed's ``approval.decision``) and resume
(R35)."""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from ..core.session import AgentSession
from ..hitl.graph import ApprovalKeys, decide_graph
from ._html import esc, pre_json
from ._runner import ResumeRunner

__all__ = ["ApprovalWidget"]


class ApprovalWidget(w.VBox):
    """Shows the pending reason and request; Approve / Reject write the decision keys
    (``approval.decision``/``operator``/``time``/``reason``) and resume the agent.

    ``approve()`` and ``reject(reason)`` do the same from code and return the response.
    """

    def __init__(
        self,
        agent: Any,
        session: AgentSession,
        *,
        store: Any = None,
        keys: ApprovalKeys | None = None,
        approvers: Any = None,
        reviewer: str = "",
    ) -> None:
        self.approval_keys = keys or ApprovalKeys()
        self.approvers = approvers
        self.runner = ResumeRunner(agent, session, store)
        self.request = w.HTML()
        self.operator = w.Text(value=reviewer, description="Reviewer", placeholder="your name")
        self.comment = w.Textarea(description="Comment", placeholder="why (required to reject)")
        self.comment.add_class("approval-comment")
        self.approve_button = w.Button(description="Approve", button_style="success", icon="check")
        self.approve_button.add_class("approval-approve")
        self.reject_button = w.Button(description="Reject", button_style="danger", icon="times")
        self.reject_button.add_class("approval-reject")
        self.approve_button.on_click(
            lambda _b: self.runner.run_in_background(self._approve_action())
        )
        self.reject_button.on_click(lambda _b: self.runner.run_in_background(self._reject_action()))
        self.runner.buttons = [self.approve_button, self.reject_button]
        self.runner.state_hook = self._show_request
        r = self.runner
        super().__init__(
            [
                self.request, self.operator, self.comment,
                w.HBox([self.approve_button, self.reject_button]),
                r.status, r.result, r.graph, r.timeline,
            ]
        )  # fmt: skip
        self.add_class("approval-widget")
        self._show_request()
        r.refresh()

    @property
    def session(self) -> AgentSession:
        """The session (a fresh object after each resume through a store)."""
        return self.runner.session

    def _show_request(self) -> None:
        s = self.runner.session
        if s.is_pending:
            req = s.context.get(self.approval_keys.request)
            self.request.value = f"<b>Waiting for a decision:</b> {esc(s.pending_reason)}" + (
                f"<div>Request:</div>{pre_json(req)}" if req is not None else ""
            )
        else:
            self.request.value = f"<b>Nothing to decide</b> (session {esc(s.status)})"
        for b in self.runner.buttons:
            b.disabled = not s.is_pending

    def _approve_action(self, reviewer: str | None = None, comment: str | None = None) -> Any:
        who = reviewer if reviewer is not None else (self.operator.value or None)
        note = comment if comment is not None else (self.comment.value or None)
        return lambda s: decide_graph(
            s,
            "APPROVE",
            reviewer=who,
            comment=note,
            keys=self.approval_keys,
            approvers=self.approvers,
        )

    def _reject_action(self, reason: str | None = None, reviewer: str | None = None) -> Any:
        who = reviewer if reviewer is not None else (self.operator.value or None)
        why = reason if reason is not None else (self.comment.value or "rejected")
        return lambda s: decide_graph(
            s, "REJECT", reviewer=who, reason=why, keys=self.approval_keys, approvers=self.approvers
        )

    def approve(self, reviewer: str | None = None, comment: str | None = None) -> Any:
        """Code twin of Approve: decide, resume, return the response."""
        return self.runner.run_now(self._approve_action(reviewer, comment))

    def reject(self, reason: str | None = None, reviewer: str | None = None) -> Any:
        """Code twin of Reject."""
        return self.runner.run_now(self._reject_action(reason, reviewer))

    def wait(self, timeout: float | None = 30.0) -> Any:
        """Wait for a button-started resume; returns the response."""
        return self.runner.wait(timeout)

    def __repr__(self) -> str:
        s = self.runner.session
        state = f"waiting: {s.pending_reason}" if s.is_pending else s.status
        return f"<ApprovalWidget {s.session_id}: {state}>"
