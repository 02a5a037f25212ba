"""Who acts on a session: a :class:`Principal` (a name and roles), and an :class:`Actor`,
a principal as a decision records it — through which surface (``via``) and whether that
surface authenticated it.

Where each surface takes its principal from:

- the AG-UI server and its console: the bearer token or JWT of the request
  (``agui_app(..., auth=...)``), authenticated; a client-sent ``metadata.reviewer`` is at
  most a display note;
- the CLI: the operating system's user (effective uid) at this host, with the user's
  groups as roles — :func:`os_principal`; ``--reviewer`` adds a display note only;
- notebooks: ``intermission.notebook.settings`` (its principal or reviewer) or the OS user,
  not authenticated;
- Python: ``HITL.submit(..., principal=Principal(...))`` — the calling code vouches for it;
  a bare ``HITLDecision.approve().reviewer("x")`` is recorded as asserted (not
  authenticated).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, Field

from ._check import shown
from ._model import Model
from .audit import Via
from .errors import UsageError

__all__ = ["Actor", "Principal", "Via", "actor_of", "label", "os_principal"]

MAX_NAME = 200


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
        object.__setattr__(self, "name", _name(name))
        object.__setattr__(self, "roles", _roles(roles))

    def __repr__(self) -> str:
        roles = f", {{{', '.join(repr(r) for r in sorted(self.roles))}}}" if self.roles else ""
        return f"Principal({self.name!r}{roles})"


class Actor(Model):
    """A principal as an action records it: ``name`` and ``roles``, the surface it came
    through (``via``), whether that surface authenticated it, and a ``display`` note the
    person typed (a ``--reviewer`` name, a console's ``metadata.reviewer``) that is never
    taken as the identity."""

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


def os_principal() -> Principal:
    """The operating system's user running this process: ``user@host`` by its effective
    uid (not ``$USER``, which anyone can set), with the names of the user's groups as its
    roles."""
    import os
    import socket

    host = socket.gethostname() or "localhost"
    try:
        import grp
        import pwd

        entry = pwd.getpwuid(os.geteuid())
        user = entry.pw_name
        gids = set(os.getgrouplist(user, entry.pw_gid))
        roles = set()
        for gid in gids:
            try:
                roles.add(grp.getgrgid(gid).gr_name)
            except KeyError:  # a group id with no name here
                continue
    except (ImportError, KeyError, OSError):  # no passwd database (Windows, a bare container)
        import getpass

        try:
            user = getpass.getuser()
        except (OSError, KeyError):
            user = f"uid-{os.geteuid()}" if hasattr(os, "geteuid") else "unknown"
        roles = set()
    return Principal(f"{user}@{host}", frozenset(roles))
