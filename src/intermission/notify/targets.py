"""Where notifications go: a signed JSON webhook and a Slack-compatible incoming webhook
(HTTP, with httpx: extra ``notify``). Each target has a name (what logs and the outbox's
``done`` list say: never its URL, which may hold a token) and routes by kind and role."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, Protocol, runtime_checkable
from urllib.parse import urlsplit

from .. import _check
from .._check import shown
from .._compat import require
from .._text import visible
from .._version import __version__
from ..errors import (
    DeliveryError,
    DeliveryRefusedError,
    DeliveryUnreachableError,
    NotifyConfigError,
    UsageError,
)
from ..stores.outbox import KINDS
from .notification import Notification
from .signing import KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

__all__ = ["SECTION_MAX", "SlackWebhook", "Target", "Webhook", "button_value", "check_routing"]


@runtime_checkable
class Target(Protocol):
    """Anything that delivers a notification: ``send`` returns once the receiver took it,
    or raises a :class:`~intermission.errors.DeliveryError`."""

    name: str

    def routes(self, n: Notification) -> bool:
        """Whether this target wants ``n`` (its kind and who may decide)."""
        ...

    def send(self, n: Notification) -> None:
        """Deliver ``n``."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def _names(value: Any, what: str) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise NotifyConfigError(f"{what} is a list of names, not {shown(value)}")
    items = list(value)
    if not all(isinstance(v, str) and v and v.isprintable() for v in items):
        raise NotifyConfigError(f"{what} is a list of names, not {shown(items)}")
    return frozenset(items)


def check_routing(kinds: Any, roles: Any) -> tuple[frozenset[str] | None, frozenset[str] | None]:
    """Validated ``kinds`` and ``roles`` filters (None: all)."""
    out_kinds = _names(kinds, "kinds")
    if out_kinds is not None and (not out_kinds or not out_kinds <= set(KINDS)):
        raise NotifyConfigError(f"kinds are some of {', '.join(KINDS)}, not {shown(kinds)}")
    return out_kinds, _names(roles, "roles")


def check_name(name: Any) -> str | None:
    """A target's name: what logs and the outbox call it (None: made from its address)."""
    if name is None:
        return None
    if not isinstance(name, str) or not name or len(name) > 100 or not name.isprintable():
        raise NotifyConfigError(f"name is a short printable text, not {shown(name)}")
    return name


def check_timeout(timeout_s: Any) -> float:
    """Seconds a receiver has to answer."""
    try:
        return float(_check.number("timeout_s", timeout_s, 0.1, 300))
    except UsageError as exc:
        raise NotifyConfigError(str(exc)) from None


def _check_url(url: Any, what: str) -> str:
    ok = isinstance(url, str) and url.startswith(("https://", "http://")) and url.isprintable()
    try:  # (a port that is no number fails at the first delivery otherwise, every time)
        ok = ok and " " not in url and bool(urlsplit(url).hostname) and urlsplit(url).port != 0
    except ValueError:
        ok = False
    if not ok:
        raise NotifyConfigError(f"{what} is an http(s) URL (not shown: it may hold a token)")
    return str(url)


def _default_name(kind: str, *parts: Any) -> str:
    digest = hashlib.sha256(repr(parts).encode("utf-8", "backslashreplace")).hexdigest()[:8]
    return f"{kind}-{digest}"


class _Routed:
    name: str
    kinds: frozenset[str] | None
    roles: frozenset[str] | None

    def routes(self, n: Notification) -> bool:
        """Kinds this target takes (all by default), and, for a notification naming who
        may decide, only when one of this target's roles is among them."""
        if self.kinds is not None and n.kind not in self.kinds:
            return False
        return self.roles is None or not n.roles or bool(self.roles & set(n.roles))


class _HideTargetURLs(logging.Filter):
    """httpx logs every request's URL at INFO; a target's URL may hold a credential (a
    Slack webhook's does), so its requests are not logged (ours say what happened)."""

    urls: ClassVar[set[str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(str(a) in self.urls for a in args)


@contextmanager
def hiding(url: str) -> Iterator[None]:
    """Keep ``url`` (a credential: a click's ``response_url``) out of httpx's log while a
    request to it is made, as given and as httpx spells it (host lower-cased, a default
    port dropped), and out of it for good when its filter was not on yet."""
    if not _HideTargetURLs.urls:
        logging.getLogger("httpx").addFilter(_HideTargetURLs())
    spellings = {url}
    try:
        spellings.add(str(require("httpx", "notify").URL(url)))
    except Exception:  # (an URL httpx cannot read: no request is made, none logged)
        pass
    added = spellings - _HideTargetURLs.urls
    _HideTargetURLs.urls.update(added)
    try:
        yield
    finally:
        _HideTargetURLs.urls.difference_update(added)


_deadline = threading.local()
"""The monotonic time the attempt in progress on this thread must end by."""


def _remaining(timeout: float | None) -> float:
    """What is left of the attempt's time (an operation's own timeout, when shorter)."""
    end = getattr(_deadline, "at", None)
    if end is None:
        return float("inf") if timeout is None else timeout
    left = float(end) - time.monotonic()
    return left if timeout is None else min(timeout, left)


_SLICE_S = 0.5
"""How long a read waits before it looks whether its attempt was aborted (seconds)."""


def _deadline_transport(httpx: Any, aborted: threading.Event) -> Any:
    """An httpx transport whose every connect, read and write shares one deadline per
    attempt: httpx's own timeouts count per operation, so a receiver answering one byte
    at a time would hold an attempt for ever. A read also ends soon after ``aborted`` is
    set (a dispatcher that stops does not wait out a silent receiver's ``timeout_s``)."""
    import httpcore

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def _left(self, timeout: float | None, error: type[Exception]) -> float:
            left = _remaining(timeout)
            if left <= 0:
                raise error("no complete answer within the target's timeout_s")
            return left

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            while True:
                if aborted.is_set():
                    raise httpcore.ReadTimeout("the dispatcher stopped")
                left = self._left(timeout, httpcore.ReadTimeout)
                try:
                    data: bytes = self.inner.read(max_bytes, min(left, _SLICE_S))
                    return data
                except httpcore.ReadTimeout:
                    if left <= _SLICE_S:
                        raise

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self.inner.write(buffer, self._left(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self.inner.close()

        def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                      timeout: float | None = None) -> Any:  # fmt: skip
            left = self._left(timeout, httpcore.ConnectTimeout)
            return Stream(self.inner.start_tls(ssl_context, server_hostname, left))

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    class Backend(httpcore.SyncBackend):
        def connect_tcp(
            self, host: str, port: int, timeout: float | None = None,
            local_address: str | None = None, socket_options: Any = None,
        ) -> Any:  # fmt: skip
            left = _remaining(timeout)
            if left <= 0:
                raise httpcore.ConnectTimeout("no connection within the target's timeout_s")
            return Stream(super().connect_tcp(host, port, left, local_address, socket_options))

    transport = httpx.HTTPTransport()
    # (httpx takes no network backend; its pool is replaced by one that has ours)
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(), network_backend=Backend()
    )
    return transport


class _HTTP(_Routed):
    """A POST of JSON with httpx: 2xx is taken; anything else is a typed error that says
    the status (never the body), with the receiver's ``Retry-After`` when it sent one.
    ``timeout_s`` bounds the whole attempt: connecting, sending, and every byte of the
    answer."""

    def __init__(self, url: str, timeout_s: float) -> None:
        # refused when made, not at each delivery: a dispatcher without httpx would fail
        # every attempt until its notifications gave up
        require("httpx", "notify")
        self.url = url
        self.timeout_s = timeout_s
        self._client: Any = None
        self._aborted = threading.Event()
        if not _HideTargetURLs.urls:
            logging.getLogger("httpx").addFilter(_HideTargetURLs())
        _HideTargetURLs.urls.add(url)

    def _post(self, body: bytes, headers: dict[str, str], key: str, url: str | None = None) -> None:
        httpx = require("httpx", "notify")
        url = url or self.url
        if self._client is None:
            # no redirects: a signed body goes where it was configured to, nowhere else
            self._client = httpx.Client(
                timeout=self.timeout_s, follow_redirects=False,
                transport=_deadline_transport(httpx, self._aborted),
            )
            # httpx logs the URL as it spells it (host lower-cased, a default port dropped,
            # non-ASCII quoted): hidden in that spelling too
            try:
                _HideTargetURLs.urls.add(str(httpx.URL(self.url)))
            except httpx.InvalidURL:  # (then no request is made, and none logged)
                pass
        started = time.monotonic()
        _deadline.at = started + self.timeout_s
        try:
            response = self._client.post(url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            whole = ""
            if isinstance(exc, httpx.TimeoutException):
                spent = time.monotonic() - started
                whole = (f": no complete answer within timeout_s={self.timeout_s:g} (the "
                         f"attempt ended after {spent:.1f} s)")  # fmt: skip
            raise DeliveryUnreachableError(
                f"could not reach the receiver ({type(exc).__name__}){whole}",
                target=self.name, key=key,
            ) from None  # fmt: skip
        finally:
            _deadline.at = None
        if not 200 <= response.status_code < 300:
            raise DeliveryRefusedError(
                f"the receiver answered HTTP {response.status_code}", target=self.name,
                status=response.status_code, key=key,
                retry_after_s=_retry_after(response.headers.get("retry-after")),
            )  # fmt: skip

    def abort(self) -> None:
        """End the attempt in progress soon (a dispatcher that stops and cannot wait)."""
        self._aborted.set()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._aborted.clear()
        if self._client is not None:
            self._client.close()
            self._client = None


def _retry_after(value: str | None) -> float | None:
    if value is None or not value.strip().isdigit():
        return None
    return min(float(value), 86400.0)


class Webhook(_HTTP):
    """POST the notification's JSON body (:meth:`Notification.body`), signed.

    Headers: ``Idempotency-Key`` (the notification's key, the same on every retry),
    ``Intermission-Timestamp`` and ``Intermission-Signature`` (``v1=`` HMAC-SHA256 over
    ``timestamp + "." + body`` with ``secret``; see :mod:`intermission.notify.signing`).

    Example:
        >>> Webhook("https://hooks.example.com/im", secret="s3cret", kinds=["pending"]).kinds
        frozenset({'pending'})
    """

    def __init__(
        self,
        url: str,
        secret: str | bytes,
        *,
        name: str | None = None,
        kinds: Iterable[str] | None = None,
        roles: Iterable[str] | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        super().__init__(_check_url(url, "url"), check_timeout(timeout_s))
        if not isinstance(secret, (str, bytes)) or len(secret) < 16:
            raise NotifyConfigError("secret is a string of at least 16 characters (not shown)")
        if isinstance(secret, str):
            try:
                secret.encode()
            except UnicodeEncodeError:
                raise NotifyConfigError("secret is text UTF-8 can encode (not shown)") from None
        self._secret = secret
        self.name = check_name(name) or _default_name("webhook", url)
        self.kinds, self.roles = check_routing(kinds, roles)

    def send(self, n: Notification) -> None:
        """Sign and POST ``n``'s body."""
        body = json.dumps(n.body(), ensure_ascii=False, separators=(",", ":")).encode()
        stamp = str(int(time.time()))
        self._post(body, {
            "Content-Type": "application/json",
            "User-Agent": f"intermission/{__version__}",
            KEY_HEADER: n.key,
            TIMESTAMP_HEADER: stamp,
            SIGNATURE_HEADER: sign(self._secret, stamp, body),
        }, n.key)  # fmt: skip

    def __repr__(self) -> str:
        return f"Webhook(name={self.name!r})"


def _mrkdwn(text: str) -> str:
    """Text Slack shows as it is: its three control characters escaped (a ``<!channel>`` or
    ``<https://x|label>`` from a model's output stays text)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


SECTION_MAX = 3000
"""Slack's limit on a section block's text: arguments that do not fit whole are not
approvable from Slack."""
_ASKING = ("pending", "warning", "escalated")
"""Kinds whose message asks for a decision (interactive: with Approve and Reject)."""


def button_value(target: str, session_id: str, interrupt_id: str, action: str,
                 secret: str, shown: str) -> str:  # fmt: skip
    """What an interactive button carries: ids intermission minted (the thread, the
    interrupt, the target that sent it), never text a model wrote, the button's action,
    and their tag (:func:`~intermission.slack.signature.button_mac`, over the binding
    ``shown`` of the call shown too: a value edited to another thread, interrupt or action,
    or clicked on a call that is not the one shown, is refused)."""
    from ..slack.signature import button_mac

    mac = button_mac(secret, target, session_id, interrupt_id, action, shown)
    return json.dumps({"n": target, "t": session_id, "i": interrupt_id, "a": action, "m": mac},
                      separators=(",", ":"))  # fmt: skip


class SlackWebhook(_HTTP):
    """POST a Slack incoming-webhook message: ``text`` (the notification in one line, for
    clients that show no blocks) and ``blocks`` (a header, the interrupts, a context line,
    and a button per interrupt that opens the console's page for it — with a public URL).
    Slack-compatible receivers (Mattermost, Rocket.Chat, Discord's ``/slack`` endpoint)
    take the same payload.

    ``interactive=True`` (with the Slack app's ``signing_secret``; ``serve --notify``
    takes its clicks at ``POST /slack/interactions``, see :mod:`intermission.slack`): a
    message asking for a decision shows each interrupt's arguments whole with Approve,
    Reject and Open buttons. Arguments it cannot show whole (cut, redacted, longer than a
    section holds) get Open only; Reject opens the console card where the policy needs a
    reason (a button press carries none)."""

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        kinds: Iterable[str] | None = None,
        roles: Iterable[str] | None = None,
        timeout_s: float = 10.0,
        interactive: bool = False,
        signing_secret: str | None = None,
    ) -> None:
        super().__init__(_check_url(url, "url"), check_timeout(timeout_s))
        self.name = check_name(name) or _default_name("slack", url)
        self.kinds, self.roles = check_routing(kinds, roles)
        if not isinstance(interactive, bool):
            raise NotifyConfigError(f"interactive is true or false, not {shown(interactive)}")
        if interactive and (not isinstance(signing_secret, str) or len(signing_secret) < 16):
            raise NotifyConfigError("an interactive Slack target needs the Slack app's "
                                    "signing secret (16 characters or more; not shown)")
        if not interactive and signing_secret is not None:
            raise NotifyConfigError("a signing secret is for an interactive Slack target "
                                    "(interactive: true)")
        self.interactive = interactive
        self._signing_secret = signing_secret

    @property
    def signing_secret(self) -> str | None:
        """The Slack app's signing secret (interactive only): what verifies its clicks."""
        return self._signing_secret

    def payload(self, n: Notification) -> dict[str, Any]:
        """The message for ``n``."""
        if self.interactive and n.kind in _ASKING and n.interrupts:
            return self._asking(n)
        return self.plain(n)

    @staticmethod
    def plain(n: Notification) -> dict[str, Any]:
        """The message for ``n``, with links only."""
        lines = [f"*{_mrkdwn(n.what(i))}*" for i in range(len(n.interrupts))]
        if n.reason:
            lines.append(_mrkdwn(f"Reason: {visible(n.reason)}"))
        for name in ("verdict", "reviewer", "comment", "resolution", "effect"):
            if n.detail.get(name) is not None:
                lines.append(_mrkdwn(f"{name.capitalize()}: {visible(n.detail[name])}"))
        blocks: list[dict[str, Any]] = [
            {"type": "header", "text": {"type": "plain_text", "text": n.headline[:150]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]
                                         or _mrkdwn(n.subject())}},
            _context(n),
        ]  # fmt: skip
        buttons = [
            {"type": "button", "action_id": f"open-{i}", "url": item["link"],
             "text": {"type": "plain_text", "text": ("Open in the console" if i == 0
                                                     else f"Open #{i + 1}")}}
            for i, item in enumerate(n.interrupts[:5]) if item.get("link")
        ]  # fmt: skip
        if not buttons and n.link:
            buttons = [{"type": "button", "action_id": "open-0", "url": n.link,
                        "text": {"type": "plain_text", "text": "Open in the console"}}]  # fmt: skip
        if buttons:
            blocks.append({"type": "actions", "elements": buttons})
        text = _mrkdwn(n.subject()) + (f" <{_mrkdwn(n.link)}|open>" if n.link else "")
        return {"text": text, "blocks": blocks}

    def _asking(self, n: Notification) -> dict[str, Any]:
        """A message asking for a decision, with buttons per interrupt (up to 5)."""
        blocks: list[dict[str, Any]] = [
            {"type": "header", "text": {"type": "plain_text", "text": n.headline[:150]}},
        ]
        if n.reason:
            blocks.append({"type": "section", "text": {
                "type": "mrkdwn", "text": _mrkdwn(f"Reason: {visible(n.reason)}")[:SECTION_MAX]}})
        for i, item in enumerate(n.interrupts[:5]):
            text, whole = _shown_whole(n, i)
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
            blocks.append({"type": "actions", "block_id": f"decide-{i}",
                           "elements": self._buttons(n, item, whole)})  # fmt: skip
            if not whole:
                blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": (
                    "The arguments are too long (or partly hidden) to show here whole: "
                    "decide in the console.")}]})  # fmt: skip
        blocks.append(_context(n))
        return {"text": _mrkdwn(n.subject()), "blocks": blocks}

    def _buttons(self, n: Notification, item: Mapping[str, Any], whole: bool) -> list[Any]:
        assert self._signing_secret is not None  # (interactive)
        secret, sid, iid = self._signing_secret, n.session_id, str(item.get("id"))
        from ..slack.signature import binding

        args, asked = item.get("arguments"), item.get("asked_ms")
        tool = item.get("tool") if item.get("type") == "tool_call" else None
        seen = binding(tool if isinstance(tool, str) else None, args,
                       asked if isinstance(asked, (int, float)) else None) \
            if isinstance(args, Mapping) else ""  # fmt: skip

        def value(action: str) -> str:
            return button_value(self.name, sid, iid, action, secret, seen)

        link = item.get("link")
        out: list[dict[str, Any]] = []
        if whole:
            out.append({"type": "button", "action_id": "approve", "style": "primary",
                        "value": value("approve"),
                        "text": {"type": "plain_text", "text": "Approve"}})
            policy = item.get("policy") or {}
            if isinstance(policy, Mapping) and policy.get("reason_to_reject") is False:
                out.append({"type": "button", "action_id": "reject", "style": "danger",
                            "value": value("reject"),
                            "text": {"type": "plain_text", "text": "Reject"}})
            elif link:  # a reason is needed: a button press carries none
                out.append({"type": "button", "action_id": "reject-open", "url": link,
                            "text": {"type": "plain_text", "text": "Reject (give a reason)"}})
        if link:
            out.append({"type": "button", "action_id": "open", "url": link,
                        "text": {"type": "plain_text", "text": "Open"}})
        return out or [{"type": "button", "action_id": "none", "value": value("none"),
                        "text": {"type": "plain_text", "text": "Decide in the console"}}]

    @property
    def reply_origins(self) -> frozenset[str]:
        """Where a clicked message's ``response_url`` may point: Slack's, or this target's
        own host (a Slack-compatible server answers from there; a test's stand-in too)."""
        from ..slack.signature import SLACK_REPLIES, origin

        own = origin(self.url)
        return frozenset({SLACK_REPLIES} | ({own} if own else set()))

    def send(self, n: Notification) -> None:
        """POST the message (an update of a message a person acted on: to its
        ``response_url``)."""
        if n.reply is not None:
            self._reply(n)
            return
        body = json.dumps(self.payload(n), ensure_ascii=False).encode()
        self._post(body, {"Content-Type": "application/json"}, n.key)

    def _reply(self, n: Notification) -> None:
        assert n.reply is not None
        from ..slack.signature import reply_allowed

        url = _check_url(n.reply.get("url"), "the reply's response_url")
        if not reply_allowed(url, self.reply_origins):
            raise DeliveryError("the reply's response_url is not Slack's (not shown): no "
                                "attempt may send it", target=self.name, key=n.key,
                                permanent=True)  # fmt: skip
        message = n.reply.get("message")
        outcome = n.reply.get("outcome")
        if message is None and isinstance(outcome, Mapping):  # (words made now)
            from ..slack.reply import message_of

            message = message_of(dict(outcome), n.session_id)
        if not isinstance(message, Mapping):
            raise DeliveryRefusedError("the reply holds no message", target=self.name,
                                       status=0, key=n.key)  # fmt: skip
        body = json.dumps({"replace_original": True, **message}, ensure_ascii=False).encode()
        with hiding(url):  # (a response_url is a credential: never logged)
            self._post(body, {"Content-Type": "application/json"}, n.key, url)

    def __repr__(self) -> str:
        return f"SlackWebhook(name={self.name!r})"


def _context(n: Notification) -> dict[str, Any]:
    context = f"session `{_mrkdwn(visible(n.session_id))}`"
    if n.agent:
        context += f" · agent {_mrkdwn(visible(n.agent))}"
    if n.deadline_ms is not None:
        context += f" · decide by {n.body()['deadline_at']}"
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": context[:3000]}]}


def _shown_whole(n: Notification, i: int) -> tuple[str, bool]:
    """An interrupt's section text, and whether it shows the arguments whole (nothing cut,
    redacted or left out; within a section's length; no code fence to break out of)."""
    item = n.interrupts[i]
    args = item.get("arguments") or {}
    title = f"*{_mrkdwn(visible(item['tool']))}*" if item.get("tool") else "*Approval*"
    shown_args = json.dumps(args, ensure_ascii=False, indent=1)
    text = f"{title}\n```{_mrkdwn(shown_args)}```"
    if item.get("reason") and item.get("reason") != n.reason:
        text += "\n" + _mrkdwn(f"Why: {visible(item['reason'])}")
    whole = bool(item.get("whole")) and "```" not in shown_args and len(text) <= SECTION_MAX
    if len(text) > SECTION_MAX:
        text = f"{title}\n{_mrkdwn(n.what(i))}"[:SECTION_MAX]
    return text, whole
