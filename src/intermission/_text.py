r"""Text that cannot spoof a terminal or a diagram: control characters shown as escapes (R42).

A pending reason or a task argument may come from model output. Printed raw, a ``\r`` or
an ANSI escape rewrites the approver's screen (a forged row in ``intermission pending``);
in a diagram it breaks the grammar. ``visible`` writes every such character as its Python
escape (``\x1b``, ``\r``, ``\u202e``), which a person can read and nothing interprets.
"""

from __future__ import annotations

__all__ = ["visible"]

_BIDI = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)  # the format characters that reorder text (a right-to-left override hides what follows)


def _escape(c: str) -> str:
    code = ord(c)
    if c == "\r":
        return "\\r"
    if c == "\t":
        return "\\t"
    if c == "\n":
        return "\\n"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _unsafe(c: str, keep_newlines: bool) -> bool:
    code = ord(c)
    if c == "\n":
        return not keep_newlines
    # (U+2028 and U+2029 break a line in a mail client, a chat message, an editor)
    return (code < 0x20 or 0x7F <= code < 0xA0 or c in _BIDI or 0xD800 <= code <= 0xDFFF
            or c in "\u2028\u2029")  # fmt: skip


def visible(text: object, *, keep_newlines: bool = False) -> str:
    """``text`` with every control, bidi-override and lone-surrogate character escaped (and
    newlines too, unless ``keep_newlines``); a backslash stays a backslash."""
    s = "" if text is None else str(text)
    if s.isascii() and s.isprintable():
        return s
    return "".join(_escape(c) if _unsafe(c, keep_newlines) else c for c in s)
