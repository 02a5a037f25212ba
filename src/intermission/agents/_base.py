"""What every agent shares: its name, requests (call / call_async / stream) and running as a
member of a team graph."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from .._clock import Clock
from .._ids import IdFactory
from ..core.history import take_checkpoint as _checkpoint
from ._exclusive import enter, leave
from .request import AgentRequest, AgentResponse

if TYPE_CHECKING:
    from ..core.context import FlowContext
    from ..core.events_log import RunScope
    from ..core.graph import Node
    from ..core.session import AgentSession
    from ..events import Event
    from ..traces import ReActTrace, TeamTrace

__all__ = ["AgentBase"]


T = TypeVar("T", "ReActTrace", "TeamTrace")
_KEEP: Any = object()


class AgentBase:
    """Subclasses implement :meth:`run`; requests and team membership come from here."""

    _name: str
    clock: Clock | None
    ids: IdFactory

    @property
    def name(self) -> str:
        """The agent's name (also its node id in a team)."""
        return self._name

    def prompt(self, text: str | None = None) -> AgentRequest:
        """A new task (``text``), or — empty — continue the original prompt (R3)."""
        from .. import _check

        _check.text("prompt", text, optional=True)
        return AgentRequest(self._request, text)

    async def _request(
        self,
        session: AgentSession,
        prompt: str | None,
        sink: Callable[[Event], None] | None,
        pacer: Callable[[], Coroutine[Any, Any, None]] | None,
        requester: Any = None,
    ) -> AgentResponse:
        from ..core.events_log import RunScope

        scope = RunScope(self.ids("run"), self._name, session, self.clock, sink, pacer)
        run = self.run(session, prompt, scope, top_level=True)
        # a new prompt names who sent it (None: nobody said); a resume keeps its request's
        return await self._exclusive(session, run, requester if prompt else _KEEP)

    @staticmethod
    async def _exclusive(
        session: AgentSession, run: Coroutine[Any, Any, AgentResponse], requester: Any = _KEEP
    ) -> AgentResponse:
        """Await ``run``, a top-level request, as the only one on ``session`` (see enter);
        ``requester``: who sent it, recorded once the request is the session's own
        (``_KEEP``: a resume keeps the recorded one)."""
        try:
            me = await enter(session)
        except BaseException:
            run.close()  # never started: no "never awaited" warning
            raise
        if requester is not _KEEP:
            session.requester = requester  # type: ignore[attr-defined]
        since = session.events.next_seq
        try:
            response = await run
        except BaseException:
            # an error or a cancel ends a request too (R43), unless it was refused before
            # it logged anything
            _checkpoint(session, failing=True, since=since)
            raise
        else:
            _checkpoint(session, failing=False)
            return response
        finally:
            leave(session, me)

    async def run_as_member(self, ctx: FlowContext, node: Node) -> None:
        """Run as a node of a team graph (teams nest)."""
        from .team_member import run_member

        await run_member(self, ctx, node)

    async def run(
        self, session: AgentSession, prompt: str | None, scope: RunScope, *, top_level: bool
    ) -> AgentResponse:
        """One request on ``session`` (used by requests and by teams)."""
        raise NotImplementedError

    def _open(
        self, session: AgentSession, trace: T | None, new: Callable[[], T], *, top_level: bool
    ) -> T:
        """Start a request: clear pending (R3; a pending() racing with this from another
        thread is cleared too, R5), own a top-level session, and get this agent's trace
        (``new()`` makes it on the first request)."""
        session.pending(False, None)
        if top_level:
            session.agent = self._name
        if trace is None:
            trace = new()
            session.traces[self._name] = trace
        trace._session = session
        return trace
