"""Who decides when a decision names nobody: the principal of an enclosing
:func:`deciding_as` block (decide_and_resume wraps its ``decide`` in one).

A leaf of :mod:`intermission.hitl`: tool decisions (:mod:`~intermission.hitl.api`) and
graph decisions (:mod:`~intermission.hitl.graph`) both read it, neither through the other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ..principals import Actor, Principal

__all__ = ["deciding_as", "default_principal"]

_DECIDING_AS: ContextVar[Any] = ContextVar("intermission_deciding_as", default=None)


@contextmanager
def deciding_as(principal: Principal | Actor | None) -> Iterator[None]:
    """Within this block, a decision given no ``principal=`` (HITL.submit, decide_graph)
    is made by ``principal`` (decide_and_resume wraps its ``decide`` in it)."""
    token = _DECIDING_AS.set(principal)
    try:
        yield
    finally:
        _DECIDING_AS.reset(token)


def default_principal(principal: Principal | Actor | None) -> Principal | Actor | None:
    """``principal``, else the one of an enclosing :func:`deciding_as`."""
    return principal if principal is not None else _DECIDING_AS.get()
