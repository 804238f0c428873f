"""Turning one Spark ``Row`` into one RocketMQ ``Message``.

:class:`RowMessageMapper` holds the whole recipe (topic, body, tag, keys, user properties and
the hash-selector argument) as plain picklable data, so Spark can ship it to its Python workers.
Every part can be a column name or a function of the row; functions must be picklable by
``cloudpickle`` (lambdas and functions of the driver script are; functions of a module the
workers cannot import are not).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import json
import re
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.protocol.message import Message

RowFn = Callable[[Any], Any]
"""A function of one row (a ``pyspark.sql.Row`` or any mapping) returning a value."""


def row_as_dict(row: Any) -> dict[str, Any]:
    """The row as a plain ``dict`` (nested rows become dicts too).

    Accepts a ``pyspark.sql.Row`` (anything with ``asDict``) or a mapping.

    Raises:
        TypeError: ``row`` is neither.
    """
    if hasattr(row, "asDict"):
        return row.asDict(recursive=True)
    if isinstance(row, Mapping):
        return dict(row)
    raise TypeError(f"cannot read fields of a {type(row).__name__}; expected a pyspark Row or a mapping")


def _json_default(value: Any) -> Any:
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    raise TypeError(f"value of type {type(value).__name__} is not JSON serialisable")


def row_to_json(row: Any, exclude: Iterable[str] = ()) -> bytes:
    """The row as compact UTF-8 JSON, fields in column order.

    Nulls become ``null``; dates and timestamps ISO-8601 strings (as ``isoformat()``); decimals
    strings; NaN and infinities ``null`` (JSON has no such numbers); map keys strings. Written by
    ``orjson`` (a dependency of the ``spark`` extra: ~0.4 µs for a flights row against ~6 µs
    with ``json``).

    Args:
        row: a ``pyspark.sql.Row`` or a mapping.
        exclude: column names left out of the JSON.
    """
    data = row_as_dict(row)
    for name in exclude:
        data.pop(name, None)
    return orjson.dumps(data, default=_json_default, option=orjson.OPT_NON_STR_KEYS)


@dataclass(frozen=True)
class FieldTemplate:
    """A picklable ``row -> str`` function filling a ``str.format`` template with the row's fields.

    ``FieldTemplate("{year}-{month}-{day}-{carrier}{flight}")`` gives ``"2013-1-1-UA1545"``.
    A null field renders as an empty string.

    Raises (when called):
        KeyError: the template names a column the row does not have.
    """

    template: str

    def __call__(self, row: Any) -> str:
        if type(row) is dict:  # only the fields the template names (the writer's Arrow rows)
            data = {}
            for name in self._fields:
                value = row[name]
                data[name] = "" if value is None else value
        else:
            data = {k: ("" if v is None else v) for k, v in row_as_dict(row).items()}
        return self.template.format_map(data)

    @functools.cached_property
    def _fields(self) -> tuple[str, ...]:
        """The top-level field names the template uses (``{a.b}`` and ``{a[0]}`` use ``a``)."""
        names = (re.split(r"[.\[]", field)[0] for _, field, _, _ in string.Formatter().parse(self.template)
                 if field)
        return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class ColumnValue:
    """A picklable ``row -> value`` function returning one column (e.g. a map column as the
    message's user properties)."""

    column: str

    def __call__(self, row: Any) -> Any:
        return row[self.column]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return text or None


@dataclass(frozen=True)
class RowMessageMapper:
    """How a row becomes a message. All parts but ``topic`` are optional.

    Args:
        topic: destination topic.
        body: ``None`` (default) → the whole row as UTF-8 JSON (minus ``exclude_from_body``);
            a column name → that column's value (``str`` encoded UTF-8, ``bytes`` as is, anything
            else as JSON); a function of the row → its ``bytes``/``str`` result.
        tag_col / tag_fn: the message tag (``TAGS`` property) from a column or a function; a
            null or empty value sends no tag.
        keys_col / keys_fn: the business key(s) (``KEYS`` property, indexed by the broker); a
            function may return one string or an iterable of strings; null sends no keys.
        properties_fn: a function returning a ``dict[str, str]`` of user properties
            (``ColumnValue("properties")`` reads a ``map<string,string>`` column).
        delay_col: column holding the delay level (0 or null: none; 1..18, the broker's
            ``messageDelayLevel`` index).
        selector_col / selector_fn: the argument given to the producer's message-queue selector
            (the demo hashes it with ``SelectMessageQueueByHash``); a null value becomes ``""``
            so such rows still land in one well-defined queue. Without either, no selector is
            used and the producer spreads messages round-robin.
        exclude_from_body: column names left out of the default JSON body (helper columns).

    Raises:
        IllegalArgumentError: both a column and a function were given for the same part, or the
            topic is empty.
    """

    topic: str
    body: str | RowFn | None = None
    tag_col: str | None = None
    tag_fn: RowFn | None = None
    keys_col: str | None = None
    keys_fn: RowFn | None = None
    properties_fn: RowFn | None = None
    delay_col: str | None = None
    selector_col: str | None = None
    selector_fn: RowFn | None = None
    exclude_from_body: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.topic:
            raise IllegalArgumentError("topic must not be empty")
        for name in ("tag", "keys", "selector"):
            if getattr(self, f"{name}_col") is not None and getattr(self, f"{name}_fn") is not None:
                raise IllegalArgumentError(f"give {name}_col or {name}_fn, not both")
        object.__setattr__(self, "exclude_from_body", tuple(self.exclude_from_body))

    @property
    def uses_selector(self) -> bool:
        """True when rows carry a selector argument (send through a ``MessageQueueSelector``)."""
        return self.selector_col is not None or self.selector_fn is not None

    def body_of(self, row: Any) -> bytes:
        """The message body for ``row`` (see ``body`` above)."""
        if self.body is None:
            return row_to_json(row, self.exclude_from_body)
        value = row[self.body] if isinstance(self.body, str) else self.body(row)
        if value is None:
            raise IllegalArgumentError(f"the body column {self.body!r} is null" if isinstance(self.body, str)
                                       else "the body function returned None")
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        if isinstance(value, str):
            return value.encode("utf-8")
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default).encode()

    def selector_arg(self, row: Any) -> str:
        """The selector argument for ``row`` as a string (``""`` for null)."""
        value = row[self.selector_col] if self.selector_col is not None else self.selector_fn(row)
        return "" if value is None else str(value)

    def to_message(self, row: Any) -> Message:
        """Build the message for ``row``.

        Raises:
            IllegalArgumentError: a user property uses a reserved RocketMQ name.
            KeyError / ValueError: a named column is missing from the row.
        """
        tag = _text(row[self.tag_col] if self.tag_col is not None else
                    self.tag_fn(row) if self.tag_fn is not None else None)
        if tag is not None and "||" in tag:
            raise IllegalArgumentError(f"{self._part('tag')}: tag {tag!r} contains '||', the separator of tag "
                                       "expressions (no subscription could select it)")
        keys: Any = (row[self.keys_col] if self.keys_col is not None else
                     self.keys_fn(row) if self.keys_fn is not None else None)
        if keys is not None and not isinstance(keys, str):
            keys = [k for k in (_text(k) for k in keys) if k]
        else:
            keys = _text(keys)
        props = self.properties_fn(row) if self.properties_fn is not None else None
        if props:
            props = {str(k): str(v) for k, v in props.items() if v is not None}
        delay = row[self.delay_col] if self.delay_col is not None else None
        body = self.body_of(row)
        try:
            return Message(self.topic, body, tags=tag, keys=keys or None, properties=props or None,
                           delay_time_level=int(delay or 0))
        except IllegalArgumentError as exc:  # a separator or a reserved name: say which column
            text = str(exc)
            part = ("tag" if text.startswith("Message tags") else "keys" if text.startswith("Message key")
                    else "properties")
            raise IllegalArgumentError(f"{self._part(part)}: {text}") from exc

    def _part(self, part: str) -> str:
        """Where a part of the message comes from: ``column 'x'`` or ``the tag_fn function``."""
        if part == "properties":
            fn = self.properties_fn
            return f"column {fn.column!r}" if isinstance(fn, ColumnValue) else "the properties_fn function"
        col = getattr(self, f"{part}_col")
        return f"column {col!r}" if col is not None else f"the {part}_fn function"
