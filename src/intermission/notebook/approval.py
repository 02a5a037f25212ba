"""ApprovalWidget: decide a graph approval (the ``approval.decision`` keys) and resume
(R35, R47, R59)."""

from __future__ import annotations

from typing import Any

import traitlets as t

from .._text import visible
from ..core.session import AgentSession
from ..errors import DecisionRefusedError
from ..hitl.graph import ApprovalKeys, binding_deadline, decide_graph, graph_ask
from ..principals import Actor, Principal
from ._allowed import graph_allowed, waiting_head
from ._html import esc, expired_html, pre_json
from ._runner import DecisionView, ResumeRunner
from ._widget import esm
from .settings import default_reviewer, known_roles, notebook_actor, reviewer_or_default, viewer

__all__ = ["ApprovalWidget"]


def _needs_reason(session: AgentSession, keys: ApprovalKeys) -> bool:
    """Whether rejecting the approval takes a reason (its policy says; without one, it
    does)."""
    try:
        ask = graph_ask(session, keys)
    except Exception:  # (an unreadable policy key): ask for one
        return True
    return ask is None or ask.policy.reason_to_reject


class ApprovalWidget(DecisionView):
    """Shows the pending reason and request; Approve / Reject write the decision keys
    (``approval.decision``/``operator``/``time``/``reason``/``comment``) and resume the
    agent (or an AgentTable's agent for the session's version, R62: a version it does
    not serve is said above the request, and Approve / Reject stay off). A decision
    carries the Reviewer (default:
    :func:`~intermission.notebook.settings.default_reviewer`) and an optional Comment;
    Reject also needs a Reason (unless the approval's policy says otherwise) and stays
    disabled until one is typed.

    An approval whose policy needs more than one decider shows what it has and still
    needs (``1 of 2 approvals (alice, sre) — waiting for one more from sre``); a decision
    here is then a vote, saved, and another view decides the rest. ``principal``: who
    decides here, with roles (default: ``settings.principal``); the Reviewer field starts
    with its name. A decision the policy refuses (a role, the requester, a second vote of
    one person, a deadline) is shown here and changes nothing.

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
    """The Reason field (Reject needs one when :attr:`needs_reason`)."""
    can_decide = t.Bool(False).tag(sync=True)
    """True while the approval waits and this view may decide it (any viewer: see
    :attr:`can_approve` for this one)."""
    can_approve = t.Bool(False).tag(sync=True)
    """True when this view's viewer (the Reviewer field's person, with the widget's
    principal) may approve now, as the approval's policy judges it."""
    can_reject = t.Bool(False).tag(sync=True)
    """True when the viewer may reject now, given a reason (the page asks for one)."""
    why_not = t.Dict().tag(sync=True)
    """Why a button is off, by verdict; "" when it is on.

    Say ``{"approve": "you approved — waiting for one more from sre", "reject": ...}``."""
    needs_reason = t.Bool(True).tag(sync=True)
    """True when a rejection takes a reason (the approval's policy says; without one, it
    does)."""
    roles = t.Dict().tag(sync=True)
    """The roles of the principals this widget knows by name (its ``principal=``, then
    ``settings.principal``): the page says with which a Reviewer's name decides."""

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
        self.reviewer = reviewer if reviewer is not None else (
            principal.name if principal is not None else default_reviewer()
        )  # fmt: skip
        self.runner = ResumeRunner(self, agent, session, store)
        self.runner.state_hook = self._show_request
        self._show_request()
        self.runner.refresh()
        self.runner.settle()
        super().__init__()  # opens the widget with everything above in its first state

    def _actions(self) -> dict[str, Any]:
        return {"approve": self._on_approve, "reject": self._on_reject, "viewer": self._on_viewer}

    def _on_viewer(self, fields: dict[str, Any]) -> None:
        """The Reviewer field changed on the page: what that person may do."""
        self._take(fields)
        self._judge_viewer()

    def _show_request(self) -> None:
        s = self.runner.session
        if s.is_pending:
            req = s.context.get(self.approval_keys.request)
            deadline = binding_deadline(s, self.approval_keys)
            late = "" if deadline is None else expired_html(deadline, s.clock.now_ms())
            self.request = (
                f"<div class='im-ask'><b>{esc(waiting_head(s))}:</b> {esc(s.pending_reason)}"
                + late
                + (f"<div>Request:</div>{pre_json(req)}" if req is not None else "")
                + "</div>"
            )
        else:
            self.request = f"<b>Nothing to decide</b> (session {esc(s.status)})"
        # (a session whose version no agent here runs decides nothing here, R62)
        self.can_decide = s.is_pending and not self.runner.busy and not self.runner.unserved
        self.needs_reason = _needs_reason(s, self.approval_keys)
        self.roles = known_roles(self.principal)
        self._judge_viewer()

    def _judge_viewer(self) -> None:
        """``can_approve`` / ``can_reject`` / ``why_not`` for the viewer, by the rules that
        judge a click (nothing is written)."""
        s = self.runner.session
        if self.runner.unserved:
            why = {"approve": "its agent version is not served here", "reject": ""}
            why["reject"] = why["approve"]
        else:
            who = viewer(self.reviewer, self.principal)
            why = graph_allowed(s, self.approval_keys, who, self.approvers).why_not
        self.why_not = why
        self.can_approve = self.can_decide and not why.get("approve")
        self.can_reject = self.can_decide and not why.get("reject")

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
    def _who(self, reviewer: str | None) -> Actor:
        who = reviewer_or_default(
            reviewer if reviewer is not None else self.reviewer, self.principal
        )
        if reviewer is None and self.reviewer.strip() != who:
            self.reviewer = who  # the field shows who the decision records
        actor = notebook_actor(who, self.principal)
        self.runner.actor = actor  # (a migration on the way is recorded as theirs)
        return actor

    def _approve_action(self, reviewer: str | None = None, comment: str | None = None) -> Any:
        who = self._who(reviewer)
        note = comment if comment is not None else (self.comment.strip() or None)
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
        why = reason if reason is not None else self.reason.strip()
        note = comment if comment is not None else (self.comment.strip() or None)
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

    # -- code twins ------------------------------------------------------------------------
    def approve(self, reviewer: str | None = None, comment: str | None = None) -> Any:
        """Code twin of Approve: decide, resume, return the response (None when the
        decision was a vote and the approval waits for more)."""
        return self.runner.run_now(self._approve_action(reviewer, comment))

    def reject(self, reason: str, reviewer: str | None = None, comment: str | None = None) -> Any:
        """Code twin of Reject (a reason is required unless the policy says otherwise):
        decide, resume, return the response."""
        return self.runner.run_now(self._reject_action(reason, reviewer, comment))

    def __repr__(self) -> str:
        s = self.runner.session
        state = f"waiting: {s.pending_reason}" if s.is_pending else s.status
        return visible(f"<ApprovalWidget {s.session_id}: {state}>")  # (as the CLI prints)
