"""Test helpers that ship with intermission: the store conformance suite (import
``intermission.testing.conformance`` in a pytest module) and cross-process workers."""

from .._clock import FakeClock
from .._ids import SequentialIds

__all__ = ["FakeClock", "SequentialIds"]
