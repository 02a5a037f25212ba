"""Lazy imports of optional dependencies with an actionable error (STYLE §4)."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependencyError

__all__ = ["require"]


def require(module: str, extra: str, hint: str = "") -> ModuleType:
    """Import ``module`` or raise MissingDependencyError naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(module, extra, hint) from None
