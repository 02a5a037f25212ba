"""The errors of notifications (the ``NotifyError`` branch of :mod:`intermission.errors`,
where users import them from)."""

from __future__ import annotations

from ._error_base import IntermissionError

__all__ = [
    "DeliveryError",
    "DeliveryRefusedError",
    "DeliveryUnreachableError",
    "NotificationNotFoundError",
    "NotifyConfigError",
    "NotifyError",
]


class NotifyError(IntermissionError):
    """Telling reviewers failed or is set up wrong.

    ``key``: the notification concerned (None when none is)."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        self.key = key
        super().__init__(message)


class NotifyConfigError(NotifyError, ValueError):
    """A notification config file or target is wrong; ``where`` names the file and field."""

    def __init__(self, message: str, *, where: str = "") -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class NotificationNotFoundError(NotifyError, KeyError):
    """The outbox holds no notification with that key."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"no notification {key!r} in the outbox (a delivered one leaves it; see "
            "python -m intermission outbox)",
            key=key,
        )

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DeliveryError(NotifyError):
    """A target did not take a notification; the dispatcher tries again later.

    It tries again under the same key. The message names the target and what happened, never
    the body or a secret. ``retry_after_s``: how long the receiver asked to wait (None: it
    did not say). ``permanent``: no attempt can succeed (a message that cannot be built):
    the notification is dead at once, with this as its reason."""

    def __init__(
        self, message: str, *, target: str, key: str | None = None,
        retry_after_s: float | None = None, permanent: bool = False,
    ) -> None:  # fmt: skip
        self.target = target
        self.retry_after_s = retry_after_s
        self.permanent = permanent
        super().__init__(f"{target}: {message}", key=key)


class DeliveryRefusedError(DeliveryError):
    """The receiver answered with an error status.

    ``status``: the HTTP status or SMTP reply code."""

    def __init__(
        self, message: str, *, target: str, status: int, key: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:  # fmt: skip
        self.status = status
        super().__init__(message, target=target, key=key, retry_after_s=retry_after_s)


class DeliveryUnreachableError(DeliveryError):
    """The receiver could not be reached: no connection, a timeout, a TLS failure."""


for _cls in (NotifyError, NotifyConfigError, NotificationNotFoundError, DeliveryError,
             DeliveryRefusedError, DeliveryUnreachableError):  # fmt: skip
    _cls.__module__ = "intermission.errors"
