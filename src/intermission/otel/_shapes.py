"""The plain shapes the tracer keeps per session and request: an open span, a request's
root and stack, what a store's copy holds until its save commits; and two small helpers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from . import attributes as A

__all__ = ["Held", "Open", "Request", "UserMessage", "fail", "on_record_later"]


@dataclass(slots=True)
class Open:
    key: tuple[str, ...]
    span: Span
    ran: int = 0
    replayed: int = 0


@dataclass(slots=True)
class Request:
    root: Span
    session: Any
    stack: list[Open] = field(default_factory=list)
    token: object | None = None
    approved: dict[str, Any] = field(default_factory=dict)
    not_run: set[str] = field(default_factory=set)

    @property
    def top(self) -> Span:
        return self.stack[-1].span if self.stack else self.root


@dataclass(slots=True)
class Held:
    """What waits for a store's copy of a session to be saved."""

    root: Span | None = None
    """A paused request's root, not ended yet."""
    end_ns: int = 0
    pause: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """The root's pause events, added only once the save committed."""
    instants: list[Callable[[], None]] = field(default_factory=list)
    """Spans of decisions noted on the copy outside a request, made once it committed."""
    ref: Any = None
    """The session (a weak reference)."""
    gone: Any = None
    """The finalizer that ends the held spans if the copy is dropped unsaved."""


def on_record_later(session: Any) -> bool:
    """True for a store's copy (loaded, or saved once): what it records is on record only
    once its next save commits (a session of no store is on record as it happens)."""
    version = getattr(session, "store_version", 0)
    return isinstance(version, int) and version > 0


class UserMessage:
    """A prompt as a message (for the opt-in input of a request's root span)."""

    role = "user"
    tool_calls = ()

    def __init__(self, content: str) -> None:
        self.content = content


def fail(span: Span, error: BaseException | None) -> None:
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))
    span.set_attribute(A.ERROR_TYPE, type(error).__name__)
