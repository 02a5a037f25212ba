"""The dispatcher: take due notifications from a store's outbox, deliver them to every
target that routes them, settle each row.

At least once, with a key: a row is taken under a lease; a dispatcher that dies after
sending and before settling leaves it leased, and once the lease ends another attempt
sends it again with the same key (receivers drop repeats by it). A failed attempt is tried
again after a backoff (doubling from ``retry_first_s`` up to ``retry_max_s``, or the
receiver's ``Retry-After``); after ``max_attempts`` the row is dead, listed by
``python -m intermission outbox --failed`` and sent again by ``--retry KEY``; a message no
attempt can build is dead at once, with its reason. Targets that took a notification are not
sent it again when another target failed.

One body per key: a notification's body (its links included) is fixed when its row is
written (links under the store's recorded public URL), or, for a row written before any
dispatcher recorded one, by the first dispatcher that takes it; every attempt of every
dispatcher sends those bytes.

Targets are independent: each target has its own worker, which sends it the taken rows in
order, and each attempt is bounded as a whole by the target's ``timeout_s`` (a receiver that
trickles its answer is cut there). A slow or dead target never holds another's deliveries
back, of this notification or of the next ones; a row is settled once every target answered
or gave up. (Concurrent per target rather than a row per target: the outbox keeps one row
per notification, and its ``done`` list already says which targets took it.)
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .. import _check
from ..errors import DeliveryError, NotifyConfigError, NotSerializableError, StoreError
from ..stores.outbox import OutboxRow
from .notification import Notification, check_public_url, fixed
from .targets import Target

__all__ = ["Notifier", "with_notifier"]

log = logging.getLogger("intermission.notify")
_LATE = object()  # an attempt not made: the pass ran out of time, or is stopping


class Notifier:
    """Deliver a store's notifications to ``targets``.

    ``public_url``: where reviewers open the console (``https://review.example.com``): each
    notification links to the console's page for its interrupt there. Several notifiers
    may run against one store (PostgreSQL: on any number of machines); each row is taken
    by one at a time.

    Example:
        >>> from intermission.stores import MemoryStore
        >>> from intermission.notify import Webhook
        >>> hook = Webhook("https://hooks.example.com/im", secret="0123456789abcdef")
        >>> Notifier(MemoryStore(outbox=True), [hook]).deliver_pending()
        0
    """

    def __init__(
        self,
        store: Any,
        targets: Sequence[Target],
        public_url: str | None = None,
        *,
        max_attempts: int = 8,
        retry_first_s: float = 2.0,
        retry_max_s: float = 600.0,
        lease_s: float = 60.0,
        batch: int = 20,
        poll_s: float = 1.0,
    ) -> None:
        outbox = getattr(store, "outbox", None)
        if outbox is None or not callable(getattr(outbox, "take", None)):
            raise NotifyConfigError(f"store has no outbox: {type(store).__name__}")
        ok = isinstance(targets, (list, tuple))
        targets = list(targets) if ok else []
        if not targets or not all(isinstance(t, Target) for t in targets):
            raise NotifyConfigError("targets is a non-empty list of Webhook, SlackWebhook, Email")
        names = [t.name for t in targets]
        if len(set(names)) != len(names):
            raise NotifyConfigError(f"two targets share a name: {sorted(names)} (set name=)")
        self.store = store
        self.outbox = outbox
        self.targets = targets
        self.public_url = check_public_url(public_url)
        self.max_attempts = _check.count("max_attempts", max_attempts, 1, 1000)
        self.retry_first_s = _check.number("retry_first_s", retry_first_s, 0.01, 86400)
        self.retry_max_s = _check.number("retry_max_s", retry_max_s, self.retry_first_s, 1e6)
        self.lease_ms = _check.number("lease_s", lease_s, 0.1, 86400) * 1000.0
        self.batch = _check.count("batch", batch, 1, 1000)
        self.poll_s = _check.number("poll_s", poll_s, 0.001, 3600)
        """How often :meth:`run` looks at the outbox when nothing wakes it."""
        if self.public_url is not None and getattr(outbox, "public_url", None) != self.public_url:
            # (the store's saves fix their notifications' links under it from now on)
            outbox.set_public_url(self.public_url)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"
        """Who holds the rows this notifier took (host, process, a random part)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._workers: dict[str, ThreadPoolExecutor] = {}
        """One worker per target (made at its first send): targets never wait on each
        other."""

    # -- one pass ------------------------------------------------------------------------
    def deliver_pending(self) -> int:
        """Deliver every notification due now, once; returns how many were delivered (to
        every target that routes them). Failed ones are left for a later pass."""
        return self._pass(None)

    def _pass(self, stop: threading.Event | None) -> int:
        """One pass; ``stop`` (the loop's): once it is set, nothing new is sent."""
        delivered = 0
        for _ in range(10_000):  # (a bound, not a limit a real outbox meets in one pass)
            rows = self.outbox.take(self.owner, self.batch, self.lease_ms)
            # slow receivers must not outlast the lease (another dispatcher would send the
            # rest again): past half of it, or once stopping, what was not tried yet is
            # handed back (due at once, not when the lease ends)
            until = time.monotonic() + self.lease_ms / 2000
            count, handed_back = self._deliver_batch(rows, until, stop)
            delivered += count
            if handed_back or len(rows) < self.batch:
                break
        return delivered

    def _notification(self, row: OutboxRow) -> Notification | None:
        """The notification of a row, its body fixed (None: unreadable, now dead, or
        gone)."""
        try:
            if row.payload.get("body") is None:  # written before a public URL was known
                stored = self.outbox.fix(row.key, fixed(row, self.public_url))
                if stored is None:  # delivered by another dispatcher meanwhile
                    return None
                row = dataclasses.replace(row, payload=stored)
            n = Notification.of(row, self.public_url)
        except (TypeError, ValueError, KeyError, NotSerializableError) as exc:
            self._failed(row, row.done, [f"unreadable notification ({type(exc).__name__})"],
                         None, dead=True)  # fmt: skip
            return None
        if n.reply is not None and "handle" in n.reply:
            return self._with_reply_url(row, n)
        return n

    def _with_reply_url(self, row: OutboxRow, n: Notification) -> Notification | None:
        """An update of a message a person acted on, with where it goes: read from its
        reply handle now (never logged). A handle gone or expired: nothing can update the
        message; the row is dropped, said in a log line."""
        assert n.reply is not None
        held = self.outbox.held(str(n.reply.get("handle")))
        reply = held.get("reply") if isinstance(held, dict) else None
        url = reply.get("url") if isinstance(reply, dict) else None
        if not isinstance(url, str):
            self.outbox.delivered(row.key)
            log.info("notification %s (session %s) updates a message whose reply handle "
                     "expired: dropped, the message keeps its buttons", row.key,
                     row.session_id)  # fmt: skip
            return None
        return dataclasses.replace(n, reply={**n.reply, "url": url})

    def _deliver_batch(
        self, rows: list[OutboxRow], until: float, stop: threading.Event | None
    ) -> tuple[int, bool]:
        """Send each row to its targets, each target in its own worker (in row order): a
        slow target's queue never holds another's. Returns how many rows were delivered
        and whether some were handed back untried."""

        def attempt(target: Target, n: Notification) -> object:
            if time.monotonic() > until or (stop is not None and stop.is_set()):
                return _LATE
            try:
                target.send(n)
            except Exception as exc:
                return exc
            return None

        sent: list[tuple[OutboxRow, list[tuple[Target, Future[object]]]]] = []
        for row in rows:
            n = self._notification(row)
            if n is None:
                continue
            due = [t for t in self.targets if t.name not in row.done and _routes(t, n)]
            sent.append((row, [(t, self._submit(t, attempt, n)) for t in due]))
        delivered, handed_back = 0, False
        for row, futures in sent:
            outcome = self._settle(row, [(t, f.result()) for t, f in futures])
            delivered += outcome is True
            handed_back = handed_back or outcome is None
        return delivered, handed_back

    def _submit(self, target: Target, attempt: Any, n: Notification) -> Future[object]:
        """``attempt(target, n)`` in ``target``'s own worker (inline for a lone target:
        there is no other to hold back)."""
        if len(self.targets) == 1:
            done: Future[object] = Future()
            done.set_result(attempt(target, n))
            return done
        worker = self._workers.get(target.name)
        if worker is None:
            worker = self._workers[target.name] = ThreadPoolExecutor(
                1, f"intermission-notify-{len(self._workers)}"
            )
        return worker.submit(attempt, target, n)

    def _settle(self, row: OutboxRow, results: list[tuple[Target, object]]) -> bool | None:
        """Record what the row's targets did: True delivered, False failed, None handed
        back (not every target was tried in time)."""
        done = set(row.done)
        errors: list[str] = []
        wait_s: float | None = None
        permanent = late = False
        for target, result in results:
            if result is None:
                done.add(target.name)
            elif result is _LATE:
                late = True
            elif isinstance(result, DeliveryError):
                errors.append(str(result))
                permanent = permanent or result.permanent
                if result.retry_after_s is not None:
                    wait_s = max(wait_s or 0.0, result.retry_after_s)
            else:  # a target's own bug: counted, named, never its data
                errors.append(f"{target.name}: {type(result).__name__}")
        if errors:
            self._failed(row, done, errors, wait_s, dead=permanent)
            return False
        if late:
            if done == set(row.done):
                self.outbox.release(row.key, self.owner)
            else:  # (kept: the targets that took it are not sent it again)
                self.outbox.failed(row.key, self.owner, "handed back before every target was "
                                   "tried", done, self.outbox.now_ms(), False)  # fmt: skip
            return None
        self.outbox.delivered(row.key)
        log.info("notification %s (%s, session %s) delivered to %s", row.key, row.kind,
                 row.session_id, ", ".join(sorted(done)) or "no target")  # fmt: skip
        return True

    def _failed(
        self, row: OutboxRow, done: Iterable[str], errors: list[str], wait_s: float | None,
        *, dead: bool,
    ) -> None:  # fmt: skip
        attempts = row.attempts + 1
        dead = dead or attempts >= self.max_attempts
        delay = min(self.retry_max_s, self.retry_first_s * 2 ** min(attempts - 1, 40))
        delay = max(delay * random.uniform(0.8, 1.0), wait_s or 0.0)
        error = "; ".join(errors)
        self.outbox.failed(
            row.key, self.owner, error, done, self.outbox.now_ms() + delay * 1000, dead
        )
        if dead:
            log.error("notification %s (%s, session %s) is dead after %d attempt(s): %s "
                      "(python -m intermission outbox --retry %s)", row.key, row.kind,
                      row.session_id, attempts, error, row.key)  # fmt: skip
        else:
            log.warning("notification %s attempt %d failed, next in %.1f s: %s", row.key,
                        attempts, delay, error)  # fmt: skip

    # -- the loop ------------------------------------------------------------------------
    def run(self, poll_s: float | None = None) -> None:
        """Deliver until :meth:`stop`: a pass whenever a save in this process wrote a
        notification, and at least every ``poll_s`` seconds (default :attr:`poll_s`: other
        processes' saves, and retries falling due). A store that is away is waited for,
        not fatal."""
        poll_s = self.poll_s if poll_s is None else _check.number("poll_s", poll_s, 0.001, 3600)
        wake = self.outbox.wake
        while not self._stop.is_set():
            wake.clear()
            try:
                self._pass(self._stop)
            except StoreError as exc:
                log.warning("the store is unavailable, trying again: %s", type(exc).__name__)
            wake.wait(poll_s)

    def start(self, poll_s: float | None = None) -> None:
        """Run :meth:`run` in a daemon thread (``serve --notify`` does)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self.run, args=(poll_s,), name="intermission-notify", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the loop after the delivery in progress (waiting up to ``timeout_s``) and
        close the targets' connections. Rows it took and did not settle come back when
        their lease ends."""
        self._stop.set()
        self.outbox.wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():  # a receiver that never answers: its attempt ends now
                for target in self.targets:
                    abort = getattr(target, "abort", None)
                    if callable(abort):
                        abort()
        self.close()

    def close(self) -> None:
        """Close the targets' connections."""
        workers, self._workers = self._workers, {}
        for worker in workers.values():
            worker.shutdown(wait=True)
        for target in self.targets:
            target.close()

    def __repr__(self) -> str:
        return f"Notifier({[t.name for t in self.targets]})"


def _routes(target: Target, n: Notification) -> bool:
    """Whether ``target`` sends ``n``: an update of a message a person acted on goes
    through the one target that sent that message, every other notification by the
    target's own routing."""
    if n.reply is not None:
        return n.reply.get("target") == target.name
    return target.routes(n)


def with_notifier(app: Any, notifier: Notifier, poll_s: float | None = None) -> Any:
    """An ASGI app that is ``app`` plus ``notifier`` running for the app's lifespan:
    started at startup, stopped at shutdown. An AG-UI app (``agui_app``) stays itself, so
    its graceful stop still works: the notifier stops after the app's drain."""
    import asyncio

    run_beside = getattr(app, "run_beside", None)
    if callable(run_beside):
        run_beside(lambda: notifier.start(poll_s), notifier.stop)
        return app

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return

        async def lifespan_receive() -> Any:
            message = await receive()
            if message["type"] == "lifespan.startup":
                notifier.start(poll_s)
            elif message["type"] == "lifespan.shutdown":
                await asyncio.get_running_loop().run_in_executor(None, notifier.stop)
            return message

        await app(scope, lifespan_receive, send)

    return asgi
