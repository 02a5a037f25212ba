"""Settings of the notebook layer: who decides by default, how often the Inbox looks.

Decisions made in a notebook are recorded ``via: notebook`` and not authenticated: the
name is the one the widget's Reviewer field holds (filled from ``settings.principal``,
``settings.reviewer``, ``$INTERMISSION_REVIEWER`` or the OS user), with the roles of the
principal of that name (the widget's ``principal=``, or ``settings.principal``).
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field

from ..principals import Actor, Principal

__all__ = ["Settings", "default_reviewer", "known_roles", "notebook_actor", "settings"]


@dataclass
class Settings:
    """Change them for the whole notebook: ``intermission.notebook.settings.reviewer = "alice"``."""

    principal: Principal | None = None
    """Who decides in this notebook, with roles (``Principal("alice", {"sre"})``); a
    widget's own ``principal=`` comes first."""
    reviewer: str | None = None
    """The reviewer name widgets fill in; None: ``$INTERMISSION_REVIEWER``, else the OS user."""
    inbox_poll_s: float | None = 5.0
    """How often an Inbox re-reads ``store.pending()`` (None: never; off on autopilot)."""
    view_poll_s: float | None = 2.0
    """How often a shown decision widget re-reads its session (None: never; off on
    autopilot): a decision made elsewhere shows within seconds (R51)."""
    autopilot: bool = field(default_factory=lambda: os.environ.get("INTERMISSION_AUTOPILOT") == "1")
    """Code twins decide in place of a person (``$INTERMISSION_AUTOPILOT=1``: set for nbval
    by ``notebooks/conftest.py``, and for the decided run of ``make notebooks``). Off, a
    code-twin cell leaves the decision to a click and says so."""


settings = Settings()
"""The settings every widget reads when it is made."""


def default_reviewer() -> str:
    """The reviewer a widget starts with (see :attr:`Settings.reviewer`)."""
    if settings.principal is not None:
        return settings.principal.name
    if settings.reviewer:
        return settings.reviewer
    env = os.environ.get("INTERMISSION_REVIEWER")
    if env:
        return env
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no user name in this container
        return ""


def reviewer_or_default(name: str | None, principal: Principal | None = None) -> str:
    """The reviewer a decision records: ``name``, or when it is empty the widget's
    ``principal``, else the default reviewer (a decision never records nobody);
    refused when there is none."""
    from ..errors import InvalidDecisionError

    fallback = principal.name if principal is not None else default_reviewer()
    chosen = (name or "").strip() or fallback.strip()
    if not chosen:
        raise InvalidDecisionError(
            "a decision needs a reviewer: type your name in the Reviewer field "
            "(or set intermission.notebook.settings.reviewer)"
        )
    return chosen


def notebook_actor(name: str, principal: Principal | None = None) -> Actor:
    """Who a notebook decision records: ``name`` (the Reviewer field), with the roles of
    ``principal`` (the widget's) or ``settings.principal`` when it is of that name; via
    the notebook, not authenticated (anyone at the keyboard can type a name)."""
    roles = known_roles(principal).get(name, [])
    return Actor(name=name, roles=roles, via="notebook", authenticated=False)


def known_roles(principal: Principal | None = None) -> dict[str, list[str]]:
    """The roles of the principals a widget knows by name (``principal``, then
    ``settings.principal``): what a decision under each name holds (see
    :func:`notebook_actor`); a name not in it holds none."""
    known: dict[str, list[str]] = {}
    for p in (principal, settings.principal):
        if p is not None and p.name not in known:
            known[p.name] = sorted(p.roles)
    return known
