"""Value coercions and comparisons of the SQL92 filter, following RocketMQ's Java rules.

Message properties are strings. When a property meets a number it is parsed the way Java does
it (``Long.valueOf`` against an integer, ``Double.valueOf`` against a decimal); two properties
compared with ``> >= < <=`` are both parsed as doubles; a property compared with TRUE/FALSE is
read with ``Boolean.valueOf`` (``"true"`` in any case is true, anything else false). Where
RocketMQ throws (a property that is not a number), these functions return ``None``: the
comparison is UNKNOWN, which never selects a message.
"""

from __future__ import annotations

import re

__all__ = ["compare", "equals", "java_boolean", "java_double", "java_long"]

_LONG_RE = re.compile(r"[+-]?[0-9]+")
_DOUBLE_RE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
)
_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))  # String.trim() strips every char <= ' '


def java_long(text: str) -> int | None:
    """``Long.valueOf(text)`` or ``None`` where Java throws (not an integer, out of range)."""
    if len(text) < 19 and text.isascii() and text.isdigit():  # fast path: plain, in range
        return int(text)
    if _LONG_RE.fullmatch(text) is None:
        return None
    value = int(text)
    return value if _LONG_MIN <= value <= _LONG_MAX else None


def java_double(text: str) -> float | None:
    """``Double.valueOf(text)`` (decimal forms, NaN, Infinity, f/d suffix, surrounding
    whitespace) or ``None`` where Java throws. Hexadecimal floats are not supported."""
    text = text.strip(_JAVA_TRIM)
    if _DOUBLE_RE.fullmatch(text) is None:
        return None
    if text[-1] in "fFdD" and not text.endswith("Infinity"):
        text = text[:-1]
    return float(text.replace("Infinity", "inf").replace("NaN", "nan"))


def java_boolean(text: str) -> bool:
    """``Boolean.valueOf(text)``: true only for "true" in any letter case."""
    return text.lower() == "true"


def _coerce_str(text: str, like: object) -> object:
    """Convert a property string to the type of the other operand (None when it cannot)."""
    kind = type(like)
    if kind is int:
        return java_long(text)
    if kind is float:
        return java_double(text)
    if kind is bool:
        return java_boolean(text)
    return text


def compare(lv: object, rv: object) -> int | None:
    """Three-way compare for ``> >= < <=``: negative, zero or positive; ``None`` when UNKNOWN
    (a NULL operand, a property that is not a number, incomparable kinds)."""
    if lv is None or rv is None:
        return None
    lt = type(lv)
    rt = type(rv)
    if lt is str and rt is str:
        lv = java_double(lv)  # type: ignore[arg-type]
        rv = java_double(rv)  # type: ignore[arg-type]
    elif lt is str:
        lv = _coerce_str(lv, rv)  # type: ignore[arg-type]
    elif rt is str:
        rv = _coerce_str(rv, lv)  # type: ignore[arg-type]
    if lv is None or rv is None or type(lv) is bool or type(rv) is bool:
        return None
    return (lv > rv) - (lv < rv)  # type: ignore[operator]


def equals(lv: object, rv: object) -> bool | None:
    """``=``: ``None`` (UNKNOWN) when an operand is NULL or a property cannot be converted to
    the other operand's type; strings compare exactly, numbers numerically (long vs double
    promotes), booleans only with booleans (or a property read as a boolean)."""
    if lv is None or rv is None:
        return None
    lt = type(lv)
    rt = type(rv)
    if lt is rt:
        return lv == rv
    if lt is str:
        lv = _coerce_str(lv, rv)  # type: ignore[arg-type]
    elif rt is str:
        rv = _coerce_str(rv, lv)  # type: ignore[arg-type]
    if lv is None or rv is None:
        return None
    if (type(lv) is bool) != (type(rv) is bool):
        return False
    return lv == rv
