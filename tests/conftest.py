"""Shared fixtures."""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def skip_or_fail(reason: str) -> None:
    """Skip locally, fail under CI=true: a missing dependency never hides in CI."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: missing dependencies fail, they do not skip)")
    pytest.skip(reason)
