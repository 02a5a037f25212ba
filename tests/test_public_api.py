"""The public surface: a sorted ``__all__`` of documented names (STYLE §5)."""

from __future__ import annotations

import inspect

import intermission


def test_all_is_sorted_and_complete() -> None:
    names = intermission.__all__
    constants = ["END", "START"]
    assert names[:2] == constants and names[2:] == sorted(names[2:])
    public = {
        n
        for n, v in vars(intermission).items()
        if not n.startswith("_") and not inspect.ismodule(v)
    }
    assert public - {"annotations", "TYPE_CHECKING"} <= set(names) | {"__version__"}
    # the lazy surface resolves every name, and dir() lists them
    assert set(names) <= set(dir(intermission))
    for name in names:
        assert hasattr(intermission, name), name


def test_every_public_name_has_a_docstring() -> None:
    for name in intermission.__all__:
        obj = getattr(intermission, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert (obj.__doc__ or "").strip(), f"{name} has no docstring"
