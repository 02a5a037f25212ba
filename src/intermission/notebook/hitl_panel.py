"""HITLPanel: decide the tool calls of a suspended batch one by one (by call UUID), with
editable arguments, a reviewer, a comment and a reason to reject, then resume (R36, R47,
R59)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import traitlets as t

from .._text import visible
from ..core.session import AgentSession
from ..decisions import DecisionRecord, HITLDecision, HITLTask
from ..errors import DecisionRefusedError, InvalidDecisionError
from ..hitl import HITL
from ..principals import Actor, Principal
from ._allowed import Allowed, task_allowed
from ._decided import who_html
from ._html import esc, expired_html, short_id
from ._runner import DecisionView, ResumeRunner
from ._widget import esm
from .settings import default_reviewer, known_roles, notebook_actor, reviewer_or_default, viewer

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


def _agreed(task: HITLTask) -> dict[str, Any] | None:
    """The edited arguments the approvals so far of ``task`` approve (a quorum's votes
    must agree on them), or None (the arguments as proposed, or no approval yet)."""
    approving = [v for v in task.votes if v.verdict == "approve"]
    return approving[0].modified_args if approving else None


def _needs_reason(task: HITLTask) -> bool:
    """Whether rejecting ``task`` takes a reason (its policy says; without one it does)."""
    return task.policy is None or task.policy.reason_to_reject


class _Row:
    """One tool call: what it would do, why it waits, and its arguments as edited."""

    def __init__(self, panel: HITLPanel, task: HITLTask) -> None:
        self.task = task
        badges = tool_badges(task, panel.runner.at_hand)
        agreed = _agreed(task)
        edited = " <i>(the approvals so far approve edited arguments, shown)</i>" if agreed else ""
        self.head = (
            f"<b>{esc(task.tool_name)}</b> <code title='{esc(task.call_uuid)}'>"
            f"{esc(short_id(task.call_uuid))}</code>{badges} — {esc(task.reason)}{edited}"
        )
        self.args = json.dumps({**task.args, **(agreed or {})}, indent=1)
        """The arguments box's text (JSON; a person may edit it before approving): what
        the approvals so far approve."""
        self.state = ""
        """What the row says of its decision (HTML)."""
        self.open = False
        """True while the call may be decided here."""
        self.allowed = Allowed({})
        """What the viewer may do on it now, and why not (see ``_allowed``)."""


class HITLPanel(DecisionView):
    """One row per tool call of the suspended batch: arguments (editable JSON), reason,
    Approve / Reject / Skip, plus Approve all / Reject all (the calls not chosen otherwise here). A
    decision carries the Reviewer (default:
    :func:`~intermission.notebook.settings.default_reviewer`), the Comment, and to reject a
    Reason (Reject stays disabled until one is typed, unless the call's policy says a
    rejection needs none). When every call is decided the agent resumes (``agent`` may be an
    AgentTable: the session's version resumes, or a newer one that migrates it, R62; a
    version it does not serve is said above the rows, and nothing can be decided). Calls someone
    already decided show that decision; a different one is refused (DecisionConflictError,
    shown here; nothing changes).

    A call whose approval needs more than one decider (a policy's quorum) shows what it
    has and still needs (``1 of 2 approvals (alice, sre) — waiting for one more from
    sre``); a decision here is then a vote, saved, and another view decides the rest.
    ``principal``: who decides here, with roles (default: ``settings.principal``); the
    Reviewer field starts with its name.

    Code twins: ``approve(uuid)``, ``reject(uuid, reason)``, ``skip(uuid)``,
    ``approve_all()``, ``reject_all(reason)``, ``decide_all(...)``, ``resume()``; and
    ``code_twin(...)`` for the cell after the panel (see :class:`DecisionView`). What the
    buttons send: ``click("decide", call_uuid=, verdict=, args=)``, ``click("all",
    verdict=, args={uuid: text})``, ``click("resume")`` (each may carry ``reviewer=``,
    ``comment=``, ``reason=``).
    """

    _esm = esm("hitl_panel")
    calls = t.List(t.Dict()).tag(sync=True)
    """The rows as the page draws them: uuid, head (HTML), args, state (HTML), open, and
    needs_reason (its policy asks for a reason to reject)."""
    empty = t.Unicode("").tag(sync=True)
    """Said when no tool call waits (HTML)."""
    reviewer = t.Unicode("").tag(sync=True)
    """The Reviewer field."""
    comment = t.Unicode("").tag(sync=True)
    """The Comment field."""
    reason = t.Unicode("").tag(sync=True)
    """The Reason field (rejecting needs one, unless a call's policy says otherwise)."""
    can_all = t.Bool(False).tag(sync=True)
    """True while the batch waits and this panel may decide it (any viewer: see
    :attr:`can_approve` for this one)."""
    can_approve = t.Bool(False).tag(sync=True)
    """True when this panel's viewer (the Reviewer field's person, with the panel's
    principal) may Approve all now, as the calls' policies judge it (each row says so of
    its own call: ``can_approve``, ``can_reject``, ``can_skip``, ``why_not``)."""
    can_reject = t.Bool(False).tag(sync=True)
    """True when the viewer may Reject all now, given a reason (the page asks for one)."""
    why_not = t.Dict().tag(sync=True)
    """Why Approve all / Reject all are off, by verdict ("" when on)."""
    needs_reason = t.Bool(True).tag(sync=True)
    """True when Reject all takes a reason (some call's policy asks for one)."""
    roles = t.Dict().tag(sync=True)
    """The roles of the principals this panel knows by name (its ``principal=``, then
    ``settings.principal``): the page says with which a Reviewer's name decides."""
    can_resume = t.Bool(False).tag(sync=True)
    """True when every call has a decision and the session may resume."""
    show_resume = t.Bool(False).tag(sync=True)
    """True when Resume with recorded decisions is shown."""

    def __init__(
        self,
        agent: Any,
        session: AgentSession,
        *,
        store: Any = None,
        reviewer: str | None = None,
        principal: Principal | None = None,
    ) -> None:
        self.principal = principal
        self.reviewer = reviewer if reviewer is not None else (
            principal.name if principal is not None else default_reviewer()
        )  # fmt: skip
        self._actor: Actor | None = None
        self._chosen: dict[str, HITLDecision] = {}
        self.rows: dict[str, _Row] = {}
        self.runner = ResumeRunner(self, agent, session, store)
        self.runner.state_hook = self._sync
        self._build_rows()
        self.runner.refresh()
        self.runner.settle()
        super().__init__()  # opens the widget with everything above in its first state

    def _actions(self) -> dict[str, Any]:
        return {"decide": self._on_decide, "all": self._on_all, "resume": self._on_resume,
                "viewer": self._on_viewer}  # fmt: skip

    def _on_viewer(self, fields: dict[str, Any]) -> None:
        """The Reviewer field changed on the page: what that person may do."""
        self._take(fields)
        self._enable()

    # -- state -----------------------------------------------------------------------
    def _sync(self) -> None:
        """After a run, a refusal or a change made elsewhere: new rows when the batch
        changed, else new states (a choice made here stays until it is submitted, or the
        call is decided elsewhere)."""
        s = self.runner.session
        batch = [task.call_uuid for task in s.hitl.tasks] if s.is_pending else []
        if batch != list(self.rows):
            self._build_rows()
        else:
            if not self.runner.busy:
                decided = s.hitl.decisions
                self._chosen = {u: d for u, d in self._chosen.items() if u not in decided}
                for uuid, row in list(self.rows.items()):  # (a vote since: the task now)
                    task = next((t for t in s.hitl.tasks if t.call_uuid == uuid), row.task)
                    if _agreed(task) != _agreed(row.task):  # the box shows what they approve
                        self.rows[uuid] = _Row(self, task)
                    else:
                        row.task = task
            self._enable()

    def _build_rows(self) -> None:
        s = self.runner.session
        self._chosen = {}
        tasks = s.hitl.tasks if s.is_pending else []
        self.rows = {task.call_uuid: _Row(self, task) for task in tasks}
        if not self.rows:
            waits = f": {esc(s.pending_reason)}" if s.is_pending else f" ({esc(s.status)})"
            self.empty = f"<i>No tool call waits for a decision</i>{waits}"
        else:
            self.empty = ""
        self._enable()

    def _undecided(self) -> list[str]:
        decided = self.runner.session.hitl.decisions
        return [u for u in self.rows if u not in decided and u not in self._chosen]

    def _enable(self) -> None:
        """Rows and buttons as the session says (all off while a resume runs)."""
        # off while a resume runs, and when no agent here runs the session's version (R62)
        busy = self.runner.busy or bool(self.runner.unserved)
        decided = self.runner.session.hitl.decisions
        # a click after the deadline is refused; read the clock only then (a FakeClock
        # advances on every reading)
        timed = any(row.task.decide_by_ms is not None for row in self.rows.values())
        now = self.runner.session.clock.now_ms() if timed else 0.0
        who = viewer(self.reviewer, self.principal)
        agent = self.runner.at_hand if self.rows else None
        for uuid, row in self.rows.items():
            record = decided.get(uuid)
            chosen = self._chosen.get(uuid)
            if record is not None:
                row.state = _decided_text(record)
            elif chosen is not None:
                row.state = f"<i>{esc(chosen.verdict)} (chosen)</i>"
            else:
                row.state = expired_html(row.task.decide_by_ms, now).strip()
            row.open = record is None and chosen is None and not busy
            row.allowed = Allowed({})
            if row.open:  # judged by the rules a click meets (nothing is written)
                s = self.runner.session
                row.allowed = task_allowed(s, row.task, who, agent, _agreed(row.task), now)
        self.calls = [
            {"uuid": u, "head": r.head, "args": r.args, "state": r.state, "open": r.open,
             "needs_reason": _needs_reason(r.task), "why_not": r.allowed.why_not,
             **{f"can_{v}": r.open and r.allowed.can(v) for v in ("approve", "reject", "skip")}}
            for u, r in self.rows.items()
        ]  # fmt: skip
        batch = bool(self.rows) and not busy
        self.can_all = batch
        opened = [r.allowed for r in self.rows.values() if r.open]
        why = {v: next((a.why_not[v] for a in opened if not a.can(v)), "")
               for v in ("approve", "reject")}  # fmt: skip
        self.why_not = why
        self.can_approve = batch and not why["approve"]
        self.can_reject = batch and not why["reject"]
        self.needs_reason = any(_needs_reason(r.task) for r in self.rows.values())
        self.roles = known_roles(self.principal)
        self.can_resume = batch and not self._undecided()
        self.show_resume = bool(self.rows) and not self._undecided()

    def _still_open(self) -> bool:
        return self.runner.session.is_pending and bool(self.runner.session.hitl.tasks)

    # -- decisions ---------------------------------------------------------------------
    def _who(self, reviewer: str | None) -> Actor:
        who = reviewer_or_default(
            reviewer if reviewer is not None else self.reviewer, self.principal
        )
        if reviewer is None and self.reviewer.strip() != who:
            self.reviewer = who  # the field shows who the decision records
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
            agent = self.runner.resolved()  # (AgentVersionError: its version is not served)
            HITL._check(self.runner.session, call_uuid, decision, agent, actor)
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
                    args = json.loads(row.args)
                except ValueError as exc:
                    raise InvalidDecisionError(f"arguments are not JSON: {exc}") from None
                # the box holds every argument, but an edit is merged over the proposed
                # ones: a key deleted there would still run, unseen by the person
                gone = [name for name in row.task.args if name not in args] if isinstance(
                    args, dict) else []  # fmt: skip
                if gone:
                    raise InvalidDecisionError(
                        f"an edit cannot remove an argument ({', '.join(map(repr, gone))}): "
                        "edited arguments are merged over the proposed ones, so it would still "
                        "run; give it a value instead, or reject the call. Nothing was changed.",
                        call_uuid=call_uuid,
                    )
            if not isinstance(args, dict):
                raise InvalidDecisionError("arguments are a JSON object", call_uuid=call_uuid)
            decision = HITLDecision.approve()
            agreed = _agreed(row.task)
            if agreed is not None and args == {**row.task.args, **agreed}:
                decision = decision.modified_args(agreed)  # the edit the votes so far approve
            elif args != row.task.args:
                decision = decision.modified_args(args)
            note = note if note is not None else (self.comment.strip() or None)
            if note:
                decision = decision.comment(note)
            return decision
        if verdict == "reject":
            why = note if note is not None else self.reason.strip()
            if not why and _needs_reason(row.task):
                raise DecisionRefusedError(
                    "a rejection needs a reason: type it in the Reason field",
                    rule="reason_to_reject", reviewer=actor.name, verdict="reject",
                    session_id=self.runner.session.session_id, call_uuid=call_uuid,
                )  # fmt: skip
            return HITLDecision.reject(why or None)
        note = note if note is not None else (self.comment.strip() or None)
        return HITLDecision.skip(note)

    def _choose(self, decisions: Mapping[str, HITLDecision]) -> Any:
        """Keep the choices; once every call is decided, submit them and resume."""
        self._chosen.update(decisions)
        self._enable()
        if self._undecided():
            return None
        chosen, self._chosen = dict(self._chosen), {}  # submitted: recorded, or refused
        # through a store, the agent decide_and_resume picks on what the store holds
        # judges the decisions (a migration elsewhere meanwhile picks another version)
        agent = None if self.runner.store is not None else self.runner.resolved()
        actor = self._actor
        self.runner.actor = actor
        return lambda s: HITL.submit_all(s, chosen, agent=agent, principal=actor)

    # -- what the buttons send -----------------------------------------------------------
    def _take(self, fields: dict[str, Any]) -> None:
        """The fields as the page had them when the button was clicked."""
        for name in ("reviewer", "comment", "reason"):
            value = self._text(fields, name)
            if value is not None:
                setattr(self, name, value)

    def _on_decide(self, fields: dict[str, Any]) -> None:
        self._take(fields)
        uuid = str(fields.get("call_uuid", ""))
        verdict = str(fields.get("verdict", ""))
        if verdict not in ("approve", "reject", "skip"):
            raise InvalidDecisionError(f"a verdict is approve, reject or skip, not {verdict!r}")
        self._edited(uuid, fields.get("args"))
        self._act(verdict.title(), lambda: self._choose({uuid: self._decision(uuid, verdict)}))

    def _edited(self, uuid: str, text: Any) -> None:
        """The arguments of an open row as the person left them in its box."""
        row = self.rows.get(uuid)
        if row is not None and isinstance(text, str) and row.open:
            row.args = text

    def _on_all(self, fields: dict[str, Any]) -> None:
        self._take(fields)
        verdict = str(fields.get("verdict", ""))
        if verdict not in ("approve", "reject"):
            raise InvalidDecisionError(f"all calls are approved or rejected, not {verdict!r}")
        edits = fields.get("args")
        for uuid, text in edits.items() if isinstance(edits, dict) else ():
            self._edited(str(uuid), text)  # approving all approves the boxes as they are
        self._act(f"{verdict.title()} all", lambda: self._choose(self._all(verdict, None, None)))

    def _on_resume(self, fields: dict[str, Any]) -> None:
        self._take(fields)
        self._act("Resume", lambda: None if self._undecided() else _nothing)

    def _all(self, verdict: str, note: str | None, reviewer: str | None) -> dict[str, Any]:
        # every call but those chosen here (a call rejected in this panel keeps that choice);
        # one decided elsewhere is included: a different verdict on it is a conflict, shown
        return {u: self._decision(u, verdict, None, note, reviewer) for u in self.rows
                if u not in self._chosen}  # fmt: skip

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
        """Approve every call of the batch not chosen otherwise here, and resume."""
        return self._twin(self._all("approve", comment, reviewer))

    def reject_all(self, reason: str, reviewer: str | None = None) -> Any:
        """Reject every call of the batch not chosen otherwise here (a reason is required),
        and resume."""
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
        return self.runner.run_now(_nothing)

    def __repr__(self) -> str:
        s = self.runner.session
        return f"<HITLPanel {visible(s.session_id)}: {len(self._undecided())} pending call(s)>"


def _nothing(_session: AgentSession) -> None:
    """The decision of a resume with the recorded decisions: none more."""
