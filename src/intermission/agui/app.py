"""The ASGI app: AG-UI run endpoint, open interrupts, replay, reviewer console.

Hostile input gets a 4xx with a one-line JSON error (or, once the stream started, a
``RUN_ERROR``), never a traceback: bodies are size-limited and validated by
``ag_ui.core.RunAgentInput`` before anything is read from the store.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ag_ui import core as ag
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import IntermissionError, SessionNotFoundError, UsageError
from ..principals import Principal
from ..stores.base import PendingSession, SessionStore
from .auth import Auth, TokenAuth
from .console import CONSOLE_HTML
from .interrupts import decided, open_interrupts
from .replay import replay
from .runs import Runs
from .sse import encode, parse_cursor

__all__ = ["LOCAL_HOSTS", "MAX_BODY", "TOKEN_HOLDER", "agui_app"]

TOKEN_HOLDER = "token-holder"
"""The one principal of a server started with ``token=`` (everyone who holds it)."""
PRINCIPAL = "intermission.principal"
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


def _interrupts_of(session: Any) -> list[dict[str, Any]]:
    return [
        {
            "threadId": session.session_id,
            "agent": session.agent,
            "interrupt": i.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        for i in open_interrupts(session, session.clock.now_ms())  # expired: not decidable
    ]


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
"""The ``Host`` names a server without a token answers (plus the host it is bound to)."""


def _host_name(value: str) -> str:
    """The name part of a ``Host`` header (``[::1]:8000`` → ``::1``, ``a:80`` → ``a``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    return value.rpartition(":")[0] if value.count(":") == 1 else value


PAGE = 200
"""``GET /interrupts`` lists the open interrupts of this many paused threads a page."""
MAX_PAGE = 1000


def _cursor_of(item: PendingSession) -> str:
    """An opaque ``next`` cursor: the last listed entry's place in ``store.pending()``."""
    raw = json.dumps([item.updated_ms, item.session_id, item.agent]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _page_of(request: Request) -> tuple[int, PendingSession | None]:
    """``?limit=&after=`` of ``GET /interrupts`` (UsageError when not ours)."""
    text = request.query_params.get("limit", str(PAGE))
    if not (text.isascii() and text.isdigit() and 0 < int(text) <= MAX_PAGE):
        raise UsageError(f"limit is a whole number from 1 to {MAX_PAGE}")
    cursor = request.query_params.get("after")
    if cursor is None:
        return int(text), None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        updated, sid, agent = json.loads(raw)
        if not isinstance(sid, str) or not isinstance(updated, (int, float)):
            raise ValueError
        return int(text), PendingSession(sid, agent if isinstance(agent, str) else None,
                                         None, updated_ms=float(updated))  # fmt: skip
    except (ValueError, TypeError, binascii.Error):
        raise UsageError("after is the next cursor of an earlier page") from None


def agui_app(
    agents: Mapping[str, Callable[[], Any]],
    store: SessionStore,
    *,
    token: str | None = None,
    auth: Auth | None = None,
    hosts: Iterable[str] = (),
    origins: Iterable[str] = (),
) -> Any:
    """An ASGI app serving ``agents`` (name → factory) on the sessions of ``store``.

    Routes: ``POST /agents/{name}`` (AG-UI run: ``RunAgentInput`` in, SSE out),
    ``GET /interrupts`` (``?limit=&after=``; ``next`` is the cursor of the following
    page, null on the last), ``GET /threads/{thread_id}`` (a thread's interrupts and
    decisions), ``GET /threads/{thread_id}/events`` (SSE replay after ``Last-Event-ID``),
    ``GET /whoami`` (the caller's principal), ``GET /`` (reviewer console).

    ``auth`` (:class:`~intermission.agui.auth.TokenAuth`,
    :class:`~intermission.agui.auth.JWTAuth`): every route but the console page needs
    ``Authorization: Bearer <token or JWT>`` naming a principal; it decides the
    interrupts it resumes (a client-sent ``metadata.reviewer`` is only a display note)
    and is the requester of the prompts it sends. ``token``: one token, one principal
    (``token-holder``).

    Without ``token``, a web page the reviewer's browser opens must not drive the server:
    a ``POST`` needs ``Content-Type: application/json`` (a cross-origin form or
    ``no-cors`` fetch can only send ``text/plain``; else 415), the ``Host`` header must be
    one of :data:`LOCAL_HOSTS` or ``hosts`` (DNS rebinding; else 403), and an ``Origin``,
    when sent, must be the server's own or one of ``origins`` (else 403)."""
    if not isinstance(agents, Mapping) or not all(callable(f) for f in agents.values()):
        raise UsageError("agents is a mapping of agent names to factories")
    for key, factory in agents.items():
        # threads are keyed by the agent's own name (session.agent): a route under another
        # name would pause threads no resume on that route can reach
        own = getattr(factory(), "name", None)
        if isinstance(own, str) and own != key:
            raise UsageError(
                f"agents[{key!r}] makes an agent named {own!r}: serve it as {own!r} "
                "(a thread belongs to its agent's own name)"
            )
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
    runs = Runs(agents, store)

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
        if name not in agents:
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
        return StreamingResponse(
            runs.stream(name, data, who), media_type="text/event-stream", headers=SSE_HEADERS
        )

    async def interrupts(request: Request) -> Response:
        try:
            limit, after = _page_of(request)
        except UsageError as exc:
            return _error(400, str(exc))

        def collect() -> dict[str, Any]:
            out: list[dict[str, Any]] = []
            page = store.pending(limit=limit + 1, before=after)
            for item in page[:limit]:
                try:
                    out += _interrupts_of(store.load(item.session_id))
                except SessionNotFoundError:
                    continue  # deleted meanwhile
            more = len(page) > limit
            return {"interrupts": out, "next": _cursor_of(page[limit - 1]) if more else None}

        return JSONResponse(await run_in_threadpool(collect))

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
                "status": session.status,
                "interrupts": _interrupts_of(session),
                "decisions": decisions,
            }
        )

    async def events(request: Request) -> Response:
        tid = request.path_params["thread_id"]
        try:
            session = await run_in_threadpool(store.load, tid)
        except SessionNotFoundError:
            return _error(404, "no such thread")
        after = parse_cursor(request.headers.get("last-event-id"))

        def frames() -> Iterator[str]:
            for cursor, event in replay(session, after):
                yield encode(event, cursor)

        return StreamingResponse(frames(), media_type="text/event-stream", headers=SSE_HEADERS)

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
        })  # fmt: skip

    routes = [
        Route("/whoami", whoami, methods=["GET"]),
        Route("/agents/{name}", run, methods=["POST"]),
        Route("/interrupts", interrupts, methods=["GET"]),
        Route("/threads/{thread_id}", thread, methods=["GET"]),
        Route("/threads/{thread_id}/events", events, methods=["GET"]),
    ]

    async def refused(request: Request, exc: Exception) -> Response:
        # a path the store refuses as an id (400), or the store away (503)
        status = 400 if isinstance(exc, UsageError) else 503
        return _error(status, str(exc).splitlines()[0][:300])

    app = Starlette(routes=routes, exception_handlers={IntermissionError: refused})
    page = Starlette(routes=[Route("/", console, methods=["GET"])])

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await app(scope, receive, send)
            return
        if scope["type"] != "http":
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
            if who is None:
                response: Response = _error(401, "missing or wrong bearer token")
                response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
            scope.setdefault("state", {})[PRINCIPAL] = who
        await app(scope, receive, send)

    return asgi
