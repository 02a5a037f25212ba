"""Shared fixtures (none yet; shared helpers live in tests/_helpers.py)."""
