"""ScriptedModel: the deterministic offline model that ships in the package (R15)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence

from .. import _check
from .._check import shown
from .._ids import RANDOM_IDS, IdFactory
from ..errors import ModelError, ScriptExhaustedError, UsageError
from ..messages import ChatMessage, ToolCall
from .models import ModelChunk, ToolSchema

__all__ = ["Reply", "ScriptedModel"]

Reply = str | Sequence[ToolCall]
"""A scripted turn: final text, or a list of tool calls."""
ScriptFn = Callable[[list[ChatMessage], list[ToolSchema]], Reply]


class ScriptedModel:
    """A model that replays a script: a list of replies, or a function returning a reply.

    The list holds one reply per model call; the function takes ``(messages, tools)``.
    Text is streamed in chunks.

    The list form counts its replies. A session remembers how many replies its agent had,
    so a session resumed in a new process, by an agent built again on a fresh
    ``ScriptedModel``, goes on with the next reply (see :meth:`catch_up`).

    Example:
        ```python
        from intermission import ReActAgent, ScriptedModel, ToolCall, tool

        @tool
        def lookup_user(user_id: int) -> str:
            "Look a user up by id."
            return f"user {user_id} is alice"

        model = ScriptedModel([[ToolCall("lookup_user", {"user_id": 1001})], "User 1001 is alice."])
        agent = ReActAgent.of(model).name("support").tools(lookup_user).build()
        print(agent.prompt("Who is user 1001?").call().content)
        #> User 1001 is alice.
        echo = ScriptedModel(lambda messages, tools: f"You said: {messages[-1].content}")
        print(ReActAgent.of(echo).name("echo").build().prompt("hi").call().content)
        #> You said: hi
        ```
    """

    def __init__(
        self,
        script: Sequence[Reply] | ScriptFn,
        *,
        chunk_size: int = 16,
        chunk_delay: float = 0.0,
        ids: IdFactory | None = None,
        keep_calls: int = 20,
    ) -> None:
        if not callable(script) and (
            isinstance(script, (str, bytes)) or not isinstance(script, Sequence)
        ):
            raise UsageError(
                "a script is a list of replies (text, or a list of ToolCall) or a function "
                f"of (messages, tools), not {type(script).__name__}"
                + ("; for one reply write [text]" if isinstance(script, str) else "")
            )
        self._fn: ScriptFn | None = script if callable(script) else None
        self._replies: list[Reply] = [] if callable(script) else list(script)
        for i, reply in enumerate(self._replies):
            calls = isinstance(reply, Sequence) and not isinstance(reply, (str, bytes))
            if not isinstance(reply, str) and not (
                calls and reply and all(isinstance(c, ToolCall) for c in reply)
            ):
                raise UsageError(
                    f"reply {i + 1} of the script is text or a non-empty list of ToolCall, "
                    f"not {shown(reply)}"
                )
        self.chunk_size = _check.count("chunk_size", chunk_size, 1, 10**9)
        self.chunk_delay = _check.number("chunk_delay", chunk_delay, 0, 3600)
        self.ids = ids or RANDOM_IDS
        _check.count("keep_calls", keep_calls, 0, 1_000_000)
        if ids is not None and not callable(ids):
            raise UsageError(f"ids is an id factory (a function), not {shown(ids)}")
        self.turn = 0
        """How many replies were given so far."""
        self.calls: deque[list[ChatMessage]] = deque(maxlen=keep_calls)
        """The messages of the last ``keep_calls`` calls (for tests); bounded, so a model
        that lives as long as a server does not grow without end."""
        self._lock = threading.Lock()

    def _next_reply(self, messages: list[ChatMessage], tools: list[ToolSchema]) -> Reply:
        with self._lock:
            self.turn += 1
            turn = self.turn
            self.calls.append(list(messages))
        if self._fn is not None:
            return self._fn(messages, tools)
        if turn > len(self._replies):
            raise ScriptExhaustedError(turn, len(self._replies))
        return self._replies[turn - 1]

    def catch_up(self, replies: int) -> None:
        """Continue after reply ``replies`` if fewer were given so far: an agent resuming a
        session in a new process (where this model is a fresh object) calls this with the
        number of replies it already had on that session, so the script goes on where the
        conversation stopped instead of starting over. It never moves back."""
        with self._lock:
            self.turn = max(self.turn, replies)

    def _give_back(self, turn: int) -> None:
        with self._lock:
            if self.turn == turn:
                self.turn -= 1

    async def stream(
        self, messages: list[ChatMessage], tools: list[ToolSchema]
    ) -> AsyncIterator[ModelChunk]:
        """Stream the next scripted reply. A reply abandoned before its end (the run was
        stopped while reading it) is given again on the next call."""
        reply = self._next_reply(messages, tools)
        turn = self.turn
        finished = False
        try:
            if isinstance(reply, str):
                for i in range(0, max(len(reply), 1), self.chunk_size):
                    if self.chunk_delay:
                        await _sleep(self.chunk_delay)
                    yield ModelChunk(text=reply[i : i + self.chunk_size])
                finished = True
                return
            calls = list(reply)
            if not calls or not all(isinstance(c, ToolCall) for c in calls):
                finished = True  # a broken script is not given again
                raise ModelError(
                    f"turn {turn}: a reply is a str or a non-empty list of ToolCall"
                )
            if self.chunk_delay:
                await _sleep(self.chunk_delay)
            yield ModelChunk(
                tool_calls=[
                    c if c.id else ToolCall(c.name, c.args, self.ids("call")) for c in calls
                ]
            )
            finished = True
        finally:
            if not finished:
                self._give_back(turn)

    def __repr__(self) -> str:
        size = "fn" if self._fn else f"{len(self._replies)} replies"
        return f"ScriptedModel({size}, turn={self.turn})"


async def _sleep(seconds: float) -> None:
    import asyncio  # lazy: only scripts with a delay need the event loop's timer

    await asyncio.sleep(seconds)
