"""The ChatModel protocol: streamed text and tool calls (R15)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..messages import ChatMessage, ToolCall

__all__ = ["ChatModel", "ModelChunk", "ToolSchema", "catch_up"]

ToolSchema = dict[str, Any]
"""``{"name", "description", "parameters"}`` (JSON schema), as chat APIs expect."""


@dataclass(frozen=True, slots=True)
class ModelChunk:
    """A piece of a streamed reply: text, and/or the tool calls (usually in the last chunk)."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)


@runtime_checkable
class ChatModel(Protocol):
    """What an agent needs from a model: a streamed reply to messages and tool schemas."""

    def stream(
        self, messages: list[ChatMessage], tools: list[ToolSchema]
    ) -> AsyncIterator[ModelChunk]:
        """Stream the reply to ``messages``; tool calls may arrive in any chunk."""
        ...


def catch_up(model: ChatModel, replies: int) -> None:
    """Tell ``model`` that its agent already had ``replies`` replies on this session.

    A real model reads where a conversation stands from the messages; a scripted one counts
    its own replies, so a session resumed in a new process (a fresh model object) would
    start its script over. Agents call this before each model call with the count kept in
    their trace (persisted with the session); a model with a ``catch_up(replies)`` method
    (:class:`~intermission.ScriptedModel`) skips ahead, any other model ignores it.
    """
    hook = getattr(model, "catch_up", None)
    if hook is not None:
        hook(replies)
