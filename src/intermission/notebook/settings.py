"""Settings of the notebook layer: who decides by default, how often the Inbox looks.

Decisions made in a notebook are recorded ``via: notebook`` and not authenticated: the
name is the one the widget's Reviewer field holds (filled from ``settings.principal``,
``settings.reviewer``, ``$INTERMISSION_REVIEWER`` or the OS user), with the roles of the
principal of that name (the widget's ``principal=``, or ``settings.principal``).

With an identity map (``settings.identity = load_identity(FILE)``, or
``$INTERMISSION_AUTH``), a decision is the person the map's ``os_users:`` maps the kernel's
OS user to, with that file's roles, authenticated (the typed name a display note) — what a
policy with roles, approvals > 1 or not_requester needs.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..principals import Actor, Principal

if TYPE_CHECKING:
    from ..identity import IdentityMap

__all__ = [
    "Settings", "default_reviewer", "known_roles", "notebook_actor", "settings", "viewer",
]  # fmt: skip


@dataclass
class Settings:
    """Change them for the whole notebook: ``intermission.notebook.settings.reviewer = "alice"``."""

    principal: Principal | None = None
    """Who decides in this notebook, with roles (``Principal("alice", {"sre"})``); a
    widget's own ``principal=`` comes first."""
    reviewer: str | None = None
    """The reviewer name widgets fill in; None: ``$INTERMISSION_REVIEWER``, else the OS user."""
    identity: IdentityMap | None = None
    """Who the kernel's OS user is (its ``os_users:``); None: ``$INTERMISSION_AUTH``'s
    identity file, else none (decisions are typed names, asserted)."""
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
    mapped = _mapped()
    if mapped is not None:  # the kernel's OS user, as the identity map knows them
        shown = name.strip() if name and name.strip() != mapped.name else None
        return Actor(name=mapped.name, roles=sorted(mapped.roles), via="notebook",
                     authenticated=True, display=shown)  # fmt: skip
    from ..principals import principal_name

    name = principal_name(name)
    roles = known_roles(principal).get(name, [])
    return Actor(name=name, roles=roles, via="notebook", authenticated=False)


def viewer(name: str | None, principal: Principal | None = None) -> Actor | None:
    """Who a widget's buttons would decide as now (the Reviewer field ``name``, else its
    ``principal``, as :func:`notebook_actor` records them); None when nobody is named."""
    from ..errors import IntermissionError

    try:
        return notebook_actor(reviewer_or_default(name, principal), principal)
    except IntermissionError:  # no name, or one that is refused as a name
        return None


def _mapped() -> Principal | None:
    """The person the identity map (``settings.identity``, else ``$INTERMISSION_AUTH``'s
    file) maps the kernel's OS user to, or None."""
    identity = settings.identity
    if identity is None and os.environ.get("INTERMISSION_AUTH"):
        from ..identity import load_identity

        identity = load_identity(os.environ["INTERMISSION_AUTH"])
    return identity.os_principal() if identity is not None else None


def known_roles(principal: Principal | None = None) -> dict[str, list[str]]:
    """The roles of the principals a widget knows by name (``principal``, then
    ``settings.principal``): what a decision under each name holds (see
    :func:`notebook_actor`); a name not in it holds none."""
    known: dict[str, list[str]] = {}
    for p in (principal, settings.principal):
        if p is not None and p.name not in known:
            known[p.name] = sorted(p.roles)
    return known
