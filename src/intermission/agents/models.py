"""The ChatModel protocol: streamed text and tool calls (R15)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..messages import ChatMessage, ToolCall

__all__ = ["ChatModel", "ModelChunk", "ToolSchema", "counted_reply"]

ToolSchema = dict[str, Any]
"""``{"name", "description", "parameters"}`` (JSON schema), as chat APIs expect."""


@dataclass(frozen=True, slots=True)
class ModelChunk:
    """A piece of a streamed reply: text, and/or the tool calls (usually in the last chunk)."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, int] | None = None
    """Token counts of the whole reply when the model reports them (``input_tokens``,
    ``output_tokens``), usually with the last chunk."""


@runtime_checkable
class ChatModel(Protocol):
    """What an agent needs from a model: a streamed reply to messages and tool schemas."""

    def stream(
        self, messages: list[ChatMessage], tools: list[ToolSchema]
    ) -> AsyncIterator[ModelChunk]:
        """Stream the reply to ``messages``; tool calls may arrive in any chunk."""
        ...


class _CountsReplies(Protocol):
    model_replies: int


async def counted_reply(
    model: ChatModel,
    trace: _CountsReplies,
    messages: list[ChatMessage],
    tools: list[ToolSchema],
) -> AsyncGenerator[ModelChunk, None]:
    """``model.stream(messages, tools)``, counting the reply in ``trace.model_replies``.

    A real model reads where a conversation stands from the messages; a scripted one counts
    its own replies, so a session resumed in a new process (a fresh model object) would
    start its script over. The count is kept in the agent's trace (persisted with the
    session) and handed to a model with a ``catch_up(replies)`` method
    (:class:`~intermission.ScriptedModel`) before each call; other models have none. A
    reply counts once its first chunk arrives, as the scripted model counts it, and stops
    counting when it is abandoned before its end (a reader that stopped the stream): the
    scripted model then gives the same reply again, as a real model is simply asked again.
    """
    catch_up = getattr(model, "catch_up", None)
    if catch_up is not None:
        catch_up(trace.model_replies)
    counted = finished = False
    stream = model.stream(messages, tools)
    try:
        async for chunk in stream:
            if not counted:
                trace.model_replies += 1
                counted = True
            yield chunk
        finished = True
    finally:
        if not finished:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()  # the model's own stream learns it was abandoned
            if counted:
                trace.model_replies -= 1
