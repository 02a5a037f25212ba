"""One request at a time on a session object (call, call_async, stream, TeamAgent.step)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..errors import RequestInProgressError

if TYPE_CHECKING:
    from ..core.session import AgentSession

__all__ = ["enter", "leave"]

_RUNNING: dict[int, Any] = {}
"""id(session) -> the asyncio task running that session's request."""
_RUNNING_LOCK = threading.Lock()


async def enter(session: AgentSession) -> Any:
    """Take the session for one request, or refuse: two requests at once on one session
    object (two ``call_async``, a click while a stream runs) would both clear pending,
    replay the same decisions and ask the model twice. Requests run on several threads (a
    stream iterated synchronously, a widget's handler), hence the lock. The one wait: a
    request whose stream was given up (``break``, ``aclose``) is unwinding its cancelled
    run on this loop, and the next request waits for that instead of being refused. Team
    members run inside their team's request and do not pass through here."""
    import asyncio

    key = id(session)  # the session is alive while it runs, so its id cannot be reused
    me = asyncio.current_task() or object()  # (a coroutine driven without a task)
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


def leave(session: AgentSession, me: Any) -> None:
    with _RUNNING_LOCK:
        if _RUNNING.get(id(session)) is me:
            del _RUNNING[id(session)]
