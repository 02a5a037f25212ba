"""Settings of the notebook layer: who decides by default, how often the Inbox looks."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field

__all__ = ["Settings", "default_reviewer", "settings"]


@dataclass
class Settings:
    """Change them for the whole notebook: ``intermission.notebook.settings.reviewer = "alice"``."""

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
    if settings.reviewer:
        return settings.reviewer
    env = os.environ.get("INTERMISSION_REVIEWER")
    if env:
        return env
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no user name in this container
        return ""


def reviewer_or_default(name: str | None) -> str:
    """The reviewer a decision records: ``name``, or when it is empty the default reviewer
    (R47: a decision never records nobody); refused when there is neither."""
    from ..errors import InvalidDecisionError

    chosen = (name or "").strip() or default_reviewer().strip()
    if not chosen:
        raise InvalidDecisionError(
            "a decision needs a reviewer: type your name in the Reviewer field "
            "(or set intermission.notebook.settings.reviewer)"
        )
    return chosen
