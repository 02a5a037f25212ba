"""Every store runs the shipped conformance suite."""

from intermission.testing.conformance import *  # noqa: F403
