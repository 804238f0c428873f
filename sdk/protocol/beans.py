"""A small declarative base for the JSON bodies fastjson writes (docs/protocol.md §3.6).

A body is a dataclass deriving from :class:`JsonBean`; each field's JSON name is its camelCase
name (or ``json_field(key=...)``) and its codec is inferred or given with ``json_field(codec=...)``.
``to_dict()`` writes bean properties alphabetically and omits None, like fastjson; maps keep their
order, so a body read from Java and written back is byte-identical. ``from_dict()`` is lenient:
missing keys take the field default, numbers may arrive as strings (the C++ client) and enums as
names or ordinals.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any, ClassVar, Protocol, TypeVar

from . import fastjson
from .fastjson import ObjectKey
from .fieldspec import field_spec, type_name
from .message import MessageQueue

B = TypeVar("B", bound="JsonBean")
_T = TypeVar("_T")


def parse_body(what: str, body: bytes | str, build: Callable[[Any], _T]) -> _T:
    """``build(fastjson.loads(body))`` with every way a hostile body can be wrong (not JSON,
    too deeply nested, a list where an object belongs, a missing key) raised as ValueError
    naming ``what``.

    Raises:
        ValueError: the body is malformed.
    """
    try:
        return build(fastjson.loads(body))
    except ValueError:
        raise
    except (TypeError, KeyError, AttributeError, IndexError, RecursionError) as exc:
        raise ValueError(f"malformed {what} JSON: {type(exc).__name__}: {str(exc)[:200]}") from exc


class Codec:
    """How one JSON value maps to a Python value and back."""

    __slots__ = ("dump", "load")

    def __init__(self, dump: Callable[[Any], Any], load: Callable[[Any], Any]) -> None:
        self.dump = dump
        self.load = load


def _ident(v: Any) -> Any:
    return v


PLAIN = Codec(_ident, _ident)


def _to_int(v: Any) -> int:
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            return int(float(v))
    return int(v)


def _to_float(v: Any) -> float:
    return float(v)


def _to_bool(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1")
    return bool(v)


def _to_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else str(v)


INT = Codec(_ident, _to_int)
FLOAT = Codec(_ident, _to_float)
BOOL = Codec(_ident, _to_bool)
STR = Codec(_ident, _to_str)


class DictCodable(Protocol):
    """What :func:`bean` needs of a class: a :class:`JsonBean`, or a hand-written body with
    ``to_dict``/``from_dict`` (``rocketmq_sdk.protocol.bodies``)."""

    def to_dict(self) -> dict[str, Any]: ...

    @classmethod
    def from_dict(cls, d: Any) -> Any: ...


def bean(cls: type[DictCodable]) -> Codec:
    """A nested object: written with ``to_dict()``, read with ``cls.from_dict``."""
    return Codec(lambda v: v.to_dict(), cls.from_dict)


def list_of(item: Codec) -> Codec:
    return Codec(lambda v: [item.dump(x) for x in v], lambda v: [item.load(x) for x in (v or [])])


def map_of(value: Codec, key: Codec = PLAIN) -> Codec:
    """``Map<K, V>``; int keys are written bare by fastjson's default form."""
    return Codec(lambda v: {key.dump(k): value.dump(x) for k, x in v.items()},
                 lambda v: {key.load(k): value.load(x) for k, x in (v or {}).items()})


def _mq_load(k: Any) -> MessageQueue:
    if isinstance(k, str):  # a quoted object key (WriteNonStringKeyAsString)
        k = fastjson.loads(k)
    return MessageQueue.from_dict(k)


#: A ``MessageQueue`` used as a map key: written as an object key, read from one.
MQ_KEY = Codec(lambda mq: ObjectKey(mq.to_dict()), _mq_load)
#: A ``MessageQueue`` value: ``{"brokerName":..,"queueId":..,"topic":..}``.
MQ = Codec(lambda mq: mq.to_dict(), MessageQueue.from_dict)
INT_KEY = Codec(_ident, _to_int)


def enum_codec(cls: type[enum.Enum]) -> Codec:
    """Enum written by name, read from a name or an ordinal (the C++ client sends ordinals)."""
    members = list(cls)

    def load(v: Any) -> enum.Enum:
        if isinstance(v, bool):
            raise ValueError(f"not a {cls.__name__}: {v!r}")
        if isinstance(v, int) or (isinstance(v, str) and v.lstrip("-").isdigit()):
            return members[int(v)]
        return cls[v]

    return Codec(lambda e: e.name, load)


def json_field(default: Any = dataclasses.MISSING, *, key: str | None = None, codec: Codec | None = None,
               default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field with an explicit JSON key and/or codec."""
    md: dict[str, Any] = {}
    if key is not None:
        md["json_key"] = key
    if codec is not None:
        md["codec"] = codec
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=md)
    return dataclasses.field(default=default, metadata=md)


_SIMPLE = {"int": INT, "float": FLOAT, "bool": BOOL, "str": STR}


def _codec_of(f: dataclasses.Field[Any]) -> Codec:
    """The field's ``json_field(codec=...)``, else one inferred from a plain annotation."""
    return f.metadata.get("codec") or _SIMPLE.get(type_name(f).replace(" ", "").replace("|None", ""), PLAIN)


class JsonBean:
    """Base of the JSON body dataclasses (see the module docstring)."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # every subclass is a dataclass
    _spec_cache: ClassVar[tuple[tuple[str, str, Codec], ...]]

    @classmethod
    def _spec(cls) -> tuple[tuple[str, str, Codec], ...]:
        spec = cls.__dict__.get("_spec_cache")
        if spec is None:
            spec = cls._spec_cache = field_spec(cls, "json_key", _codec_of, by_key=True)
        return spec

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict: keys sorted (fastjson bean order), None values omitted."""
        out: dict[str, Any] = {}
        for attr, key, codec in self._spec():
            v = getattr(self, attr)
            if v is not None:
                out[key] = codec.dump(v)
        return out

    @classmethod
    def from_dict(cls: type[B], d: dict[str, Any] | None) -> B:
        """Build from a parsed JSON object; unknown keys are ignored, missing ones defaulted.

        Raises:
            ValueError: a value cannot be converted (e.g. an unknown enum name).
        """
        d = d or {}
        kwargs = {}
        for attr, key, codec in cls._spec():
            if key in d and d[key] is not None:
                try:
                    kwargs[attr] = codec.load(d[key])
                except (TypeError, KeyError, IndexError, ValueError) as exc:
                    raise ValueError(f"{cls.__name__}.{key}: cannot read {d[key]!r}: {exc}") from exc
        return cls(**kwargs)

    def to_json(self, *, standard: bool = False) -> bytes:
        """UTF-8 JSON as the Java side writes it (``standard=False``: bare int keys, object keys),
        or with every key quoted (``standard=True``)."""
        return fastjson.dumps(self.to_dict(), standard=standard, sort_keys=False).encode("utf-8")

    @classmethod
    def from_json(cls: type[B], body: bytes | str) -> B:
        """Parse standard JSON or the fastjson dialect.

        Raises:
            ValueError: not JSON, or a value of the wrong kind.
        """
        return parse_body(cls.__name__, body, cls.from_dict)
