"""``intermission notify`` (deliver the outbox's notifications) and ``intermission outbox``
(list them, or make one due again); ``notifier_of`` builds the notifier ``serve --notify``
runs beside the server too."""

from __future__ import annotations

import argparse
from typing import Any

from ._text import visible as _v
from .errors import _utc
from .stores.base import SessionStore

__all__ = ["cmd_notify", "cmd_outbox", "notifier_of"]


def notifier_of(
    args: argparse.Namespace, store: SessionStore, public_url: str | None,
    own_url: str | None = None,
) -> Any:  # fmt: skip
    """A Notifier from ``--notify``/``--config``; the store's saves write notifications
    from now on (and every process that opens it after this one)."""
    from .notify import notifier_from

    path = getattr(args, "notify", None) or args.config
    notifier = notifier_from(store, path, public_url, default_url=own_url)
    store.outbox.enable()  # type: ignore[attr-defined]
    names = ", ".join(t.name for t in notifier.targets)
    print(f"notifications go to {_v(names)}", flush=True)
    return notifier


def cmd_notify(args: argparse.Namespace, store: SessionStore) -> None:
    """Deliver the outbox's notifications until SIGTERM or ^C (``--once``: one pass)."""
    import logging
    import signal
    import threading

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s %(message)s"
    )
    stop = threading.Event()
    if not args.once:  # (before anything else: a SIGTERM while it starts ends it cleanly)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
    notifier = notifier_of(args, store, args.public_url)
    if args.once:
        print(f"delivered {notifier.deliver_pending()}", flush=True)
        notifier.close()
        return
    notifier.start()
    try:
        while not stop.wait(3600):
            pass
    finally:
        notifier.stop()


def cmd_outbox(args: argparse.Namespace, store: SessionStore) -> None:
    """List notifications (``--failed``: the dead ones), or make one due again."""
    outbox = store.outbox  # type: ignore[attr-defined]
    if args.retry:
        row = outbox.retry(args.retry)
        print(f"notification {_v(row.key)} ({row.kind}, session {_v(row.session_id)}) is due again")
        return
    rows = outbox.rows("dead" if args.failed else None, limit=args.limit)
    if not rows:
        print("no failed notifications" if args.failed else "the outbox is empty")
        return
    print(f"{'KEY':<36} {'KIND':<15} {'STATUS':<7} {'TRIES':>5}  {'CREATED':<23}  SESSION / ERROR")
    for r in rows:
        line = f"{r.key:<36} {r.kind:<15} {r.status:<7} {r.attempts:>5}  {_utc(r.created_ms)}  "
        line += _v(r.session_id) + (f"  {_v(r.last_error)}" if r.last_error else "")
        print(line)
