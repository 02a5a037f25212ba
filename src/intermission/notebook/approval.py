"""ApprovalWidget: decide a graph approval (the ``approval.decision`` keys) and resume
(R35, R47, R59)."""

from __future__ import annotations

from typing import Any

import traitlets as t

from .._text import visible
from ..core.session import AgentSession
from ..errors import InvalidDecisionError
from ..hitl.graph import ApprovalKeys, approval_deadline, decide_graph
from ._html import esc, expired_html, pre_json
from ._runner import DecisionView, ResumeRunner
from ._widget import esm
from .settings import default_reviewer, reviewer_or_default

__all__ = ["ApprovalWidget"]


class ApprovalWidget(DecisionView):
    """Shows the pending reason and request; Approve / Reject write the decision keys
    (``approval.decision``/``operator``/``time``/``reason``/``comment``) and resume the
    agent. A decision carries the Reviewer (default:
    :func:`~intermission.notebook.settings.default_reviewer`) and an optional Comment;
    Reject also needs a Reason and stays disabled until one is typed.

    ``approve()`` and ``reject(reason)`` do the same from code and return the response;
    ``click("approve" | "reject", reviewer=, comment=, reason=)`` is what the buttons send;
    ``code_twin(...)`` is the cell after the widget (see :class:`DecisionView`).
    """

    _esm = esm("approval")
    request = t.Unicode("").tag(sync=True)
    """What is asked (HTML)."""
    reviewer = t.Unicode("").tag(sync=True)
    """The Reviewer field."""
    comment = t.Unicode("").tag(sync=True)
    """The Comment field."""
    reason = t.Unicode("").tag(sync=True)
    """The Reason field (Reject needs one)."""
    can_decide = t.Bool(False).tag(sync=True)
    """True while Approve (and, with a reason, Reject) may be clicked."""

    def __init__(
        self,
        agent: Any,
        session: AgentSession,
        *,
        store: Any = None,
        keys: ApprovalKeys | None = None,
        approvers: Any = None,
        reviewer: str | None = None,
    ) -> None:
        self.approval_keys = keys or ApprovalKeys()
        self.approvers = approvers
        self.reviewer = default_reviewer() if reviewer is None else reviewer
        self.runner = ResumeRunner(self, agent, session, store)
        self.runner.state_hook = self._show_request
        self._show_request()
        self.runner.refresh()
        self.runner.settle()
        super().__init__()  # opens the widget with everything above in its first state

    def _actions(self) -> dict[str, Any]:
        return {"approve": self._on_approve, "reject": self._on_reject}

    def _show_request(self) -> None:
        s = self.runner.session
        if s.is_pending:
            req = s.context.get(self.approval_keys.request)
            deadline = approval_deadline(s, self.approval_keys)
            late = "" if deadline is None else expired_html(deadline, s.clock.now_ms())
            self.request = (
                f"<div class='im-ask'><b>Waiting for a decision:</b> {esc(s.pending_reason)}"
                + late
                + (f"<div>Request:</div>{pre_json(req)}" if req is not None else "")
                + "</div>"
            )
        else:
            self.request = f"<b>Nothing to decide</b> (session {esc(s.status)})"
        self.can_decide = s.is_pending and not self.runner.busy

    # -- what the buttons send -----------------------------------------------------------
    def _take(self, fields: dict[str, Any]) -> None:
        """The fields as the page had them when the button was clicked."""
        for name in ("reviewer", "comment", "reason"):
            value = self._text(fields, name)
            if value is not None:
                setattr(self, name, value)

    def _on_approve(self, fields: dict[str, Any]) -> None:
        self._take(fields)
        self._act("Approve", self._approve_action)

    def _on_reject(self, fields: dict[str, Any]) -> None:
        self._take(fields)
        self._act("Reject", self._reject_action)

    # -- the decisions -------------------------------------------------------------------
    def _who(self, reviewer: str | None) -> str:
        who = reviewer_or_default(reviewer if reviewer is not None else self.reviewer)
        if reviewer is None and self.reviewer.strip() != who:
            self.reviewer = who  # the field shows who the decision records
        return who

    def _approve_action(self, reviewer: str | None = None, comment: str | None = None) -> Any:
        who = self._who(reviewer)
        note = comment if comment is not None else (self.comment.strip() or None)
        return lambda s: decide_graph(
            s,
            "APPROVE",
            reviewer=who,
            comment=note,
            keys=self.approval_keys,
            approvers=self.approvers,
        )

    def _reject_action(
        self, reason: str | None = None, reviewer: str | None = None, comment: str | None = None
    ) -> Any:
        why = reason if reason is not None else self.reason.strip()
        note = comment if comment is not None else (self.comment.strip() or None)
        if not why:
            raise InvalidDecisionError("a rejection needs a reason: type it in the Reason field")
        who = self._who(reviewer)
        return lambda s: decide_graph(
            s,
            "REJECT",
            reviewer=who,
            reason=why,
            comment=note,
            keys=self.approval_keys,
            approvers=self.approvers,
        )

    # -- code twins ------------------------------------------------------------------------
    def approve(self, reviewer: str | None = None, comment: str | None = None) -> Any:
        """Code twin of Approve: decide, resume, return the response."""
        return self.runner.run_now(self._approve_action(reviewer, comment))

    def reject(self, reason: str, reviewer: str | None = None, comment: str | None = None) -> Any:
        """Code twin of Reject (a reason is required): decide, resume, return the response."""
        return self.runner.run_now(self._reject_action(reason, reviewer, comment))

    def __repr__(self) -> str:
        s = self.runner.session
        state = f"waiting: {s.pending_reason}" if s.is_pending else s.status
        return visible(f"<ApprovalWidget {s.session_id}: {state}>")  # (as the CLI prints)
