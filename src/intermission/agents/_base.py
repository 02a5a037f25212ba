"""What every agent shares: its name, requests (call / call_async / stream) and running as a
member of a team graph."""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from .._clock import Clock
from .._ids import IdFactory
from ..errors import RequestInProgressError
from .request import AgentRequest, AgentResponse

if TYPE_CHECKING:
    from ..core.context import FlowContext
    from ..core.events_log import RunScope
    from ..core.graph import Node
    from ..core.session import AgentSession
    from ..events import Event
    from ..traces import ReActTrace, TeamTrace

__all__ = ["AgentBase"]

_RUNNING: dict[int, Any] = {}
"""id(session) -> the asyncio task running that session's request."""
_RUNNING_LOCK = threading.Lock()


async def _enter(session: AgentSession) -> Any:
    """Take the session for one request, or refuse: two requests at once on one session
    object (two ``call_async``, a click while a stream runs) would both clear pending,
    replay the same decisions and ask the model twice. Requests run on several threads (a
    stream iterated synchronously, a widget's handler), hence the lock. The one wait: a
    request whose stream was given up (``break``, ``aclose``) is unwinding its cancelled
    run on this loop, and the next request waits for that instead of being refused. Team
    members run inside their team's request and do not pass through here."""
    import asyncio

    key = id(session)  # the session is alive while it runs, so its id cannot be reused
    me = asyncio.current_task()
    while True:
        with _RUNNING_LOCK:
            holder = _RUNNING.get(key)
            if holder is None:
                _RUNNING[key] = me
                return me
        if not _unwinding(holder):
            raise RequestInProgressError(session.session_id)
        await asyncio.wait({holder})


def _unwinding(task: Any) -> bool:
    import asyncio

    # Task.cancelling() is Python 3.11+; on 3.10 such a request is refused instead
    cancelling = getattr(task, "cancelling", None)
    return (
        cancelling is not None
        and task.get_loop() is asyncio.get_running_loop()
        and cancelling() > 0
    )


def _leave(session: AgentSession, me: Any) -> None:
    with _RUNNING_LOCK:
        if _RUNNING.get(id(session)) is me:
            del _RUNNING[id(session)]


T = TypeVar("T", "ReActTrace", "TeamTrace")


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
        return AgentRequest(self._request, text)

    async def _request(
        self, session: AgentSession, prompt: str | None, sink: Callable[[Event], None] | None
    ) -> AgentResponse:
        from ..core.events_log import RunScope

        scope = RunScope(self.ids("run"), self._name, session, self.clock, sink)
        return await self._exclusive(session, self.run(session, prompt, scope, top_level=True))

    @staticmethod
    async def _exclusive(
        session: AgentSession, run: Coroutine[Any, Any, AgentResponse]
    ) -> AgentResponse:
        """Await ``run``, a top-level request, as the only one on ``session`` (see _enter)."""
        try:
            me = await _enter(session)
        except BaseException:
            run.close()  # never started: no "never awaited" warning
            raise
        try:
            return await run
        finally:
            _leave(session, me)

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
