"""HITLPanel: decide the tool calls of a suspended batch one by one (by call UUID), with
editable arguments, a reviewer, a comment and a reason to reject, then resume (R36, R47)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import ipywidgets as w

from .._text import visible
from ..core.session import AgentSession
from ..decisions import DecisionRecord, HITLDecision, HITLTask
from ..errors import DecisionRefusedError, InvalidDecisionError
from ..hitl import HITL
from ..principals import Actor, Principal
from ._decided import who_html
from ._html import CSS, esc, expired_html, short_id
from ._runner import CodeTwins, ResumeRunner
from .settings import default_reviewer, notebook_actor, reviewer_or_default

__all__ = ["HITLPanel"]


def _decided_text(record: DecisionRecord) -> str:
    who = who_html(record.reviewer, record.display, record.timed_out, record.votes)
    note = f" — {esc(record.comment)}" if record.comment else ""
    return f"<b>{esc(record.verdict)}</b> by {who}{note} <i>(recorded)</i>"


def tool_badges(task: HITLTask, agent: Any = None) -> str:
    """What the tool says of itself, for the reviewer: where it runs (an MCP server) and
    its annotations (destructive, read-only, idempotent, open world) — of the tool the
    panel's ``agent`` holds (R49), never of a same-named tool of another agent."""
    from ..agents.tools import held_tool

    found = held_tool(agent, task.agent, task.tool_name) if agent is not None else None
    if found is None:
        return ""
    notes = dict(getattr(found, "annotations", {}) or {})
    badges = []
    connection = getattr(found, "connection", None)
    if connection is not None:
        badges.append(("im-tool", f"MCP · {connection.name}"))
    if getattr(found, "destructive", False):
        badges.append(("im-bad", "destructive"))
    if notes.get("readOnlyHint") is True:
        badges.append(("im-action", "read-only"))
    if notes.get("idempotentHint") is True:
        badges.append(("im-run", "idempotent"))
    if notes.get("openWorldHint") is True:
        badges.append(("im-run", "open world"))
    title = notes.get("title")
    shown = "".join(f" <span class='im-badge {css}'>{esc(text)}</span>" for css, text in badges)
    return shown + (f" <i>{esc(title)}</i>" if title else "")


def _needs_reason(task: HITLTask) -> bool:
    """Whether rejecting ``task`` takes a reason (its policy says; without one it does)."""
    return task.policy is None or task.policy.reason_to_reject


class _Row:
    """One tool call: what it would do, why it waits, and its three buttons."""

    def __init__(self, panel: HITLPanel, task: HITLTask) -> None:
        self.task = task
        badges = tool_badges(task, panel.runner.agent)
        self.head = w.HTML(
            f"<b>{esc(task.tool_name)}</b> <code title='{esc(task.call_uuid)}'>"
            f"{esc(short_id(task.call_uuid))}</code>{badges} — {esc(task.reason)}"
        )
        self.args = w.Textarea(value=json.dumps(task.args, indent=1), rows=3)
        self.args.add_class("hitl-args")
        self.buttons: dict[str, w.Button] = {}
        for verdict, style in (("approve", "success"), ("reject", "danger"), ("skip", "warning")):
            b = w.Button(description=verdict.title(), button_style=style)
            b.add_class(f"hitl-{verdict}")
            b.on_click(lambda _b, v=verdict: panel._click(self.task.call_uuid, v))
            self.buttons[verdict] = b
        self.state = w.HTML()
        self.state.add_class("hitl-row-state")
        self.box = w.VBox([self.head, self.args, w.HBox([*self.buttons.values(), self.state])])
        self.box.add_class("hitl-row")


class HITLPanel(CodeTwins, w.VBox):
    """One row per tool call of the suspended batch: arguments (editable JSON), reason,
    Approve / Reject / Skip, plus Approve all / Reject all. A decision carries the
    Reviewer (default: :func:`~intermission.notebook.settings.default_reviewer`), the
    Comment, and to reject a Reason (Reject stays disabled until one is typed). When every
    call is decided the agent resumes. Calls someone already decided show that decision;
    a different one is refused (DecisionConflictError, shown here; nothing changes).

    A call whose approval needs more than one decider (a policy's quorum) shows what it
    has and still needs (``1 of 2 approvals (alice, sre) — waiting for one more from
    sre``); a decision here is then a vote, saved, and another view decides the rest.
    ``principal``: who decides here, with roles (default: ``settings.principal``); the
    Reviewer field starts with its name.

    Code twins: ``approve(uuid)``, ``reject(uuid, reason)``, ``skip(uuid)``,
    ``approve_all()``, ``reject_all(reason)``, ``decide_all(...)``, ``resume()``; and
    ``code_twin(...)`` for the cell after the panel (see :class:`CodeTwins`).
    """

    def __init__(
        self,
        agent: Any,
        session: AgentSession,
        *,
        store: Any = None,
        reviewer: str | None = None,
        principal: Principal | None = None,
    ) -> None:
        self.runner = ResumeRunner(agent, session, store)
        self.principal = principal
        start = reviewer if reviewer is not None else (
            principal.name if principal is not None else default_reviewer()
        )  # fmt: skip
        self.reviewer = w.Text(value=start, description="Reviewer")
        self.reviewer.add_class("hitl-reviewer")
        self.comment = w.Text(description="Comment", placeholder="optional note")
        self.comment.add_class("hitl-comment")
        self.reason = w.Text(description="Reason", placeholder="required to reject")
        self.reason.add_class("hitl-reason")
        self.reason.observe(lambda _change: self._enable(), names=["value"])
        self.approve_all_button = w.Button(description="Approve all", button_style="success")
        self.approve_all_button.add_class("hitl-approve-all")
        self.approve_all_button.on_click(lambda _b: self._click_all("approve"))
        self.reject_all_button = w.Button(description="Reject all", button_style="danger")
        self.reject_all_button.add_class("hitl-reject-all")
        self.reject_all_button.on_click(lambda _b: self._click_all("reject"))
        self.resume_button = w.Button(description="Resume with recorded decisions")
        self.resume_button.add_class("hitl-resume")
        self.resume_button.on_click(lambda _b: self._click_resume())
        self.rows_box = w.VBox()
        self._actor: Actor | None = None
        self._chosen: dict[str, HITLDecision] = {}
        self.rows: dict[str, _Row] = {}
        r = self.runner
        r.state_hook = self._sync
        super().__init__(
            [
                w.HTML(CSS), self.rows_box, self.reviewer, self.comment, self.reason,
                w.HBox([self.approve_all_button, self.reject_all_button, self.resume_button]),
                r.hint, r.status, r.result, r.timeline,
            ]
        )  # fmt: skip
        self.add_class("hitl-panel")
        self._build_rows()
        r.refresh()
        r.settle()

    # -- state -----------------------------------------------------------------------
    def _sync(self) -> None:
        """After a run or a refusal: new rows when the batch changed, else new states
        (choices made here are gone: recorded, or refused)."""
        s = self.runner.session
        batch = [t.call_uuid for t in s.hitl.tasks] if s.is_pending else []
        if batch != list(self.rows):
            self._build_rows()
        else:
            if not self.runner.busy:
                self._chosen = {}
                for row in self.rows.values():  # (a vote since: the task as it is now)
                    row.task = next((t for t in s.hitl.tasks if t.call_uuid == row.task.call_uuid),
                                    row.task)  # fmt: skip
            self._enable()

    def _build_rows(self) -> None:
        s = self.runner.session
        self._chosen = {}
        self.rows = {t.call_uuid: _Row(self, t) for t in s.hitl.tasks} if s.is_pending else {}
        self.rows_box.children = [row.box for row in self.rows.values()]
        if not self.rows:
            waits = f": {esc(s.pending_reason)}" if s.is_pending else f" ({esc(s.status)})"
            self.rows_box.children = [w.HTML(f"<i>No tool call waits for a decision</i>{waits}")]
        self._enable()

    def _undecided(self) -> list[str]:
        decided = self.runner.session.hitl.decisions
        return [u for u in self.rows if u not in decided and u not in self._chosen]

    def _enable(self) -> None:
        """Buttons as the session and the fields say (all off while a resume runs)."""
        busy = self.runner.busy
        decided = self.runner.session.hitl.decisions
        has_reason = bool(self.reason.value.strip())
        # a click after the deadline is refused; read the clock only then (a FakeClock
        # advances on every reading)
        timed = any(row.task.decide_by_ms is not None for row in self.rows.values())
        now = self.runner.session.clock.now_ms() if timed else 0.0
        for uuid, row in self.rows.items():
            record = decided.get(uuid)
            chosen = self._chosen.get(uuid)
            if record is not None:
                row.state.value = _decided_text(record)
            elif chosen is not None:
                row.state.value = f"<i>{esc(chosen.verdict)} (chosen)</i>"
            else:
                progress = HITL.progress(self.runner.session, uuid) if row.task.policy else None
                needs = (
                    f"<span class='im-progress'>{esc(progress.text)}</span> " if progress else ""
                )
                row.state.value = (needs + expired_html(row.task.decide_by_ms, now)).strip()
            open_row = record is None and chosen is None and not busy
            row.args.disabled = not open_row
            row.buttons["approve"].disabled = not open_row
            row.buttons["skip"].disabled = not open_row
            row.buttons["reject"].disabled = not (
                open_row and (has_reason or not _needs_reason(row.task))
            )
        batch = bool(self.rows) and not busy
        self.approve_all_button.disabled = not batch
        self.reject_all_button.disabled = not (batch and has_reason)
        self.resume_button.disabled = not (batch and not self._undecided())
        self.resume_button.layout.display = "" if self.rows and not self._undecided() else "none"

    # -- decisions ---------------------------------------------------------------------
    def _who(self, reviewer: str | None) -> Actor:
        who = reviewer_or_default(reviewer if reviewer is not None else self.reviewer.value)
        if reviewer is None and self.reviewer.value.strip() != who:
            self.reviewer.value = who  # the field shows who the decision records
        return notebook_actor(who, self.principal)

    def _decision(
        self,
        call_uuid: str,
        verdict: str,
        args: dict[str, Any] | None = None,
        note: str | None = None,
        reviewer: str | None = None,
    ) -> HITLDecision:
        row = self.rows.get(call_uuid)
        if row is None:
            raise InvalidDecisionError(
                f"no tool call {call_uuid!r} waits in this panel", call_uuid=call_uuid
            )
        actor = self._who(reviewer)
        try:
            decision = self._built(row, call_uuid, verdict, args, note, actor)
            # checked against the session now (conflicts, approvers, policy, edited
            # arguments); nothing is written until every call has a decision
            HITL._check(self.runner.session, call_uuid, decision, self.runner.agent, actor)
        except InvalidDecisionError as exc:
            self.runner.refused(exc, actor, call_uuid, verdict)
            raise
        self._actor = actor
        return decision

    def _built(
        self,
        row: _Row,
        call_uuid: str,
        verdict: str,
        args: dict[str, Any] | None,
        note: str | None,
        actor: Actor,
    ) -> HITLDecision:
        if verdict == "approve":
            if args is None:
                try:
                    args = json.loads(row.args.value)
                except ValueError as exc:
                    raise InvalidDecisionError(f"arguments are not JSON: {exc}") from None
            if not isinstance(args, dict):
                raise InvalidDecisionError("arguments are a JSON object", call_uuid=call_uuid)
            decision = HITLDecision.approve()
            if args != row.task.args:
                decision = decision.modified_args(args)
            note = note if note is not None else (self.comment.value.strip() or None)
            if note:
                decision = decision.comment(note)
            return decision
        if verdict == "reject":
            why = note if note is not None else self.reason.value.strip()
            if not why and _needs_reason(row.task):
                raise DecisionRefusedError(
                    "a rejection needs a reason: type it in the Reason field",
                    rule="reason_to_reject", reviewer=actor.name, verdict="reject",
                    session_id=self.runner.session.session_id, call_uuid=call_uuid,
                )  # fmt: skip
            return HITLDecision.reject(why or None)
        note = note if note is not None else (self.comment.value.strip() or None)
        return HITLDecision.skip(note)

    def _choose(self, decisions: Mapping[str, HITLDecision]) -> Any:
        """Keep the choices; once every call is decided, submit them and resume."""
        self._chosen.update(decisions)
        self._enable()
        if self._undecided():
            return None
        chosen = dict(self._chosen)
        agent = self.runner.agent
        actor = self._actor
        return lambda s: HITL.submit_all(s, chosen, agent=agent, principal=actor)

    def _click(self, call_uuid: str, verdict: str) -> None:
        if self.runner.sync():  # it moved on elsewhere: the panel shows that now instead
            return
        try:
            action = self._choose({call_uuid: self._decision(call_uuid, verdict)})
        except Exception as exc:
            self.runner.show_error(exc)
            return
        if action is not None:
            self.runner.run_in_background(action)

    def _all(self, verdict: str, note: str | None, reviewer: str | None) -> dict[str, Any]:
        return {u: self._decision(u, verdict, None, note, reviewer) for u in self.rows}

    def _click_all(self, verdict: str) -> None:
        if self.runner.sync():
            return
        try:
            action = self._choose(self._all(verdict, None, None))
        except Exception as exc:
            self.runner.show_error(exc)
            return
        if action is not None:
            self.runner.run_in_background(action)

    def _click_resume(self) -> None:
        if not self.runner.sync() and not self._undecided():
            self.runner.run_in_background(lambda s: None)

    # -- code twins ------------------------------------------------------------------
    def _twin(self, decisions: Mapping[str, HITLDecision]) -> Any:
        action = self._choose(decisions)
        return None if action is None else self.runner.run_now(action)

    def approve(
        self,
        call_uuid: str,
        args: dict[str, Any] | None = None,
        comment: str | None = None,
        reviewer: str | None = None,
    ) -> Any:
        """Approve one call (optionally with edited args); resumes when all are decided."""
        decision = self._decision(call_uuid, "approve", args, comment, reviewer)
        return self._twin({call_uuid: decision})

    def reject(self, call_uuid: str, reason: str, reviewer: str | None = None) -> Any:
        """Reject one call (a reason is required); resumes when all are decided."""
        return self._twin({call_uuid: self._decision(call_uuid, "reject", None, reason, reviewer)})

    def skip(self, call_uuid: str, comment: str | None = None, reviewer: str | None = None) -> Any:
        """Skip one call; resumes when all are decided."""
        return self._twin({call_uuid: self._decision(call_uuid, "skip", None, comment, reviewer)})

    def approve_all(self, comment: str | None = None, reviewer: str | None = None) -> Any:
        """Approve every call of the batch and resume."""
        return self._twin(self._all("approve", comment, reviewer))

    def reject_all(self, reason: str, reviewer: str | None = None) -> Any:
        """Reject every call of the batch (a reason is required) and resume."""
        return self._twin(self._all("reject", reason, reviewer))

    def decide_all(self, decisions: str | Mapping[str, str] = "approve") -> Any:
        """Decide every undecided call (one verdict, or ``{uuid: verdict}``) and resume;
        rejections take their reason from the Reason field."""
        if not self.rows:
            s = self.runner.session
            waits = f" (it waits for: {s.pending_reason})" if s.is_pending else ""
            raise InvalidDecisionError(
                f"session {s.session_id!r} has no pending tool calls to decide{waits}; "
                "a graph approval is decided with ApprovalWidget or decide_graph"
            )
        chosen = {
            uuid: self._decision(uuid, decisions if isinstance(decisions, str) else decisions[uuid])
            for uuid in self._undecided()
        }
        return self._twin(chosen)

    def resume(self) -> Any:
        """Resume with the decisions already recorded (say, by another reviewer)."""
        if self._undecided():
            raise InvalidDecisionError(
                f"{len(self._undecided())} tool call(s) still need a decision"
            )
        return self.runner.run_now(lambda s: None)

    def wait(self, timeout: float | None = 30.0) -> Any:
        """Wait for a button-started resume; returns the response."""
        return self.runner.wait(timeout)

    def __repr__(self) -> str:
        s = self.runner.session
        return f"<HITLPanel {visible(s.session_id)}: {len(self._undecided())} pending call(s)>"
