"""Email over SMTP (the standard library's smtplib and email): plain text and HTML with
the deep links, to the addresses of the roles that may decide."""

from __future__ import annotations

import hashlib
import html
import smtplib
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Mapping
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any

from .._check import shown
from .._text import visible
from ..errors import (
    DeliveryError,
    DeliveryRefusedError,
    DeliveryUnreachableError,
    NotifyConfigError,
)
from .notification import Notification
from .redact import redact_text
from .targets import _Routed, check_name, check_routing, check_timeout

__all__ = ["Email"]


def _address(a: Any) -> bool:
    """An address that cannot smuggle a header or a second recipient."""
    ok = isinstance(a, str) and "@" in a and a.isprintable() and len(a) <= 320
    return ok and not any(c in a for c in ",<>; ") and _utf8(a)


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _addresses(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise NotifyConfigError(f"{what} is a list of addresses, not {shown(value)}")
    out = tuple(value)
    for a in out:
        if not _address(a):
            raise NotifyConfigError(f"{what}: {shown(a)} is not an email address")
    return out


class Email(_Routed):
    """Send each notification as an email over SMTP.

    Recipients: ``to`` always, plus ``to_roles[role]`` for each role that may decide (a
    notification whose approval names no roles goes to every address of ``to_roles``: anyone
    may decide it). ``starttls=True`` upgrades the connection before anything is sent (with
    ``ssl_context``, or the system's trusted certificates); ``username``/``password`` log
    in after it. The message id is derived from the notification's key, so a mail system
    sees a re-delivery as the same message.

    Example:
        >>> Email(smtp=("mail.example.com", 587), sender="im@example.com",
        ...       to_roles={"finance": ["cfo@example.com"]}).name.startswith("email-")
        True
    """

    def __init__(
        self,
        smtp: tuple[str, int],
        *,
        sender: str,
        to: Iterable[str] = (),
        to_roles: Mapping[str, Iterable[str]] | None = None,
        starttls: bool = False,
        username: str | None = None,
        password: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        name: str | None = None,
        kinds: Iterable[str] | None = None,
        roles: Iterable[str] | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        if (
            not isinstance(smtp, tuple) or len(smtp) != 2 or not isinstance(smtp[0], str)
            or not smtp[0] or not smtp[0].isprintable() or " " in smtp[0]
            or not isinstance(smtp[1], int) or isinstance(smtp[1], bool)
            or not 0 < smtp[1] < 65536
        ):  # fmt: skip
            raise NotifyConfigError(f"smtp is (host, port), not {shown(smtp)}")
        (self.sender,) = _addresses([sender], "sender")
        self.to = _addresses(to, "to")
        if to_roles is not None and not isinstance(to_roles, Mapping):
            raise NotifyConfigError(f"to_roles maps roles to addresses, not {shown(to_roles)}")
        self.to_roles = {
            str(role): _addresses(addresses, f"to_roles[{role!r}]")
            for role, addresses in (to_roles or {}).items()
        }
        if not self.to and not any(self.to_roles.values()):
            raise NotifyConfigError("an Email target needs addresses: to and/or to_roles")
        if (username is None) != (password is None):
            raise NotifyConfigError("username and password go together")
        for what, value in (("username", username), ("password", password)):
            if value is not None and (not isinstance(value, str) or not _utf8(value)):
                raise NotifyConfigError(f"{what} is text (not shown)")
        if not isinstance(starttls, bool):
            raise NotifyConfigError(f"starttls is True or False, not {shown(starttls)}")
        if ssl_context is not None and not isinstance(ssl_context, ssl.SSLContext):
            raise NotifyConfigError(f"ssl_context is an ssl.SSLContext, not {shown(ssl_context)}")
        if to_roles is not None and not all(isinstance(r, str) for r in to_roles):
            raise NotifyConfigError(f"to_roles maps role names to addresses, not {shown(to_roles)}")
        self.smtp = smtp
        self.starttls = starttls
        self.username = username
        self._password = password
        self.ssl_context = ssl_context
        self.timeout_s = check_timeout(timeout_s)
        self._server: smtplib.SMTP | None = None
        digest = hashlib.sha256(
            repr((smtp, sender, self.to, self.to_roles)).encode("utf-8", "backslashreplace")
        )
        self.name = check_name(name) or f"email-{digest.hexdigest()[:8]}"
        self.kinds, self.roles = check_routing(kinds, roles)

    def recipients(self, n: Notification) -> list[str]:
        """Who gets ``n``: ``to`` and the addresses of the roles that may decide it."""
        roles = n.roles or tuple(self.to_roles)
        found = list(self.to)
        for role in roles:
            found += self.to_roles.get(role, ())
        return list(dict.fromkeys(found))

    def routes(self, n: Notification) -> bool:
        """As every target, and only when someone is to be told."""
        return super().routes(n) and bool(self.recipients(n))

    def message(self, n: Notification) -> EmailMessage:
        """The email for ``n``: plain text and HTML alternatives (every line break a
        header cannot hold, U+2028 and U+2029 and U+0085 among them, escaped)."""
        msg = EmailMessage()
        msg["Subject"] = header_text(n.subject())
        msg["From"] = self.sender
        msg["To"] = ", ".join(self.recipients(n))
        msg["Date"] = formatdate(usegmt=True)
        msg["Message-ID"] = f"<{n.key}@intermission>"
        msg["Idempotency-Key"] = n.key
        msg.set_content("\n".join(n.lines()) + "\n")
        msg.add_alternative(_html(n), subtype="html")
        return msg

    def send(self, n: Notification) -> None:
        """Connect, optionally STARTTLS and log in, and send, all within ``timeout_s``. A
        message that cannot be built (or that this server cannot carry) raises a
        permanent :class:`~intermission.errors.DeliveryError`: no retry can send it."""
        try:
            msg = self.message(n)
            msg.as_bytes()  # (what smtplib sends: whatever fails here would fail there)
        except Exception as exc:
            raise DeliveryError(
                f"the e-mail cannot be built ({type(exc).__name__}: "
                f"{visible(redact_text(str(exc)))[:120]})",
                target=self.name, key=n.key, permanent=True,
            ) from None  # fmt: skip
        host, port = self.smtp
        server = smtplib.SMTP(timeout=self.timeout_s)
        server._host = host  # type: ignore[attr-defined]  # (what SMTP(host) keeps: STARTTLS checks the certificate for it)
        # smtplib's timeout counts per operation: the whole attempt is cut at timeout_s
        cut = threading.Timer(self.timeout_s, _cut, (server,))
        cut.daemon = True
        started = time.monotonic()
        cut.start()
        self._server = server
        try:
            with server:
                server.connect(host, port)
                if self.starttls:
                    server.starttls(context=self.ssl_context or ssl.create_default_context())
                if self.username is not None and self._password is not None:
                    server.login(self.username, self._password)
                refused = server.send_message(msg, self.sender, self.recipients(n))
        except smtplib.SMTPNotSupportedError as exc:
            what = "STARTTLS" if "STARTTLS" in str(exc) else "what the message needs (SMTPUTF8)"
            raise DeliveryError(
                f"the SMTP server does not offer {what}", target=self.name, key=n.key,
                permanent=what != "STARTTLS",
            ) from None  # fmt: skip
        except smtplib.SMTPRecipientsRefused as exc:
            codes = sorted({code for code, _ in exc.recipients.values()})
            raise DeliveryRefusedError(
                f"the SMTP server refused every recipient ({codes})", target=self.name,
                status=codes[0] if codes else 550, key=n.key,
            ) from None  # fmt: skip
        except smtplib.SMTPResponseException as exc:
            raise DeliveryRefusedError(
                f"the SMTP server answered {exc.smtp_code}", target=self.name,
                status=exc.smtp_code, key=n.key,
            ) from None  # fmt: skip
        except (OSError, smtplib.SMTPException) as exc:  # refused, timeout, TLS, dropped
            spent = time.monotonic() - started
            whole = ""
            if isinstance(exc, TimeoutError) or spent >= self.timeout_s:
                whole = (f": no complete answer within timeout_s={self.timeout_s:g} (the "
                         f"attempt ended after {spent:.1f} s)")  # fmt: skip
            raise DeliveryUnreachableError(
                f"could not reach the SMTP server ({type(exc).__name__}){whole}",
                target=self.name, key=n.key,
            ) from None  # fmt: skip
        finally:
            cut.cancel()
            self._server = None
        if refused:  # some took it: a retry would send it to them again
            import logging

            logging.getLogger("intermission.notify").warning(
                "notification %s: %d recipient(s) refused by %s", n.key, len(refused), self.name
            )

    def abort(self) -> None:
        """End the attempt in progress now (a dispatcher that stops and cannot wait)."""
        server = self._server
        if server is not None:
            _cut(server)

    def close(self) -> None:
        """Nothing held between sends (one SMTP connection per message)."""

    def __repr__(self) -> str:
        return f"Email(name={self.name!r})"


def _cut(server: smtplib.SMTP) -> None:
    """End an attempt that outlived its time: the blocked read returns at once."""
    sock = getattr(server, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def header_text(text: str) -> str:
    r"""``text`` as a header can hold it: every character that breaks a line (``\n``,
    ``\r``, U+0085, U+2028, U+2029, …) and every control character escaped."""
    return "".join(
        c if c.isprintable() and len(f"a{c}a".splitlines()) == 1 else _escaped(c) for c in text
    )


def _escaped(c: str) -> str:
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _html(n: Notification) -> str:
    """The HTML alternative: the same facts, every piece of text escaped, links as links."""
    esc = html.escape
    parts = [f"<h3>{esc(n.subject())}</h3>"]
    for label, value in (("Agent", n.agent), ("Reason", n.reason)):
        if value:
            parts.append(f"<p>{label}: {esc(visible(value))}</p>")
    items = []
    for i, item in enumerate(n.interrupts):
        li = esc(n.what(i))
        deadline = n.body()["interrupts"][i].get("deadline_at")
        if deadline:
            li += f"<br>decide by {esc(deadline)}"
        if item.get("link"):
            li += f'<br><a href="{esc(item["link"], quote=True)}">Open in the console</a>'
        items.append(f"<li>{li}</li>")
    if items:
        parts.append(f"<ul>{''.join(items)}</ul>")
    for name in ("verdict", "reviewer", "comment", "resolution", "effect", "actor"):
        if n.detail.get(name) is not None:
            parts.append(f"<p>{name.capitalize()}: {esc(visible(n.detail[name]))}</p>")
    if n.link and not n.interrupts:
        parts.append(f'<p><a href="{esc(n.link, quote=True)}">Open in the console</a></p>')
    parts.append(f"<p><small>Notification {esc(n.key)}</small></p>")
    return f"<html><body>{''.join(parts)}</body></html>"
