"""Checking JSON values against a tool's JSON argument schema, without the tool at hand.

A task carries its tool's argument schema (``HITLTask.args_schema``), so edited arguments
can be judged in any process, by the data alone. This checks what tool schemas say —
``type``, ``enum``/``const``, ``properties``/``required``/``additionalProperties``,
``items``/``prefixItems``, ``anyOf``/``oneOf``/``allOf``, ``$ref`` into ``$defs``, and the
usual number, string and array bounds — and converts a value the way the tool would take
it (pydantic's lax mode): ``"5"`` for an integer is 5, ``"true"`` for a boolean is True.
Keywords it does not know are not checked here: the tool validates its arguments again
before it runs, and a bad one becomes an observation, never a run with bad arguments.
Dependency-free and imported only when a decision edits arguments.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ._finite import FINITE_ONLY, non_finite

__all__ = ["SchemaMismatch", "conform"]

_MAX_DEPTH = 64
_TRUE = frozenset({"true", "1", "yes", "on", "t", "y"})
_FALSE = frozenset({"false", "0", "no", "off", "f", "n"})
# (ASCII digits only, as pydantic reads them: "１２" is not 12 to the tool)
_INTEGER = re.compile(r"\s*[+-]?\d+(\.0*)?\s*", re.ASCII)
_NUMBER = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*", re.ASCII)


class SchemaMismatch(ValueError):
    """A value does not fit the schema; ``path`` says where (``user.age``)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path or 'args'}: {message}")


def conform(value: Any, schema: Any) -> Any:
    """``value`` as ``schema`` takes it (converted like pydantic's lax mode), or raise
    SchemaMismatch naming the first place it does not fit. A non-finite number is refused
    wherever it sits, whatever the schema says (as the tool's own validation refuses it)."""
    where = non_finite(value)
    if where is not None:
        raise SchemaMismatch(where, FINITE_ONLY)
    root = schema if isinstance(schema, dict) else {}
    return _conform(value, schema, root, "", 0)


def _conform(value: Any, schema: Any, root: dict[str, Any], path: str, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise SchemaMismatch(path, "the schema nests too deeply")
    if schema is True or schema is None or schema == {}:
        return value
    if schema is False:
        raise SchemaMismatch(path, "no value is allowed here")
    if not isinstance(schema, dict):
        return value
    ref = schema.get("$ref")
    if isinstance(ref, str):
        value = _conform(value, _resolve(ref, root, path), root, path, depth + 1)
    for sub in schema.get("allOf") or ():
        value = _conform(value, sub, root, path, depth + 1)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            value = _first_fit(value, options, root, path, depth)
    kind = schema.get("type")
    if kind is not None:
        value = _typed(value, kind, path)
    if "const" in schema and not _same(value, schema["const"]):
        raise SchemaMismatch(path, f"must be {schema['const']!r}")
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(_same(value, e) for e in enum):
        raise SchemaMismatch(path, f"must be one of {enum!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _bounds(value, schema, path)
    elif isinstance(value, str):
        _text(value, schema, path)
    elif isinstance(value, list):
        value = _array(value, schema, root, path, depth)
    elif isinstance(value, dict):
        value = _object(value, schema, root, path, depth)
    return value


def _resolve(ref: str, root: dict[str, Any], path: str) -> Any:
    if not ref.startswith("#"):
        raise SchemaMismatch(path, f"cannot follow the schema reference {ref!r}")
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise SchemaMismatch(path, f"the schema reference {ref!r} leads nowhere")
        node = node[part]
    return node


def _first_fit(value: Any, options: list[Any], root: dict[str, Any], path: str, depth: int) -> Any:
    # exact fits first: a "5" fits ``string`` as it is before ``integer`` would convert it
    misfits: list[SchemaMismatch] = []
    for lax in (False, True):
        for option in options:
            try:
                fitted = _conform(value, option, root, path, depth + 1)
            except SchemaMismatch as exc:
                kind = option.get("type") if isinstance(option, dict) else False
                typeless = kind is None and isinstance(value, (dict, list))  # (a $ref)
                if lax and (typeless or (isinstance(kind, str) and _is(value, kind))):
                    misfits.append(exc)  # (the form the value has says best what is wrong)
                continue
            if lax or _same(fitted, value):
                return fitted
    if misfits:
        raise misfits[0]
    kinds = [o.get("type") for o in options if isinstance(o, dict) and "type" in o]
    raise SchemaMismatch(path, f"fits none of the allowed forms {kinds or options!r}")


def _typed(value: Any, kind: Any, path: str) -> Any:
    kinds = kind if isinstance(kind, list) else [kind]
    for k in kinds:  # an exact fit first
        if _is(value, k):
            if k == "number" and isinstance(value, int):
                if abs(value) < 2**53:
                    return float(value)  # (as a float argument takes it: 5 is 5.0)
                if not _finite(value):  # (a float argument cannot take it)
                    continue
            return value
    for k in kinds:
        converted = _convert(value, k)
        if converted is not _NO:
            return converted
    if "number" in kinds and _not_finite(value):  # (say why: it reads as a number)
        raise SchemaMismatch(path, FINITE_ONLY)
    shown = " or ".join(str(k) for k in kinds)
    raise SchemaMismatch(path, f"must be {shown}, not {_json_type(value)} {value!r:.60}")


_NO: Any = object()


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return {
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "null": value is None,
        "array": isinstance(value, list),
        "object": isinstance(value, dict),
    }.get(kind, True)


def _convert(value: Any, kind: str) -> Any:
    """What pydantic's lax mode makes of ``value`` for ``kind``, or _NO."""
    if isinstance(value, bool):
        return _NO  # (True is not a number here, though Python says it is 1)
    if kind == "integer":
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
            return int(value)
        if isinstance(value, str) and _INTEGER.fullmatch(value):
            try:
                return int(value.strip().partition(".")[0])
            except ValueError:  # more digits than Python (and pydantic) read
                return _NO
        return _NO
    if kind == "number":
        if isinstance(value, str) and _NUMBER.fullmatch(value):
            number = float(value)
            return number if math.isfinite(number) else _NO
        return _NO
    if kind == "boolean":
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        return _NO
    return _NO


def _bounds(value: float, schema: dict[str, Any], path: str) -> None:
    import operator

    checks = (
        ("minimum", operator.ge, ">="), ("maximum", operator.le, "<="),
        ("exclusiveMinimum", operator.gt, ">"), ("exclusiveMaximum", operator.lt, "<"),
    )  # fmt: skip
    for key, ok, op in checks:
        bound = schema.get(key)
        if isinstance(bound, (int, float)) and not isinstance(bound, bool):
            if not ok(value, bound):
                raise SchemaMismatch(path, f"must be {op} {bound}")
    step = schema.get("multipleOf")
    if isinstance(step, (int, float)) and step > 0 and not _multiple(value, step):
        raise SchemaMismatch(path, f"must be a multiple of {step}")


def _multiple(value: float, step: float) -> bool:
    if isinstance(value, int) and isinstance(step, int):
        return value % step == 0
    try:
        quotient = value / step
    except OverflowError:  # (an integer too large for a float)
        return False
    return math.isfinite(quotient) and abs(quotient - round(quotient)) < 1e-9


def _finite(value: int) -> bool:
    """True when an integer fits a float."""
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _not_finite(value: Any) -> bool:
    """True for text or an integer that reads as a number no float holds ("1e999", "nan")."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return False
    try:
        return not math.isfinite(float(value))
    except OverflowError:  # (an integer larger than any float)
        return True
    except ValueError:  # (not a number at all)
        return False


def _text(value: str, schema: dict[str, Any], path: str) -> None:
    least, most = schema.get("minLength"), schema.get("maxLength")
    if isinstance(least, int) and len(value) < least:
        raise SchemaMismatch(path, f"must be at least {least} characters")
    if isinstance(most, int) and len(value) > most:
        raise SchemaMismatch(path, f"must be at most {most} characters")
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            found = re.search(pattern, value)
        except re.error:
            return  # (a pattern Python cannot read: the tool checks it when it runs)
        if found is None:
            raise SchemaMismatch(path, f"must match {pattern!r}")


def _array(
    value: list[Any], schema: dict[str, Any], root: dict[str, Any], path: str, depth: int
) -> list[Any]:
    least, most = schema.get("minItems"), schema.get("maxItems")
    if isinstance(least, int) and len(value) < least:
        raise SchemaMismatch(path, f"must have at least {least} items")
    if isinstance(most, int) and len(value) > most:
        raise SchemaMismatch(path, f"must have at most {most} items")
    head = schema.get("prefixItems")
    head = head if isinstance(head, list) else []
    rest = schema.get("items", True)
    out = []
    for i, item in enumerate(value):
        sub = head[i] if i < len(head) else rest
        out.append(_conform(item, sub, root, f"{path}.{i}" if path else str(i), depth + 1))
    if schema.get("uniqueItems") is True:
        seen: list[Any] = []
        for item in out:
            if any(_same(item, s) for s in seen):
                raise SchemaMismatch(path, "must not repeat an item")
            seen.append(item)
    return out


def _object(
    value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], path: str, depth: int
) -> dict[str, Any]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    for name in schema.get("required") or ():
        if name not in value:
            raise SchemaMismatch(f"{path}.{name}" if path else str(name), "is required")
    extra = schema.get("additionalProperties", True)
    out = {}
    for key, item in value.items():
        where = f"{path}.{key}" if path else str(key)
        if key in properties:
            out[key] = _conform(item, properties[key], root, where, depth + 1)
        elif extra is False:
            raise SchemaMismatch(where, "is not an argument of this tool")
        else:
            out[key] = _conform(item, extra, root, where, depth + 1)
    return out


def _same(a: Any, b: Any) -> bool:
    """JSON equality (``1`` and ``True`` differ; ``1`` and ``1.0`` are one number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
