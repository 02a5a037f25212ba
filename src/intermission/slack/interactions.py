"""``POST /slack/interactions``: the clicks on an interactive Slack message (Block Kit
``block_actions``), decided as every surface decides.

1. The ``v0`` signature over the raw body is checked first (:mod:`.signature`): none or a
   wrong one → 401, nothing read. A signed request older than 5 minutes (the store's
   clock) → an ephemeral answer saying so, nothing done. A request seen already (the same
   signature: a replay inside the window) → nothing done again.
2. The Slack user is mapped to a person by the identity file's ``slack_users:``; an
   unmapped one gets an ephemeral answer saying whom to ask, nothing done.
3. The click (``approve`` / ``reject``; the button's ``value`` holds the thread and
   interrupt ids intermission minted) is decided by
   :func:`~intermission.stores.decide.decide_and_resume` with the served agents, as that
   person (``via: slack``): roles, quorum (one person counts once across surfaces),
   ``not_requester``, the reason to reject, deadlines and stale interrupts are the
   policy's to judge; a refusal is on the audit trail and answered in a sentence.
4. Slack wants an answer within 3 seconds: a decision not done by then goes on in the
   background (its record commits before its run starts, under the thread's claim), and
   the click is answered at once. The message is updated with the outcome through the
   outbox, whichever surface or path makes it final (:mod:`.reply`).

Ephemeral answers go back both in the HTTP answer and to the click's ``response_url``
(best effort: Slack shows a ``block_actions`` answer only from there); the URL is never
logged.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from ..errors import (
    AgentVersionError,
    IntermissionError,
    NothingToResumeError,
    SessionBusyError,
    SessionNotFoundError,
    UnknownTaskError,
)
from ..identity import IdentityMap
from ..principals import Actor
from ..stores.base import SessionStore
from ..stores.decide import DecisionOutcome, decide_and_resume
from .reply import hold
from .signature import (
    SLACK_REPLIES,
    WINDOW_S,
    SlackSignatureError,
    StaleRequestError,
    binding,
    button_mac,
    made_before_binding,
    reply_allowed,
    verify,
)

__all__ = ["MAX_BODY", "SlackInteractions", "answer_within_s"]

log = logging.getLogger("intermission.slack")

MAX_BODY = 200_000
"""Largest interaction body accepted, in bytes (Slack's are a few KB)."""
answer_within_s = 2.0
"""How long a click waits for its decision before it is answered and the decision goes on
in the background (Slack wants an answer within 3 s)."""
_ACTIONS = {"approve": True, "reject": False}


def _ephemeral(text: str) -> dict[str, Any]:
    return {"response_type": "ephemeral", "replace_original": False, "text": text}


def _first_line(exc: BaseException) -> str:
    """A refusal as a sentence (its message: never its class name)."""
    text = str(exc).splitlines()[0].strip() if str(exc).strip() else "it was refused"
    return text[:500]


class SlackInteractions:
    """The ASGI endpoint (see the module docstring). ``secrets``: the interactive Slack
    targets' signing secrets by target name; ``agents``: what ``decide_and_resume``
    resumes with (the server's AgentTable); ``post``: how an ephemeral answer reaches a
    ``response_url`` (default: an HTTPS POST with httpx, in a thread); ``origins``: by
    target name, where its clicks' ``response_url`` may point (default: Slack's only; see
    :attr:`~intermission.notify.SlackWebhook.reply_origins`). A click naming another is
    refused: the server posts to no URL a request body chose."""

    def __init__(
        self,
        store: SessionStore,
        agents: Any,
        identity: IdentityMap,
        secrets: Mapping[str, str],
        *,
        post: Callable[[str, dict[str, Any]], None] | None = None,
        origins: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        if not secrets:
            raise IntermissionError("no interactive Slack target: nothing to verify clicks with")
        self.store = store
        self.agents = agents
        self.identity = identity
        self.secrets = dict(secrets)
        self.post = post or _post
        given = origins or {}
        self.origins = {name: frozenset(given.get(name, (SLACK_REPLIES,))) for name in secrets}
        self._seen: dict[str, float] = {}
        """Signatures of requests handled in the last window (a replay does nothing)."""
        self._lock = threading.Lock()

    # -- the endpoint ----------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one HTTP request."""
        request = Request(scope, receive)
        if request.method != "POST":
            response: Response = JSONResponse({"error": "POST only"}, status_code=405)
        else:
            response = await self._handle(request)
        await response(scope, receive, send)

    async def _handle(self, request: Request) -> Response:
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                return JSONResponse({"error": "request body too large"}, status_code=413)
        now_s = self.store.clock.now_ms() / 1000  # type: ignore[attr-defined]
        signature = request.headers.get("x-slack-signature")
        try:
            targets = verify(self.secrets, request.headers.get("x-slack-request-timestamp"),
                             signature, body, now_s)  # fmt: skip
        except StaleRequestError as exc:
            return JSONResponse(_ephemeral(str(exc)))
        except SlackSignatureError as exc:
            return JSONResponse({"error": str(exc)}, status_code=401)
        assert signature is not None
        if not self._first_time(signature, now_s):
            return JSONResponse(_ephemeral("this click was handled already; nothing was done "
                                           "again"))  # fmt: skip
        try:
            payload = json.loads(parse_qs(body.decode())["payload"][0])
            if not isinstance(payload, dict):
                raise ValueError
        except (KeyError, IndexError, ValueError, UnicodeDecodeError):
            return JSONResponse({"error": "the body is a form with a JSON payload"},
                                status_code=400)  # fmt: skip
        runs = request.scope.get("state", {}).get("intermission.runs")
        text = await self._click(payload, targets, runs)
        if text is None:
            return Response(status_code=200)
        return JSONResponse(_ephemeral(text))

    def _first_time(self, signature: str, now_s: float) -> bool:
        with self._lock:
            for old, at in list(self._seen.items()):
                if now_s - at > 2 * WINDOW_S:
                    del self._seen[old]
            if signature in self._seen:
                return False
            self._seen[signature] = now_s
            return True

    # -- one click -------------------------------------------------------------------------
    async def _click(self, payload: dict[str, Any], targets: frozenset[str],
                     runs: Any = None) -> str | None:  # fmt: skip
        """Decide a click; the ephemeral answer (None: nothing to say, say an Open button's
        click, which Slack reports too). ``targets``: those whose secret signed it (one
        Slack app: one secret, a webhook per channel). ``runs``: the server's (a decision
        may resume a run: counted in its drain, refused once it stops)."""
        if payload.get("type") != "block_actions":
            return None
        actions = payload.get("actions") or []
        action = actions[0] if isinstance(actions, list) and actions else {}
        action_id = action.get("action_id") if isinstance(action, dict) else None
        approve = _ACTIONS.get(action_id) if isinstance(action_id, str) else None
        if approve is None:
            return None
        response_url = payload.get("response_url")
        url = response_url if isinstance(response_url, str) else None
        allowed = {o for t in targets for o in self.origins[t]}
        if url is not None and not reply_allowed(url, allowed):
            return "this click's response_url is not Slack's; nothing was done"  # (not posted)
        try:
            value = json.loads(action.get("value") or "")
            sid, iid, named, mac = value["t"], value["i"], value["n"], value["m"]
            if not all(isinstance(v, str) and v for v in (sid, iid, named, mac)):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return self._tell(url, "this button was not made by intermission; nothing was done")
        if named not in targets:
            return self._tell(url, "this button belongs to another Slack app; nothing was done")
        target = named
        if url is not None and not reply_allowed(url, self.origins[target]):
            return "this click's response_url is not Slack's; nothing was done"
        user = payload.get("user") or {}
        uid = user.get("id") if isinstance(user, dict) else None
        person = self.identity.slack_principal(uid) if isinstance(uid, str) else None
        if person is None:
            return self._tell(url, (
                f"your Slack account ({uid}) is not mapped to a person, so nothing was done: "
                "ask whoever runs intermission to add it under slack_users: in the identity "
                "file (serve --auth FILE)"))  # fmt: skip
        who = Actor(name=person.name, roles=sorted(person.roles), via="slack",
                    authenticated=True)  # fmt: skip
        held = runs.enter(sid, "a Slack click") if runs is not None else None
        if runs is not None and held is None:
            return self._tell(url, "this server is stopping, so nothing was done: click again "
                              "in a moment")  # fmt: skip

        def decide() -> str:
            try:
                seen = self._seen_by(target, sid, iid, str(action_id), mac)
                if seen is None:  # (a message posted with the app's webhook URL, or a
                    # value edited to another thread, interrupt or action)
                    if made_before_binding(self.secrets[target], target, sid, iid,
                                           str(action_id), mac):  # fmt: skip
                        return self._tell(url, MADE_BEFORE)
                    return self._tell(url, NOT_OURS)
                return self._decide(who, target, url, sid, iid, approve, seen)
            finally:
                if held is not None:
                    runs.leave(held)

        job = asyncio.ensure_future(run_in_threadpool(decide))
        try:
            return await asyncio.wait_for(asyncio.shield(job), answer_within_s)
        except asyncio.TimeoutError:  # goes on in the background (it tells its refusals)
            verdict = "approval" if approve else "rejection"
            return (f"your {verdict} is being recorded; this message will show what "
                    "became of it")

    def _tell(self, url: str | None, text: str) -> str:
        """``text`` as an ephemeral answer: returned, and posted to ``url`` (best effort,
        in a thread)."""
        if url is not None:
            threading.Thread(target=self._post_quietly, args=(url, _ephemeral(text)),
                             daemon=True).start()  # fmt: skip
        return text

    def _post_quietly(self, url: str, message: dict[str, Any]) -> None:
        try:
            self.post(url, message)
        except Exception as exc:  # best effort; the URL is a credential: never logged
            log.warning("an ephemeral Slack answer was not delivered (%s)", type(exc).__name__)

    def _seen_by(self, target: str, sid: str, iid: str, action: str, mac: str) -> str | None:
        """The binding of the call the clicked message showed, if the button's tag
        says intermission made it for interrupt ``iid`` of ``sid`` as ``action``, over a
        call the thread holds for that interrupt now or held at an earlier pause; else
        None."""
        try:
            session = self.store.load(sid)
        except (SessionNotFoundError, IntermissionError):
            return None
        secret = self.secrets[target]
        for seen in shown_bindings(session, iid):
            made = button_mac(secret, target, sid, iid, action, seen)
            if hmac.compare_digest(made.encode(), mac.encode("utf-8", "replace")):
                return seen
        return None

    def _decide(self, who: Actor, target: str, url: str | None, sid: str, iid: str,
                approve: bool, seen: str) -> str:  # fmt: skip
        """Decide through ``decide_and_resume`` (a thread); the answer in a sentence."""

        def decide(s: Any) -> None:
            if url is not None:  # (the message shows the outcome, whoever makes it final)
                hold(s, target, url, iid)
            _decide_one(s, iid, approve, seen)

        try:
            outcome = decide_and_resume(self.store, sid, decide, self.agents, principal=who)
        except SessionNotFoundError:
            return self._tell(url, f"thread {sid} is gone; nothing was done")
        except NothingToResumeError as exc:
            return self._tell(url, "this approval no longer waits for a decision: "
                              + _first_line(exc))  # fmt: skip
        except AgentVersionError as exc:
            return self._tell(url, "this server does not run this thread's agent version, "
                              "so nothing was done: " + _first_line(exc))  # fmt: skip
        except SessionBusyError:
            return self._tell(url, "the thread is busy (a run holds it); nothing was done: "
                              "click again in a moment")  # fmt: skip
        except IntermissionError as exc:  # a refusal of the policy, a conflict, a deadline
            return self._tell(url, "not done: " + _first_line(exc))
        if outcome.waiting is not None or outcome.applied_elsewhere:
            return self._tell(url, _said(outcome, approve))
        return _said(outcome, approve)  # (the message itself shows the outcome)


def _said(outcome: DecisionOutcome, approve: bool) -> str:
    if outcome.waiting is not None:
        return f"your approval is recorded; {outcome.waiting}"
    if outcome.applied_elsewhere:
        return outcome.describe()
    verdict = "approved" if approve else "rejected"
    return f"{verdict}: this message now shows what became of it"


MADE_BEFORE = ("this button was made by an earlier release of intermission, whose buttons "
               "did not name the call they showed, so it decides nothing now: open the "
               "approval (the message's Open button) to decide it")
NOT_OURS = ("this button does not match what its thread waits for (it was not made by "
            "intermission, or the call it showed is no longer in the thread's log); nothing "
            "was done")


def shown_bindings(session: Any, iid: str) -> list[str]:
    """The :func:`~.signature.binding` of every call (or graph approval) a message about
    interrupt ``iid`` may have shown: the waiting call's, those of the earlier pauses the
    log still holds (a click on a decided one is answered by the decision's check), or the
    graph approval's request."""
    from ..stores.rows import graph_request

    tasks = [t for t in session.hitl.tasks if t.call_uuid == iid]
    tasks += [t for e in session.events if e.kind == "hitl_pending"
              for t in e.tasks if t.call_uuid == iid]  # fmt: skip
    out = [binding(t.tool_name, t.args, t.created_ms) for t in tasks]
    if iid.startswith("approval-"):
        request = graph_request(session)
        out.append(binding(None, {"request": request} if request is not None else {}, None))
    return out


def _decide_one(s: Any, iid: str, approve: bool, seen: str) -> None:
    """Record the click's decision on ``s`` (the read copy, then the claimed one), on the
    call the message showed (``seen``: its binding) and no other."""
    from ..agui.interrupts import open_interrupts
    from ..decisions import HITLDecision
    from ..errors import InvalidDecisionError
    from ..hitl import HITL
    from ..hitl.graph import decide_graph

    task = next((t for t in s.hitl.tasks if t.call_uuid == iid), None)
    if task is not None:
        if binding(task.tool_name, task.args, task.created_ms) != seen:
            raise InvalidDecisionError(
                f"call {iid} of thread {s.session_id} is not the one the message showed "
                "(the model gave a later call the same id); nothing was changed",
                call_uuid=iid)  # fmt: skip
        decision = HITLDecision.approve() if approve else HITLDecision.reject()
        HITL.submit(s, task, decision)
        return
    if iid not in {i.id for i in open_interrupts(s)}:  # a graph approval since decided
        raise UnknownTaskError(
            f"interrupt {iid} of thread {s.session_id} is no longer open (it was decided, or "
            "the thread moved on); nothing was changed"
        )
    if seen not in shown_bindings(s, iid):
        raise InvalidDecisionError(
            f"approval {iid} of thread {s.session_id} asks something other than the message "
            "showed; nothing was changed")
    decide_graph(s, "APPROVE" if approve else "REJECT")


def _post(url: str, message: dict[str, Any]) -> None:
    """POST ``message`` to a ``response_url`` (its requests never logged with the URL)."""
    from .._compat import require
    from ..notify.targets import hiding

    httpx = require("httpx", "notify")
    with hiding(url):
        httpx.post(url, json=message, timeout=5.0, follow_redirects=False)
