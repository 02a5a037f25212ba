"""Chat messages and tool calls (pydantic, JSON round-trip safe)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from ._json import check_json
from ._model import Model
from .errors import NotSerializableError

__all__ = ["ChatMessage", "Role", "ToolCall"]

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(Model):
    """A tool call proposed by a model. ``id`` is the call UUID HITL decisions are keyed by.

    ``ToolCall(name, args, id=None)``: an explicit ``id`` pins the call UUID (tests, replays);
    otherwise the model that emits it assigns one. The id is the provider's metadata, not
    the effect's identity (R48): a ReAct agent makes it unique in the request (a repeated
    ``call_0`` becomes ``call_0.2``) and runs the call under an effect id of its own.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None

    def __init__(
        self,
        name: str | None = None,
        args: dict[str, Any] | None = None,
        id: str | None = None,
        **data: Any,
    ) -> None:
        # positional convenience for people; keyword data (from JSON) passes through so a
        # missing or wrong field is a ValidationError, never a TypeError
        if name is not None:
            data["name"] = name
        if args is not None:
            data["args"] = args  # validated (and copied) by pydantic
        if id is not None:
            data["id"] = id
        super().__init__(**data)

    @field_validator("args")
    @classmethod
    def _plain_json(cls, args: dict[str, Any]) -> dict[str, Any]:
        # tool arguments are stored with the session and sent to models: JSON only (R42)
        try:
            check_json("args", args)
        except NotSerializableError as exc:
            raise ValueError(str(exc)) from None
        return args


class ChatMessage(Model):
    """One message of a conversation."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None

    @classmethod
    def system(cls, text: str) -> ChatMessage:
        """A system message."""
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str) -> ChatMessage:
        """A user message."""
        return cls(role="user", content=text)

    @classmethod
    def assistant(cls, text: str = "", tool_calls: list[ToolCall] | None = None) -> ChatMessage:
        """An assistant message, with optional tool calls."""
        return cls(role="assistant", content=text, tool_calls=list(tool_calls or []))

    @classmethod
    def tool(cls, call_id: str, name: str, text: str) -> ChatMessage:
        """The observation of one tool call."""
        return cls(role="tool", content=text, tool_call_id=call_id, name=name)
