"""Reading and writing the JSON dialect fastjson (the Java side) emits (docs/protocol.md §3.7).

fastjson writes non-string map keys bare (``{0:"addr"}``) and object map keys as objects
(``{{"brokerName":"b","queueId":0,"topic":"t"}:5}``). :func:`loads` accepts standard JSON
(fast path) and those forms; object keys become :class:`ObjectKey`, numeric keys ints.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
#: how ``json`` reads a string (the C ``scanstring``): ``(text, index after the opening quote) ->
#: (value, index after the closing quote)``
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]  # not in typeshed


class ObjectKey(Mapping):
    """A JSON object used as a map key (fastjson writes ``Map<MessageQueue, X>`` that way).

    An immutable, hashable mapping: two keys with the same items are equal whatever their order.
    ``key["topic"]`` reads a field; :meth:`as_dict` returns a plain dict.

    Args:
        items: a mapping or an iterable of (name, value) pairs; values must be hashable
            (strings, numbers, booleans, None).
    """

    __slots__ = ("_items", "_hash")

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items: tuple[tuple[str, Any], ...] = tuple(sorted(pairs, key=lambda kv: kv[0]))
        self._hash = hash(self._items)

    def __getitem__(self, key: str) -> Any:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ObjectKey):
            return self._items == other._items
        return Mapping.__eq__(self, other)

    def __lt__(self, other: ObjectKey) -> bool:
        return self._items < other._items

    def as_dict(self) -> dict[str, Any]:
        return dict(self._items)

    def __repr__(self) -> str:
        return f"ObjectKey({self.as_dict()!r})"


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def ws(self) -> None:
        s, i = self.s, self.i
        if i < len(s) and s[i] in " \t\n\r":  # fastjson writes no blanks: skip the regex then
            m = _WS.match(s, i)
            if m is not None:  # always: the pattern matches the empty string
                self.i = m.end()

    def value(self) -> Any:
        self.ws()
        c = self.s[self.i:self.i + 1]
        if c == "{":
            return self.obj()
        if c == "[":
            return self.arr()
        if c == '"':
            v, self.i = _scanstring(self.s, self.i + 1)
            return v
        m = _NUMBER.match(self.s, self.i)
        if m and m.end() > self.i:
            self.i = m.end()
            return float(m.group()) if (m.group(1) or m.group(2)) else int(m.group())
        for lit, val in (("true", True), ("false", False), ("null", None)):
            if self.s.startswith(lit, self.i):
                self.i += len(lit)
                return val
        raise ValueError(f"unexpected character {c!r} at {self.i}")

    def opens_empty(self, close: str) -> bool:
        """Step over an opening bracket; True (and past ``close``) when nothing is inside."""
        self.i += 1
        self.ws()
        if self.s[self.i] == close:
            self.i += 1
            return True
        return False

    def closes(self, close: str) -> bool:
        """Step over what follows an entry: True at ``close``, False at a comma."""
        self.ws()
        c = self.s[self.i]
        self.i += 1
        if c == close:
            return True
        if c != ",":
            raise ValueError(f"expected ',' or {close!r} at {self.i - 1}")
        return False

    def obj(self) -> dict:
        out: dict = {}
        if self.opens_empty("}"):
            return out
        while True:
            self.ws()
            key = self.value()
            if isinstance(key, dict):
                key = ObjectKey(key)
            self.ws()
            if self.s[self.i] != ":":
                raise ValueError(f"expected ':' at {self.i}")
            self.i += 1
            out[key] = self.value()
            if self.closes("}"):
                return out

    def arr(self) -> list:
        out: list = []
        if self.opens_empty("]"):
            return out
        while True:
            out.append(self.value())
            if self.closes("]"):
                return out


def loads(data: bytes | str) -> Any:
    """Parse standard JSON or fastjson's dialect.

    Raises:
        ValueError: the text is neither.
    """
    text = data.decode("utf-8") if isinstance(data, bytes | bytearray | memoryview) else data
    try:
        return json.loads(text)
    except ValueError:
        pass
    p = _Parser(text)
    try:
        v = p.value()
    except IndexError as exc:
        raise ValueError("truncated JSON") from exc
    p.ws()
    if p.i != len(text):
        raise ValueError(f"trailing data at {p.i}")
    return v


def _write(obj: Any, standard: bool, out: list[str], sort_keys: bool = True) -> None:
    if isinstance(obj, Mapping):
        out.append("{")
        first = True
        for k in (sorted(obj, key=lambda k: (str(type(k)), k)) if sort_keys else obj):
            if not first:
                out.append(",")
            first = False
            if isinstance(k, ObjectKey):
                _write(k.as_dict(), standard, out, sort_keys)
            elif isinstance(k, str):
                out.append(json.dumps(k, ensure_ascii=standard))
            elif standard:
                out.append(json.dumps(str(k)))
            else:
                out.append(str(k))
            out.append(":")
            _write(obj[k], standard, out, sort_keys)
        out.append("}")
    elif isinstance(obj, list | tuple | set | frozenset):
        out.append("[")
        for n, v in enumerate(obj):
            if n:
                out.append(",")
            _write(v, standard, out, sort_keys)
        out.append("]")
    else:
        out.append(json.dumps(obj, ensure_ascii=standard))


def dumps(obj: Any, *, standard: bool = True, sort_keys: bool = True) -> str:
    """Compact JSON.

    Args:
        obj: dicts (any hashable keys: str, int, :class:`ObjectKey`), lists, tuples, sets,
            str, int, float, bool, None.
        standard: True writes every map key as a JSON string and non-ASCII as ``\\uXXXX``
            (fastjson's ``WriteNonStringKeyAsString``/``BrowserCompatible``); False writes int keys
            bare (``{0:"x"}``) and non-ASCII as UTF-8, as fastjson does by default.
        sort_keys: True sorts map keys (fastjson sorts bean properties); False keeps the dicts'
            own order, so a reader's order (Java ``HashMap`` order) can be reproduced.

    :class:`ObjectKey` keys are always written as JSON objects (``{{"brokerName":...}:5}``).
    """
    out: list[str] = []
    _write(obj, standard, out, sort_keys)
    return "".join(out)
