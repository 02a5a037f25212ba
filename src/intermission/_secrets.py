"""Secrets kept out of what is shown. :func:`mask_url` prints a store URL (or a libpq
connection string, or a message holding either) with its password as ``***``; every log
line, error and usage line that may hold a store URL passes through it. :func:`read_token`
takes ``serve``'s bearer token from a file or the environment — never from argv, which
every local user can read (``ps``, ``/proc/PID/cmdline``)."""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any
from urllib.parse import unquote

from .errors import UsageError

__all__ = [
    "MASK",
    "TOKEN_ENV",
    "mask_known",
    "mask_options",
    "mask_url",
    "passwords_in",
    "read_token",
]

MASK = "***"
TOKEN_ENV = "INTERMISSION_TOKEN"

_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<rest>\S*)")
_QUERY_PASSWORD = re.compile(r"(?i)([?&](?:pg)?password=)([^&#]*)")
# libpq's keyword form (``host=db password='a b'``): a quoted value may hold spaces and \'
_KEYWORD = re.compile(r"(?i)(?<![\w-])((?:pg)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)")
_SCAN = re.compile(f"{_URL.pattern}|{_KEYWORD.pattern.removeprefix('(?i)')}", re.IGNORECASE)


def _mask_rest(scheme: str, rest: str, found: list[str]) -> str:
    """What follows ``scheme://``, with the userinfo's password and a ``password=`` query
    parameter masked (each value masked is added to ``found``). A password written raw
    (``@ / ? #`` not percent-encoded, a common slip) is covered up to the last ``@``: of
    the whole URL in a PostgreSQL one (a database name or option holding ``@`` is rare; a
    password that does is not), else of the authority, or past it when what follows the
    colon is no port."""
    colon, first_at, at = rest.find(":"), rest.find("@"), -1
    if 0 <= colon < first_at and not {"/", "?", "#"} & set(rest[:colon]):  # user:password@
        if scheme.lower().startswith("postgres"):
            at = rest.rfind("@")
        else:
            end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
            at = rest.rfind("@", 0, end)
            if at < 0 and not rest[colon + 1 : end].isdigit():
                at = rest.rfind("@")  # (a password holding a raw / ? or #)
    head, tail = "", rest
    if at >= 0:
        user, password = rest[:colon], rest[colon + 1 : at]
        found.append(password)
        head, tail = f"{user}:{MASK}", rest[at:]

    def query(m: re.Match[str]) -> str:
        found.append(m.group(2))
        return m.group(1) + MASK

    return head + _QUERY_PASSWORD.sub(query, tail)


def mask_url(text: str, *, whole: bool = False) -> str:
    """``text`` with every password it holds shown as ``***``: a URL's
    (``postgresql://user:***@host/db``), a ``?password=`` query parameter's, and a libpq
    keyword string's (``host=db password=***``). Works on a URL alone or on a message that
    holds some; text without a password comes back unchanged. ``whole=True``: ``text`` is
    one store URL, spaces and all (a password with a raw space stays inside it).

    Example:
        >>> mask_url("postgresql://ann:s3cret@db.example.com:5432/app?sslmode=require")
        'postgresql://ann:***@db.example.com:5432/app?sslmode=require'
        >>> mask_url("host=db user=ann password='s 3' dbname=app")
        'host=db user=ann password=*** dbname=app'
    """
    return _masked(text, [], whole)


def _masked(text: str, found: list[str], whole: bool = False) -> str:
    if "@" not in text and "=" not in text:  # (the common case: nothing to look for)
        return text
    url = _URL.match(text) if whole else None
    if url is not None:
        return url.group("scheme") + _mask_rest(url.group("scheme"), text[url.end(1) :], found)

    def one(m: re.Match[str]) -> str:
        if m.group("scheme") is not None:
            scheme = m.group("scheme")
            return scheme + _mask_rest(scheme, m.group("rest"), found)
        value = m.group(4)
        found.append(value[1:-1] if value[:1] == "'" and len(value) > 1 else value)
        return m.group(3) + MASK

    return _SCAN.sub(one, text)


def passwords_in(dsn: str) -> list[str]:
    """The passwords a store URL or connection string holds, as written and decoded,
    longest first: a driver's message that quotes a piece of the DSN is masked by value."""
    found: list[str] = []
    _masked(dsn, found, whole=True)
    return sorted({p for p in found + [unquote(p) for p in found] if p}, key=len, reverse=True)


_QUOTED = re.compile(r"""(["'])(.+?)\1""")


def mask_known(text: str, secrets: Iterable[str], *, raw: bool = True) -> str:
    """``text`` with each of ``secrets`` replaced by ``***``, then :func:`mask_url`. A
    quoted piece of one is masked too: libpq quotes the bit of a URL it could not take
    (``"pa"`` of a password with a raw ``/``; host ``'ss@db'`` of one with a raw ``@``).
    ``raw=False`` masks only URLs and quoted pieces, not every bare occurrence: for text
    of our own around a driver's (already masked) message, where a password that is an
    ordinary word (``intermission``) would otherwise blank out the words it spells."""
    secrets = [s for s in secrets if s]

    def piece(m: re.Match[str]) -> str:
        inner = m.group(2)
        for secret in secrets:
            at = inner.find("@")
            if inner in secret or (at > 0 and secret.endswith(inner[:at])):
                return f"{m.group(1)}{MASK}{m.group(1)}"
        return m.group(0)

    if secrets:
        text = _QUOTED.sub(piece, text)
    for secret in secrets if raw else ():
        text = text.replace(secret, MASK)
    return mask_url(text)


_SECRET_OPTION = re.compile(
    r"(--[\w-]*(?:tok|secret|pass|key|cred)(?![\w-]*file)[\w-]*)(=|\s+)(\S+)", re.I
)
_AMBIGUOUS = re.compile(r"(ambiguous option: --[\w-]+=)(\S+)")


def mask_options(text: str) -> str:
    """An argparse message with store passwords masked, and the value of any option whose
    name says it is a secret (``--tokn=X``, ``--api-key X``) shown as ``***``: argparse
    echoes what it could not place."""
    text = _AMBIGUOUS.sub(rf"\1{MASK}", mask_url(text))  # (--toke=X: --token or --token-file?)
    return _SECRET_OPTION.sub(rf"\1\2{MASK}", text)


def read_token(file: str | None, environ: MutableMapping[str, str] | None = None) -> str | None:
    """``serve``'s bearer token: the one line of ``file`` (``--token-file``), else
    ``$INTERMISSION_TOKEN``, else None. The variable is taken out of the environment
    either way, so the processes the agents' tools start do not inherit it. A file others
    may write is refused (they could put their own token in it); one anyone may read is
    used with a warning on stderr (container secrets are often mode 0444; ``chmod 600`` it
    where you can). The file's path is never shown: it may be the token itself, pasted in
    the wrong place."""
    environ = os.environ if environ is None else environ
    value = environ.pop(TOKEN_ENV, None)  # (out of the environment either way)
    if file is not None:
        return _checked(_read_file(file), "the file --token-file names")
    return None if value is None else _checked(value, TOKEN_ENV)


def _read_file(file: str) -> str:
    try:
        with open(file, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise UsageError(
                    "--token-file names something that is not a file: give the path of a "
                    "file that holds the token (chmod 600)"
                )
            if os.name == "posix" and mode & (stat.S_IWGRP | stat.S_IWOTH):
                raise UsageError(
                    "the file --token-file names may be written by other users, who could "
                    "put their own token in it: chmod 600 it (or go-w), then start again"
                )
            if os.name == "posix" and mode & stat.S_IROTH:
                print(
                    "warning: every local user can read the file --token-file names: "
                    "chmod 600 it (or o-r)", file=sys.stderr, flush=True,
                )  # fmt: skip
            raw = f.read(65537)
    except OSError as exc:  # (the path is not shown: it may be the token itself)
        raise UsageError(
            f"cannot read the file --token-file names ({type(exc).__name__}): give the path "
            f"of a file holding the token, or set {TOKEN_ENV}"
        ) from None
    if len(raw) > 65536:
        raise UsageError("the file --token-file names is over 64 KiB: is it the token file?")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("the file --token-file names is not UTF-8 text") from None


def _checked(value: str, where: str) -> str:
    token = value.rstrip("\r\n")  # (an editor's or echo's final newline is not the token's)
    if not token:
        raise UsageError(
            f"{where} is empty: write the token in it (say "
            "`openssl rand -hex 32 > token; chmod 600 token`)"
        )
    if any(c.isspace() or not c.isprintable() for c in token):
        raise UsageError(
            f"{where} holds a space, a line break or a control character: a bearer token "
            "is one line of visible characters (not shown here)"
        )
    return token


_MASKING = False


def mask_process_output() -> None:
    """For a process run from the command line: tracebacks (of the main thread and of any
    other) and log records — their messages and the tracebacks they carry — are printed
    with store passwords masked. A library user's process is left alone. Once per process."""
    global _MASKING
    if _MASKING:
        return
    _MASKING = True
    import logging
    import threading
    import traceback

    def excepthook(kind: Any, exc: Any, tb: Any) -> None:
        sys.stderr.write(mask_url("".join(traceback.format_exception(kind, exc, tb))))

    def thread_excepthook(args: Any) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "?"
        text = "".join(
            traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)
        )
        sys.stderr.write(f"Exception in thread {name}:\n{mask_url(text)}")

    sys.excepthook = excepthook
    threading.excepthook = thread_excepthook
    make = logging.getLogRecordFactory()

    def record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        rec = make(*args, **kwargs)
        try:
            message = rec.getMessage()
        except Exception:  # (a broken format string: logging reports it as it always did)
            return rec
        masked = mask_url(message)
        if masked != message:
            rec.msg, rec.args = masked, None
        if rec.exc_info and not rec.exc_text:
            rec.exc_text = mask_url("".join(traceback.format_exception(*rec.exc_info)).rstrip("\n"))
        return rec

    logging.setLogRecordFactory(record)
