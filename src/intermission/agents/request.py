"""Requests: ``agent.prompt(text).session(s)`` then ``call()``, ``call_async()`` or ``stream()``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from .._sync import run_sync
from ..core.session import AgentSession, InMemoryAgentSession
from ..errors import ModelError, UsageError
from .stream import EventStream, Runner

__all__ = ["AgentRequest", "AgentResponse", "EventStream", "Runner"]


@dataclass(frozen=True, slots=True)
class AgentResponse:
    """The result of one request."""

    content: str
    """The final answer (empty for a generic pending, R6)."""
    is_abnormal: bool
    trace: Any
    session: AgentSession
    error: ModelError | None = None
    """Why the request ended abnormally when its model failed (after its retries), else None.

    The request is left resumable: an empty ``prompt()`` asks the model again."""

    @property
    def is_pending(self) -> bool:
        """True when the session is parked after this request."""
        return self.session.is_pending


class AgentRequest:
    """A prepared request; pick a session, then call, await or stream it."""

    def __init__(self, runner: Runner, prompt: str | None) -> None:
        self._runner = runner
        self._prompt = prompt or None
        self._session: AgentSession | None = None
        self._adopt = False

    def principal(self, who: Any) -> AgentRequest:
        """Who sends this request (a :class:`~intermission.Principal`, vouched for by the
        calling code): recorded on the session as its requester and on every approval the
        request asks for, so a policy can keep them from deciding it
        (``not_requester``). Only a new prompt names a requester; a resume keeps the one
        of the request it continues."""
        from ..principals import actor_of

        actor = actor_of(who)
        if actor is None:
            raise UsageError("principal() takes a Principal, not None")
        self._runner = partial(self._runner, requester=actor)  # type: ignore[call-arg]
        return self

    def session(self, session: AgentSession) -> AgentRequest:
        """Run on ``session`` (default: a fresh in-memory session)."""
        if not isinstance(getattr(session, "session_id", None), str) or not hasattr(
            session, "context"
        ):
            raise UsageError(
                "session() takes a session (InMemoryAgentSession.of(id), or one loaded from "
                f"a store), not {type(session).__name__}"
            )
        self._session = session
        return self

    def adopt(self) -> AgentRequest:
        """Run on a session made by another agent (another name, or other tools or
        approval policy: its fingerprint), and make it this agent's from now on. Without
        it such a request is refused with AgentMismatchError and changes nothing. Adopt
        on purpose: the new agent's tools and policy decide what runs from here on."""
        self._adopt = True
        return self

    def _run(self) -> Runner:
        if not self._adopt:
            return self._runner
        adopting: Runner = partial(cast(Any, self._runner), adopt=True)
        return adopting

    def _target(self) -> AgentSession:
        if self._session is None:
            self._session = InMemoryAgentSession.of()
        return self._session

    def call(self) -> AgentResponse:
        """Run to completion or to a pause; works inside a running loop (a notebook cell)."""
        result: AgentResponse = run_sync(self._run()(self._target(), self._prompt, None, None))
        return result

    async def call_async(self) -> AgentResponse:
        """Async :meth:`call`."""
        result: AgentResponse = await self._run()(self._target(), self._prompt, None, None)
        return result

    def stream(self) -> EventStream:
        """Events as the reader asks for them: ``async for`` or plain ``for`` (R24–R26, R41)."""
        return EventStream(self._run(), self._target(), self._prompt)
