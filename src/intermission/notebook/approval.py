"""ApprovalWidget: decide a graph approval (the seed's ``approval.decision``) and resume
(R35, R47)."""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from .._text import visible
from ..core.session import AgentSession
from ..errors import DecisionRefusedError
from ..hitl import HITL
from ..hitl.graph import ApprovalKeys, binding_deadline, decide_graph, graph_ask
from ..principals import Actor, Principal
from ._html import CSS, esc, expired_html, pre_json
from ._runner import CodeTwins, ResumeRunner
from .settings import default_reviewer, notebook_actor, reviewer_or_default

__all__ = ["ApprovalWidget"]


def _needs_reason(session: AgentSession, keys: ApprovalKeys) -> bool:
    """Whether rejecting the approval takes a reason (its policy says; without one, it
    does)."""
    try:
        ask = graph_ask(session, keys)
    except Exception:  # (an unreadable policy key): ask for one
        return True
    return ask is None or ask.policy.reason_to_reject


class ApprovalWidget(CodeTwins, w.VBox):
    """Shows the pending reason and request; Approve / Reject write the decision keys
    (``approval.decision``/``operator``/``time``/``reason``/``comment``) and resume the
    agent. A decision carries the Reviewer (default:
    :func:`~intermission.notebook.settings.default_reviewer`) and an optional Comment;
    Reject also needs a Reason and stays disabled until one is typed.

    An approval whose policy needs more than one decider shows what it has and still
    needs (``1 of 2 approvals (alice, sre) — waiting for one more from sre``); a decision
    here is then a vote, saved, and another view decides the rest. ``principal``: who
    decides here, with roles (default: ``settings.principal``).

    ``approve()`` and ``reject(reason)`` do the same from code and return the response;
    ``code_twin(...)`` is the cell after the widget (see :class:`CodeTwins`).
    """

    def __init__(
        self,
        agent: Any,
        session: AgentSession,
        *,
        store: Any = None,
        keys: ApprovalKeys | None = None,
        approvers: Any = None,
        reviewer: str | None = None,
        principal: Principal | None = None,
    ) -> None:
        self.approval_keys = keys or ApprovalKeys()
        self.approvers = approvers
        self.principal = principal
        self.runner = ResumeRunner(agent, session, store)
        self.request = w.HTML()
        self.request.add_class("approval-request")
        start = reviewer if reviewer is not None else (
            principal.name if principal is not None else default_reviewer()
        )  # fmt: skip
        self.operator = w.Text(value=start, description="Reviewer", placeholder="your name")
        self.operator.add_class("approval-reviewer")
        self.comment = w.Textarea(description="Comment", placeholder="optional note", rows=2)
        self.comment.add_class("approval-comment")
        self.reason = w.Text(description="Reason", placeholder="required to reject")
        self.reason.add_class("approval-reason")
        self.reason.observe(lambda _change: self._show_request(), names=["value"])
        self.approve_button = w.Button(description="Approve", button_style="success", icon="check")
        self.approve_button.add_class("approval-approve")
        self.reject_button = w.Button(description="Reject", button_style="danger", icon="times")
        self.reject_button.add_class("approval-reject")
        self.approve_button.on_click(lambda _b: self._click(self._approve_action))
        self.reject_button.on_click(lambda _b: self._click(self._reject_action))
        self.runner.state_hook = self._show_request
        r = self.runner
        super().__init__(
            [
                w.HTML(CSS), self.request, self.operator, self.comment, self.reason,
                w.HBox([self.approve_button, self.reject_button]),
                r.hint, r.status, r.result, r.graph, r.timeline,
            ]
        )  # fmt: skip
        self.add_class("approval-widget")
        self._show_request()
        r.refresh()
        r.settle()

    def _show_request(self) -> None:
        s = self.runner.session
        if s.is_pending:
            req = s.context.get(self.approval_keys.request)
            deadline = binding_deadline(s, self.approval_keys)
            late = "" if deadline is None else expired_html(deadline, s.clock.now_ms())
            progress = HITL.progress(s) if s.hitl.approval_keys is not None else None
            needs = (
                f"<div class='im-progress'>{esc(progress.text)}</div>"
                if progress is not None and s.context.get(progress.target) is None
                else ""
            )
            self.request.value = (
                f"<div class='im-ask'><b>Waiting for a decision:</b> {esc(s.pending_reason)}"
                + late
                + needs
                + (f"<div>Request:</div>{pre_json(req)}" if req is not None else "")
                + "</div>"
            )
        else:
            self.request.value = f"<b>Nothing to decide</b> (session {esc(s.status)})"
        waiting = s.is_pending and not self.runner.busy
        self.approve_button.disabled = not waiting
        why = bool(self.reason.value.strip()) or not _needs_reason(s, self.approval_keys)
        self.reject_button.disabled = not (waiting and why)

    def _click(self, action: Any) -> None:
        if self.runner.sync():  # it moved on elsewhere: the widget shows that now instead
            return
        try:
            decide = action()
        except Exception as exc:  # a refused decision: shown, nothing changed
            self.runner.show_error(exc)
            return
        self.runner.run_in_background(decide)

    def _who(self, reviewer: str | None) -> Actor:
        who = reviewer_or_default(reviewer if reviewer is not None else self.operator.value)
        if reviewer is None and self.operator.value.strip() != who:
            self.operator.value = who  # the field shows who the decision records
        return notebook_actor(who, self.principal)

    def _approve_action(self, reviewer: str | None = None, comment: str | None = None) -> Any:
        who = self._who(reviewer)
        note = comment if comment is not None else (self.comment.value.strip() or None)
        return lambda s: decide_graph(
            s,
            "APPROVE",
            comment=note,
            keys=self.approval_keys,
            approvers=self.approvers,
            principal=who,
        )

    def _reject_action(
        self, reason: str | None = None, reviewer: str | None = None, comment: str | None = None
    ) -> Any:
        why = reason if reason is not None else self.reason.value.strip()
        note = comment if comment is not None else (self.comment.value.strip() or None)
        who = self._who(reviewer)
        if not why and _needs_reason(self.runner.session, self.approval_keys):
            error = DecisionRefusedError(
                "a rejection needs a reason: type it in the Reason field",
                rule="reason_to_reject", reviewer=who.name, verdict="reject",
                session_id=self.runner.session.session_id,
            )  # fmt: skip
            self.runner.refused(error, who, self.approval_keys.decision, "reject")
            raise error
        return lambda s: decide_graph(
            s,
            "REJECT",
            reason=why or None,
            comment=note,
            keys=self.approval_keys,
            approvers=self.approvers,
            principal=who,
        )

    def approve(self, reviewer: str | None = None, comment: str | None = None) -> Any:
        """Code twin of Approve: decide, resume, return the response."""
        return self.runner.run_now(self._approve_action(reviewer, comment))

    def reject(self, reason: str, reviewer: str | None = None, comment: str | None = None) -> Any:
        """Code twin of Reject (a reason is required): decide, resume, return the response."""
        return self.runner.run_now(self._reject_action(reason, reviewer, comment))

    def wait(self, timeout: float | None = 60.0) -> Any:
        """Wait for a button-started resume; returns the response."""
        return self.runner.wait(timeout)

    def __repr__(self) -> str:
        s = self.runner.session
        state = f"waiting: {s.pending_reason}" if s.is_pending else s.status
        return visible(f"<ApprovalWidget {s.session_id}: {state}>")  # (as the CLI prints)
