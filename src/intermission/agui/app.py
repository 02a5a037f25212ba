"""The ASGI app: AG-UI run endpoint, open interrupts, replay, reviewer console.

Hostile input gets a 4xx with a one-line JSON error (or, once the stream started, a
``RUN_ERROR``), never a traceback: bodies are size-limited and validated by
``ag_ui.core.RunAgentInput`` before anything is read from the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ag_ui import core as ag
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import otel
from .._json import loads
from ..agents.table import AgentTable
from ..errors import (
    DecisionRefusedError,
    EffectNotReopenableError,
    IntermissionError,
    NothingToResolveError,
    SessionBusyError,
    SessionNotFoundError,
    UsageError,
)
from ..principals import Principal, actor_of
from ..stores.base import SessionStore
from ..stores.effects import resolve_unknown_effect
from .auth import Auth, TokenAuth
from .console import CONSOLE_HTML
from .interrupts import decided
from .listings import (
    DECIDED,
    MAX_DECIDED,
    decided_listing,
    interrupts_of,
    listing,
    outcomes_of,
    page_of,
)
from .replay import replay
from .runs import DEFAULT_DRAIN_S, Runs
from .served import Served
from .sse import encode, parse_cursor

__all__ = ["DEFAULT_DRAIN_S", "LOCAL_HOSTS", "MAX_BODY", "TOKEN_HOLDER", "AGUIApp", "agui_app"]

TOKEN_HOLDER = "token-holder"
"""The one principal of a server started with ``token=`` (everyone who holds it)."""
PRINCIPAL = "intermission.principal"
RUNS = "intermission.runs"
"""Where a signed route finds the server's runs (``scope["state"]``): its work that may
resume a run is counted in the drain, and refused once a stop began."""
"""Where a request's authenticated principal sits in its ASGI scope state."""

MAX_BODY = 1_000_000
"""Largest ``RunAgentInput`` accepted, in bytes."""
MAX_ID = 200
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _check_id(value: str, what: str) -> None:
    if not value or len(value) > MAX_ID or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise UsageError(f"{what} is 1 to {MAX_ID} printable characters")


def _check_thread(value: str) -> None:
    """A thread id must be addressable as ``/threads/{id}``: the path is decoded before
    routing (``%2F`` is a ``/``) and browsers resolve ``.``/``..`` segments."""
    _check_id(value, "threadId")
    if "/" in value or value in (".", ".."):
        raise UsageError("threadId holds no '/' and is not '.' or '..' (it is a URL path segment)")


async def _body(request: Request) -> bytes:
    size = request.headers.get("content-length")
    if size is not None and (not size.isdigit() or int(size) > MAX_BODY):
        raise _TooLarge
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > MAX_BODY:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


class _TooLarge(Exception):
    pass


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
"""The ``Host`` names a server without a token answers (plus the host it is bound to)."""


def _host_name(value: str) -> str:
    """The name part of a ``Host`` header (``[::1]:8000`` → ``::1``, ``a:80`` → ``a``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    return value.rpartition(":")[0] if value.count(":") == 1 else value


class AGUIApp:
    """The ASGI application :func:`agui_app` returns: ``await app(scope, receive, send)``.

    Its stop is graceful. From :meth:`stop` on (``serve`` calls it on SIGTERM/SIGINT; the
    ASGI lifespan's shutdown does too), a new run answers 503 ``SERVER_STOPPING``; the
    lifespan's shutdown then waits for the runs in flight, those whose client left
    included, up to ``drain_s`` seconds from the stop (:meth:`drain`), and releases the
    claims of any still going (logged), so another server can take their threads. Mounted
    inside another app (whose lifespan does not reach it), call :meth:`drain` from that
    app's shutdown."""

    def __init__(self, handle: ASGIApp, runs: Runs) -> None:
        self._handle = handle
        self._runs = runs
        self._companions: list[tuple[Callable[[], Any], Callable[[], Any]]] = []

    def run_beside(self, start: Callable[[], Any], stop: Callable[[], Any]) -> None:
        """Run a companion for the app's lifespan (the notification dispatcher of
        ``serve --notify``): ``start()`` at startup, ``stop()`` at shutdown, after the
        drain (the runs that finish during it may still have something to tell)."""
        self._companions.append((start, stop))

    @property
    def drain_s(self) -> float:
        """How long a stop waits for the runs in flight (seconds)."""
        return self._runs.drain_s

    @property
    def stopping(self) -> bool:
        """True once a stop began (new runs are refused)."""
        return self._runs.stopping is not None

    def stop(self) -> None:
        """Refuse new runs from now on (runs in flight go on); the drain time starts."""
        self._runs.stop()

    def drain(self) -> list[str]:
        """Stop, wait for the runs in flight (until ``drain_s`` after the stop), release
        the claims of those still going; returns what each of those was (also logged)."""
        return self._runs.drain()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection (HTTP, or the lifespan: its shutdown drains)."""
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    for start, _ in self._companions:
                        start()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await asyncio.to_thread(self.drain)
                    for _, stop in reversed(self._companions):
                        await asyncio.to_thread(stop)
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await self._handle(scope, receive, send)


async def _effect_body(request: Request, signed_in: bool) -> dict[str, Any]:
    """The JSON body of ``POST /threads/{id}/effects`` (UsageError when it is not one);
    ``signed_in``: the caller is an authenticated principal (a reviewer name is then
    optional, a display note only)."""
    try:
        data = loads(await _body(request), "the body")
    except ValueError as exc:
        raise UsageError(
            f"the body is JSON {{key, action: resolve|forget, result, reviewer}} ({exc})"
        ) from None
    if not isinstance(data, dict) or data.get("action") not in ("resolve", "forget"):
        raise UsageError('action is "resolve" (it happened, with result) or "forget" (it did not)')
    if not isinstance(data.get("key"), str) or not data["key"]:
        raise UsageError("key is the effect's key (a listed stuck entry's key)")
    reviewer = data.get("reviewer")
    if not (signed_in and reviewer is None) and (
        not isinstance(reviewer, str) or not reviewer.strip()
    ):
        raise UsageError("reviewer names who checked the external system")
    if data["action"] == "resolve" and "result" not in data:
        raise UsageError("result is the effect's result as JSON (null when it has none)")
    return data


def agui_app(
    agents: AgentTable | Mapping[str, Any],
    store: SessionStore,
    *,
    token: str | None = None,
    auth: Auth | None = None,
    hosts: Iterable[str] = (),
    origins: Iterable[str] = (),
    drain_s: float = DEFAULT_DRAIN_S,
    signed_routes: Mapping[str, ASGIApp] | None = None,
) -> AGUIApp:
    """An ASGI app serving ``agents`` on the sessions of ``store``: name → agent (one
    instance serves every run) or name → factory (called once per run, for agents that
    keep state of their own between calls), or an :class:`~intermission.AgentTable`
    (several versions per name, R62; a mapping whose values list versions, oldest first,
    is one too). A new thread starts on the newest version of its name; a stored one
    runs on its own version, or on a newer one that migrates it (under the thread's
    claim, after the run's decisions are recorded and before they are saved). A thread
    whose version this server neither serves nor migrates is refused before any of its
    code runs, nothing changed: ``RUN_ERROR`` with code ``AGENT_VERSION`` naming its
    version and those served (blue-green: the server still serving that version drains
    it). Listings give each thread's ``version`` (``ops@1``), ``served`` and, when not
    served, ``waiting`` (what the console shows beside its disabled buttons).

    Routes: ``POST /agents/{name}`` (AG-UI run: ``RunAgentInput`` in, SSE out),
    ``GET /interrupts`` (``?limit=&after=``; ``next`` is the cursor of the following
    page, null on the last), ``GET /threads/{thread_id}`` (a thread's interrupts,
    decisions and each decided approval's outcome), ``GET /threads/{thread_id}/events``
    (SSE replay after ``Last-Event-ID``),
    ``GET /whoami`` (the caller's principal, and ``signIn``: what the server needs,
    ``token`` or a reviewer ``name``; asked without credentials it answers who is nobody
    rather than 401), ``GET /decided`` (``?limit=``: the approvals decided last, each
    with who decided, what ran and its result), ``GET /`` (reviewer console),
    ``POST /threads/{thread_id}/effects`` (a person records that an effect of unknown
    outcome happened, ``{"key", "action": "resolve", "result", "reviewer"}``, or did not,
    ``"action": "forget"``). ``GET /interrupts`` also lists ``unreadable`` threads (id and
    why: a bad row never hides the rest) and, on its first page, ``stuck`` ones (an effect
    of unknown outcome).

    ``auth`` (:class:`~intermission.agui.auth.TokenAuth`,
    :class:`~intermission.agui.auth.JWTAuth`): every route but the console page needs
    ``Authorization: Bearer <token or JWT>`` naming a principal; it decides the
    interrupts it resumes and resolves the effects it records (a client-sent
    ``metadata.reviewer`` or ``reviewer`` is only a display note) and is the requester of
    the prompts it sends. ``token``: one token, one principal (``token-holder``).

    Without ``token`` or ``auth``, a web page the reviewer's browser opens must not drive
    the server: a ``POST`` needs ``Content-Type: application/json`` (a cross-origin form or
    ``no-cors`` fetch can only send ``text/plain``; else 415), the ``Host`` header must be
    one of :data:`LOCAL_HOSTS` or ``hosts`` (DNS rebinding; else 403), and an ``Origin``,
    when sent, must be the server's own or one of ``origins`` (else 403).

    ``drain_s``: how long a stop waits for the runs in flight (see :class:`AGUIApp`).

    ``signed_routes``: path → ASGI app for requests that carry their own signature and are
    authenticated by it, not by a bearer token nor the Host/Origin checks (``POST
    /slack/interactions``: see :mod:`intermission.slack`)."""
    from .. import _check

    _check.number("drain_s", drain_s, 0, 86400)
    served = Served(agents)
    if token is not None and (not isinstance(token, str) or not token):
        raise UsageError("token is a non-empty string")
    if token is not None and auth is not None:
        raise UsageError("give token or auth, not both")
    if auth is not None and not callable(getattr(auth, "authenticate", None)):
        raise UsageError(f"auth is a TokenAuth or a JWTAuth, not {type(auth).__name__}")
    if token is not None:
        auth = TokenAuth({token: Principal(TOKEN_HOLDER)})
    allowed_hosts = {h.strip("[]").lower() for h in (*LOCAL_HOSTS, *hosts)}
    allowed_origins = {o.rstrip("/").lower() for o in origins}
    runs = Runs(served, store, float(drain_s))
    sign_in = "name" if auth is None else "token"
    """What the console asks for: a bearer token (auth on), or a reviewer name (off)."""

    def principal_of(request: Request) -> Principal | None:
        """The caller's principal; None: refused (with auth) or nobody (without)."""
        if auth is None:
            return None
        return auth.authenticate(request.headers.get("authorization"))

    def foreign(request: Request) -> Response | None:
        """Why a request may come from a page it should not (a 403/415), or None."""
        if auth is None:
            host = request.headers.get("host", "")
            if _host_name(host) not in allowed_hosts:
                return _error(403, "Host not allowed (start the server with --host NAME)")
            origin = request.headers.get("origin")
            if origin is not None:
                own = {f"{scheme}://{host}".lower() for scheme in ("http", "https")}
                if origin.rstrip("/").lower() not in own | allowed_origins:
                    return _error(403, "cross-origin requests are not allowed")
        return None

    async def run(request: Request) -> Response:
        name = request.path_params["name"]
        kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind != "application/json":
            return _error(415, "a run is a JSON body (Content-Type: application/json)")
        if name not in served:
            return _error(404, f"no agent named {name[:MAX_ID]!r}")
        try:
            raw = await _body(request)
        except _TooLarge:
            return _error(413, f"a request body is at most {MAX_BODY} bytes")
        try:
            data = ag.RunAgentInput.model_validate_json(raw)
            _check_thread(data.thread_id)
            _check_id(data.run_id, "runId")
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return _error(422, f"not a RunAgentInput: {where}: {first['msg']}"[:500])
        except UsageError as exc:
            return _error(422, str(exc))
        who = request.scope.get("state", {}).get(PRINCIPAL)
        traced = otel.server_run(request.headers, name, data.thread_id, data.run_id)
        if traced is None:
            frames, headers = runs.start(name, data, who), SSE_HEADERS
        else:  # tracing on: the run (started in this context) continues the client's trace
            with traced.entered():
                frames = runs.start(name, data, who)
            headers = {**SSE_HEADERS, **traced.headers}
        if frames is None:
            if traced is not None:
                traced.span.end()
            response = _error(503, "SERVER_STOPPING: this server is stopping; send the run "
                              "to another server or again once it is back")  # fmt: skip
            response.headers["Retry-After"] = "5"
            return response
        if traced is not None:
            frames = traced.frames(frames)
        return StreamingResponse(frames, media_type="text/event-stream", headers=headers)

    async def interrupts(request: Request) -> Response:
        try:
            limit, after = page_of(request)
        except UsageError as exc:
            return _error(400, str(exc))

        return JSONResponse(await run_in_threadpool(listing, store, served, limit, after))

    async def effect(request: Request) -> Response:
        tid = request.path_params["thread_id"]
        kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind != "application/json":
            return _error(415, "the body is JSON (Content-Type: application/json)")
        who = request.scope.get("state", {}).get(PRINCIPAL)
        try:
            _check_thread(tid)
            data = await _effect_body(request, who is not None)
        except _TooLarge:
            return _error(413, f"a request body is at most {MAX_BODY} bytes")
        except UsageError as exc:
            return _error(422, str(exc))
        forget = data["action"] == "forget"
        options: dict[str, Any] = {"forget": True} if forget else {"result": data.get("result")}

        def apply() -> Any:  # (signed in: the principal resolves, not the typed name)
            return resolve_unknown_effect(
                store, tid, data["key"], reviewer=data.get("reviewer"), via="console",
                principal=actor_of(who, via="console"), **options,
            )  # fmt: skip

        try:
            s = await run_in_threadpool(apply)
        except SessionNotFoundError:
            return _error(404, "no such thread")
        except (NothingToResolveError, SessionBusyError, EffectNotReopenableError) as exc:
            return _error(409, str(exc).splitlines()[0][:500])
        except DecisionRefusedError as exc:  # the authorising approval's policy (R60)
            return _error(403, str(exc).splitlines()[0][:500])
        except UsageError as exc:
            return _error(422, str(exc).splitlines()[0][:500])
        entry = s.ledger[data["key"]]
        answer = {"threadId": tid, "key": data["key"], "status": entry.status,
                  "threadStatus": s.status}  # fmt: skip
        if forget and entry.approval is not None:  # its approval is open again (R60)
            answer["reopened"] = entry.approval.call_uuid
        return JSONResponse(answer)

    async def thread(request: Request) -> Response:
        tid = request.path_params["thread_id"]
        try:
            session = await run_in_threadpool(store.load, tid)
        except SessionNotFoundError:
            return _error(404, "no such thread")
        decisions = [
            {"interruptId": k, "approved": d.approve, "reviewer": d.reviewer,
             "display": d.display, "timeMs": d.time_ms, "applied": d.applied,
             "timedOut": d.timed_out}
            for k, d in decided(session).items()
        ]  # fmt: skip
        return JSONResponse(
            {
                "threadId": tid,
                "agent": session.agent,
                **served.describe(session),
                "status": session.status,
                "interrupts": interrupts_of(session, served),
                "decisions": decisions,
                "outcomes": outcomes_of(session),
            }
        )

    async def events(request: Request) -> Response:
        tid = request.path_params["thread_id"]
        try:
            session = await run_in_threadpool(store.load, tid)
        except SessionNotFoundError:
            return _error(404, "no such thread")
        after = parse_cursor(request.headers.get("last-event-id"))

        def frames() -> list[str]:
            return [encode(event, cursor) for cursor, event in replay(session, after)]

        # read whole before the answer starts: a log that cannot be read is an error
        # answer, not a 200 stream cut off midway
        body = await run_in_threadpool(frames)
        return StreamingResponse(iter(body), media_type="text/event-stream", headers=SSE_HEADERS)

    async def console(request: Request) -> Response:
        return HTMLResponse(CONSOLE_HTML, headers={
            "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; "
            "style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'",
            "Cache-Control": "no-store",
        })  # fmt: skip

    async def whoami(request: Request) -> Response:
        who = request.scope.get("state", {}).get(PRINCIPAL)
        return JSONResponse({
            "name": who.name if who is not None else None,
            "roles": sorted(who.roles) if who is not None else [],
            "authenticated": who is not None,
            "signIn": sign_in,
        })  # fmt: skip

    async def recently_decided(request: Request) -> Response:
        text = request.query_params.get("limit", str(DECIDED))
        if not (text.isascii() and text.isdigit() and 0 < int(text) <= MAX_DECIDED):
            return _error(400, f"limit is a whole number from 1 to {MAX_DECIDED}")
        return JSONResponse(await run_in_threadpool(decided_listing, store, served, int(text)))

    routes = [
        Route("/whoami", whoami, methods=["GET"]),
        Route("/decided", recently_decided, methods=["GET"]),
        Route("/agents/{name}", run, methods=["POST"]),
        Route("/interrupts", interrupts, methods=["GET"]),
        Route("/threads/{thread_id}", thread, methods=["GET"]),
        Route("/threads/{thread_id}/events", events, methods=["GET"]),
        Route("/threads/{thread_id}/effects", effect, methods=["POST"]),
    ]

    async def refused(request: Request, exc: Exception) -> Response:
        # a path the store refuses as an id (400), or the store away (503)
        status = 400 if isinstance(exc, UsageError) else 503
        return _error(status, str(exc).splitlines()[0][:300])

    app = Starlette(routes=routes, exception_handlers={IntermissionError: refused})
    page = Starlette(routes=[Route("/", console, methods=["GET"])])

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        signed = (signed_routes or {}).get(scope["path"])
        if signed is not None:  # (its own signature is its authentication)
            scope.setdefault("state", {})[RUNS] = runs
            await signed(scope, receive, send)
            return
        request = Request(scope)
        # the console page itself holds no data: it asks for the token, then sends it
        if scope["path"] == "/" and scope["method"] in ("GET", "HEAD"):
            await page(scope, receive, send)
            return
        refused_here = foreign(request)
        if refused_here is not None:
            await refused_here(scope, receive, send)
            return
        if auth is not None:
            who = principal_of(request)
            if who is None and scope["path"] == "/whoami" and not request.headers.get(
                "authorization"
            ):  # nobody signed in yet: the console learns it needs a token, not a 401
                await app(scope, receive, send)
                return
            if who is None:
                response: Response = _error(401, "missing or wrong bearer token")
                response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
            scope.setdefault("state", {})[PRINCIPAL] = who
        await app(scope, receive, send)

    return AGUIApp(asgi, runs)
