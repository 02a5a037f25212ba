"""Tell the reviewer: notifications from the store's outbox (extra ``notify`` for the HTTP
targets).

A store opened with ``outbox=True`` writes, in the same transaction as each save, the
notifications that save causes: a pause, a warning before a deadline, an escalation, an
expiry, a decision, an effect of unknown outcome. A :class:`Notifier` delivers them at
least once, each with a key that stays the same on every attempt, to :class:`Webhook`
(signed JSON), :class:`SlackWebhook` and :class:`Email` targets::

    store = SQLiteStore("app.db", outbox=True)
    notifier = Notifier(store, [Webhook(url, secret=SECRET)], public_url="https://review.example")
    notifier.deliver_pending()     # once; `python -m intermission notify` loops over it

:func:`verify` checks a webhook's signature (and that the ``Idempotency-Key`` header is the
signed body's key) on the receiving side. What a notification shows of a tool's arguments,
a reason or a comment has its secrets redacted (:mod:`intermission.notify.redact`);
``on_tool(name, notify_args=False | ["env"])`` sends none or only the named arguments.
"""

from __future__ import annotations

from .config import NotifyConfig, load_config, notifier_from, targets_of
from .dispatcher import Notifier, with_notifier
from .email import Email
from .notification import Notification
from .signing import verify
from .targets import SlackWebhook, Target, Webhook

__all__ = [
    "Email",
    "Notification",
    "Notifier",
    "NotifyConfig",
    "SlackWebhook",
    "Target",
    "Webhook",
    "load_config",
    "notifier_from",
    "targets_of",
    "verify",
    "with_notifier",
]
