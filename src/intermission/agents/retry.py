"""Model calls that fail for a moment are asked again, as the original framework does.

Retried: a connection error, a timeout, an empty reply (no text and no tool call), HTTP 429
and 5xx. Not retried: any other HTTP status (a 400 says the request is wrong, a 401 that the
key is), a model that is simply broken (a ScriptedModel out of replies, a malformed reply, a
bug in a custom model), and any failure after the reply had begun to stream text to the
reader (asking again would show the reader a second, different beginning). Retries are
bounded (``max_retries`` after the first call) and wait ``delay_ms × attempt`` before each
(linear backoff, capped at :data:`MAX_WAIT_S`), calling the interceptors'
``on_reason_retry`` first. The final failure is a :class:`~intermission.ModelError` on the
response (``response.error``) and in the run's end event; the request stays resumable.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import _check
from ..errors import ModelCallError, ModelError

__all__ = ["MAX_WAIT_S", "RetryConfig", "describe", "model_error"]

MAX_WAIT_S = 30.0
"""The longest wait before one retry, however large ``delay_ms × attempt`` grows."""

_TRANSIENT = frozenset(
    {
        # httpx (OpenAIChatModel) and the SDKs built on it (pydantic-ai's providers)
        "TransportError", "TimeoutException", "NetworkError", "RemoteProtocolError",
        "APIConnectionError", "APITimeoutError",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """How a ReAct agent retries a failed model call (the seed's ``retryConfig``)."""

    max_retries: int = 3
    """Calls after the first (0: never retry)."""
    delay_ms: float = 1000.0
    """The wait before retry n is ``delay_ms × n`` (at most MAX_WAIT_S)."""

    @classmethod
    def checked(cls, max_retries: int, delay_ms: float) -> RetryConfig:
        """A config from user input (typed errors for bad values)."""
        return cls(
            _check.count("max_retries", max_retries, 0, 100),
            float(_check.number("delay_ms", delay_ms, 0, 3_600_000)),
        )

    def wait_s(self, attempt: int) -> float:
        """Seconds to wait before retry ``attempt`` (from 1)."""
        return min(self.delay_ms * attempt / 1000.0, MAX_WAIT_S)


def _status(exc: BaseException) -> int | None:
    """The HTTP status an error carries (``status_code``, ``status``, or its response's)."""
    for holder in (exc, getattr(exc, "response", None)):
        for name in ("status_code", "status"):
            value = getattr(holder, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
                return value
    return None


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    return any(cls.__name__ in _TRANSIENT for cls in type(exc).__mro__)


def model_error(exc: Exception) -> ModelError:
    """``exc`` as the typed error a request keeps: a ModelCallError with its status and
    whether it is worth retrying (its cause chain is read), or the ModelError it was."""
    if isinstance(exc, ModelCallError):
        return exc
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 8:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    status = next((s for s in map(_status, chain) if s is not None), None)
    if status is not None:
        retryable = status == 429 or status >= 500
    else:
        retryable = any(_transient(e) for e in chain)
    if isinstance(exc, ModelError) and status is None and not retryable:
        return exc  # (a scripted model out of replies, a malformed reply: as it is)
    error = ModelCallError(f"{type(exc).__name__}: {exc}", status=status, retryable=retryable)
    error.__cause__ = exc
    return error


def describe(error: ModelError) -> str:
    """The abnormal answer of a request whose model failed."""
    cause = error.__cause__ if isinstance(error, ModelCallError) else None
    shown = str(error) if cause is not None else f"{type(error).__name__}: {error}"
    attempts = getattr(error, "attempts", 1)
    tail = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
    return f"Model error: {shown}{tail}"
