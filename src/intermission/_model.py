"""The base of intermission's pydantic models: a constructor given bad data raises the
package's UsageError (also a ValueError, as pydantic's own error is), never a bare
pydantic error (R42). Loaders validate with ``model_validate`` and report their own typed
errors (SnapshotSchemaError) with the path.

The wrap sits on the metaclass's ``__call__`` (what ``Model(...)`` runs), not on
``__init__``: pydantic calls a custom ``__init__`` during validation too, which would wrap
nested errors and slow every load down.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic._internal._model_construction import ModelMetaclass

from .errors import UsageError

__all__ = ["Model", "describe"]


def describe(exc: ValidationError) -> str:
    """The first problem of a validation error: where, and what."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "value"
    return f"{where}: {first['msg']}"


class _TypedConstructor(ModelMetaclass):
    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except ValidationError as exc:
            raise UsageError(f"{cls.__name__}: {describe(exc)}") from None


class Model(BaseModel, metaclass=_TypedConstructor):
    """A pydantic model whose constructor raises typed errors."""
