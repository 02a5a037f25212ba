"""Who acts on a session: a :class:`Principal` (a name and roles), and an :class:`Actor`,
a principal as a decision records it — through which surface (``via``) and whether that
surface authenticated it.

Where each surface takes its principal from:

- the AG-UI server and its console: the bearer token or JWT of the request
  (``agui_app(..., auth=...)``), authenticated; a client-sent ``metadata.reviewer`` is at
  most a display note;
- the CLI: the operating system's user (effective uid), mapped by an identity file's
  ``os_users:`` (``--auth FILE`` / ``$INTERMISSION_AUTH``) to a person with that file's
  roles (authenticated); an unmapped user is ``user@host`` with no roles, asserted — never
  roles from OS group names; ``--reviewer`` adds a display note only;
- notebooks: the person ``intermission.notebook.settings.identity`` maps the kernel's OS
  user to (authenticated); else its principal or reviewer, or the OS user, asserted;
- Python: ``HITL.submit(..., principal=Principal(...))`` — the calling code vouches for it;
  a bare ``HITLDecision.approve().reviewer("x")`` is recorded as asserted (not
  authenticated).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, Field

from ._check import shown
from ._model import Model
from .audit import Via
from .errors import PrincipalNameError, UsageError

__all__ = [
    "Actor", "Principal", "Via", "actor_of", "label", "name_key", "os_login", "os_principal",
    "nameless_via", "principal_name", "same_principal", "surface",
]  # fmt: skip

MAX_NAME = 200

# letters of one writing system that legitimately share a name (Japanese mixes kana and
# kanji; Korean hangul and hanja): counted as one script when telling mixed scripts apart
_ONE_SCRIPT = {"HIRAGANA": "HAN", "KATAKANA": "HAN", "CJK": "HAN", "HANGUL": "HAN",
               "BOPOMOFO": "HAN", "HALFWIDTH": "HAN"}  # fmt: skip
# letters and symbols that draw nothing (filler characters, a blank braille cell)
_INVISIBLE = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800, 0x034F, 0x17B4, 0x17B5})


def _script(c: str) -> str | None:
    """The script of a letter (the first word of its Unicode name), None for others."""
    if not unicodedata.category(c).startswith("L"):
        return None
    word = unicodedata.name(c, "UNKNOWN").split(" ")[0].split("-")[0]
    if word == "MODIFIER":  # (an apostrophe-like letter: any script's)
        return None
    return _ONE_SCRIPT.get(word, word)


def principal_name(value: Any, what: str = "a principal's name") -> str:
    """A principal's name as it is kept: NFKC-normalised and trimmed. Refused
    (:class:`~intermission.errors.PrincipalNameError`) when it holds control, format
    (zero-width), bidi or invisible characters or mixes scripts (``аlice`` with a Cyrillic
    ``а``), so that what people read is who it is. ``user@host`` and e-mail addresses are
    names like any other.

    Example:
        >>> principal_name("ａｌｉｃｅ")
        'alice'
    """
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME:
        raise UsageError(f"{what} is 1 to {MAX_NAME} characters of text, not {shown(value)}")
    name = unicodedata.normalize("NFKC", value).strip()
    for c in name:
        kind = unicodedata.category(c)
        if kind in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or ord(c) in _INVISIBLE or (
            kind == "Mn" and (0xFE00 <= ord(c) <= 0xFE0F or 0xE0100 <= ord(c) <= 0xE01EF)
        ) or (kind == "Zs" and c != " "):
            raise PrincipalNameError(
                f"{what} holds an invisible, control or bidi character "
                f"(U+{ord(c):04X}): {shown(value)}; type the name with visible characters only"
            )
    scripts = sorted({s for s in map(_script, name) if s is not None})
    if len(scripts) > 1:
        raise PrincipalNameError(
            f"{what} mixes scripts ({', '.join(scripts).lower()}): {shown(value)}; a name "
            "that looks like another person's is refused — type it in one script"
        )
    if not name or len(name) > MAX_NAME or unicodedata.normalize("NFKC", name) != name:
        raise UsageError(f"{what} is 1 to {MAX_NAME} characters of text, not {shown(value)}")
    return name


def name_key(name: str) -> str:
    """How principal names compare: NFKC of the trimmed, case-folded NFKC form, so ``Alice`` and
    ``ａｌｉｃｅ`` are one person (votes count once, the requester is recognised)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).strip().casefold())


def same_principal(a: str | None, b: str | None) -> bool:
    """True when both name one principal (see :func:`name_key`)."""
    return a is not None and b is not None and name_key(a) == name_key(b)


def _name(value: Any, what: str = "a principal's name") -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME:
        raise UsageError(f"{what} is 1 to {MAX_NAME} characters of text, not {shown(value)}")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise UsageError(f"{what} holds no control characters: {shown(value)}")
    return value


def _roles(value: Any) -> frozenset[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise UsageError(f"roles are a set of role names, not {shown(value)}")
    return frozenset(_name(r, "a role") for r in value)


@dataclass(frozen=True, slots=True, init=False)
class Principal:
    """Who decides (or asks): a name and the roles it holds.

    Example:
        >>> p = Principal("alice", {"sre"})
        >>> p.name, sorted(p.roles)
        ('alice', ['sre'])
    """

    name: str
    roles: frozenset[str]

    def __init__(self, name: str, roles: Iterable[str] = frozenset()) -> None:
        object.__setattr__(self, "name", principal_name(name))
        object.__setattr__(self, "roles", _roles(roles))

    def __repr__(self) -> str:
        roles = f", {{{', '.join(repr(r) for r in sorted(self.roles))}}}" if self.roles else ""
        return f"Principal({self.name!r}{roles})"


class Actor(Model):
    """A principal as an action records it, with the surface it came through.

    It holds ``name`` and ``roles``, the surface it came through (``via``), whether that
    surface authenticated it, and a ``display`` note the person typed (a ``--reviewer``
    name, a console's ``metadata.reviewer``) that is never taken as the identity."""

    model_config = ConfigDict(extra="forbid", defer_build=True, frozen=True)

    name: str
    roles: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    via: Via | None = Field(default=None, exclude_if=lambda v: v is None)
    authenticated: bool = Field(default=False, exclude_if=lambda v: not v)
    display: str | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def principal(self) -> Principal:
        """The principal (name and roles)."""
        return Principal(self.name, frozenset(self.roles))

    @property
    def label(self) -> str:
        """How views name it: ``name``, or ``display (name)`` when a display note differs."""
        return label(self.name, self.display) or self.name


def label(name: str | None, display: str | None = None) -> str | None:
    """How a decider is named to people: ``name``, or ``display (name)`` when the display
    name the person typed differs from who they are."""
    if name and display and display != name:
        return f"{display} ({name})"
    return name


def actor_of(
    who: Principal | Actor | None,
    *,
    via: Via = "api",
    authenticated: bool = True,
    display: str | None = None,
) -> Actor | None:
    """The actor a surface records for ``who``: an :class:`Actor` as it is (a surface made
    it), a :class:`Principal` as coming ``via`` that surface (``authenticated``: the code
    that passes it vouches for it), None for None."""
    if who is None or isinstance(who, Actor):
        return who
    if not isinstance(who, Principal):
        raise UsageError(f"principal is a Principal, not {shown(who)}")
    return Actor(
        name=who.name,
        roles=sorted(who.roles),
        via=via,
        authenticated=authenticated,
        display=display if display and display != who.name else None,
    )


_SURFACE: ContextVar[Via | None] = ContextVar("intermission_surface", default=None)


@contextmanager
def surface(via: Via) -> Iterator[None]:
    """Inside: a decision that names nobody (a server without auth whose client sent no
    reviewer) still records the surface it came through, so an AG-UI click and a console
    click do not look alike (nor like the system) on the session and its trail."""
    token = _SURFACE.set(via)
    try:
        yield
    finally:
        _SURFACE.reset(token)


def nameless_via() -> Via | None:
    """The surface a decision that names nobody came through (see :func:`surface`)."""
    return _SURFACE.get()


def os_login() -> str:
    """The login name of the operating system's user running this process, by its
    effective uid (not ``$USER``, which anyone can set)."""
    import os

    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError, OSError):  # no passwd database (Windows, a bare container)
        import getpass

        try:
            return getpass.getuser()
        except (OSError, KeyError):
            return f"uid-{os.geteuid()}" if hasattr(os, "geteuid") else "unknown"


def os_principal() -> Principal:
    """The operating system's user running this process as an unmapped principal:
    ``user@host`` by its effective uid, with no roles. Roles never come from the user's
    groups (a local group named ``sre`` grants nothing): an identity file's ``os_users:``
    maps a login to a person with roles (:meth:`intermission.IdentityMap.os_principal`)."""
    import socket

    host = socket.gethostname() or "localhost"
    return Principal(f"{os_login()}@{host}")
