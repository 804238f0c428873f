"""Java ``.properties`` settings and the dataclasses that hold them: the one toolkit the SDK, the
admin client, the broker and the name server use.

- :func:`parse_properties` / :func:`read_properties` read ``key=value`` text (``broker.conf``,
  ``namesrv.conf``, the bodies of GET/UPDATE_BROKER_CONFIG and GET/UPDATE_NAMESRV_CONFIG);
  :func:`format_properties` writes a settings dataclass back in that form, camelCase keys.
- :func:`camel` / :func:`snake` turn Python field names into RocketMQ's key names and back
  (``broker_ip1`` ↔ ``brokerIP1``; headers and JSON beans use the same rule).
- :func:`typed_settings` converts text values to the field types of a dataclass, and
  :func:`apply_properties` sets them on a live object. A field whose metadata has
  ``{"properties": "inline"}`` holds a nested settings dataclass whose keys share the same flat
  namespace (``BrokerConfig.store``: Java's ``broker.conf`` mixes broker and store keys).
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

__all__ = ["INLINE", "apply_properties", "camel", "coerce_settings", "convert_value", "format_properties",
           "inline_fields", "parse_properties", "read_properties", "settings_fields", "snake", "typed_settings"]

#: metadata of a dataclass field holding nested settings whose keys are read and written flat
INLINE = {"properties": "inline"}


def snake(name: str) -> str:
    """``brokerClusterName`` → ``broker_cluster_name``; ``brokerIP1`` → ``broker_ip1``."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z\d])([A-Z])", r"\1_\2", name).lower()


def camel(name: str) -> str:
    """``broker_cluster_name`` → ``brokerClusterName``; an ``ip`` part is upper-cased as in Java's
    names (``broker_ip1`` → ``brokerIP1``, ``client_ip`` → ``clientIP``)."""
    head, *rest = name.split("_")
    return head + "".join("IP" + p[2:] if re.fullmatch(r"ip\d*", p) else p[:1].upper() + p[1:] for p in rest)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``key=value`` (or ``key:value``) lines, ``#``/``!``
    comments and blank lines skipped, keys and values stripped; a later key wins. Line
    continuations and escapes are not interpreted (RocketMQ never writes them)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


def read_properties(path: str) -> dict[str, str]:
    """:func:`parse_properties` of a UTF-8 file.

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, encoding="utf-8") as fh:
        return parse_properties(fh.read())


def format_properties(obj: object) -> str:
    """``camelKey=value`` lines of a settings dataclass (inline fields flattened), as
    GET_BROKER_CONFIG / GET_NAMESRV_CONFIG answer: booleans ``true``/``false``, enums by value,
    None as an empty value."""
    lines = []
    cls: type = type(obj)  # typed `type`: mypy wrongly finds type[object] not Hashable for @cache
    for name, owner in settings_fields(cls).items():
        value = getattr(_owner_of(obj, owner), name)
        if value is None:
            value = ""
        elif isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, enum.Enum):
            value = value.value
        lines.append(f"{camel(name)}={value}")
    return "\n".join(lines) + "\n"


def inline_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of ``cls`` marked ``metadata={"properties": "inline"}``."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("properties") == "inline"]


@cache
def settings_fields(cls: type) -> dict[str, tuple[str, ...]]:
    """Every setting name of the dataclass ``cls`` → the path of inline fields holding it (``()``
    for its own fields; ``("store",)`` for ``BrokerConfig``'s store settings). Own fields win
    over inline ones of the same name."""
    inline = inline_fields(cls)
    skip = {f.name for f in inline}
    out: dict[str, tuple[str, ...]] = {f.name: () for f in dataclasses.fields(cls)
                                       if f.name not in skip and not f.name.startswith("_")}
    for f in inline:
        for name, path in settings_fields(_field_type(cls, f.name)).items():
            out.setdefault(name, (f.name, *path))
    return out


_NUMBERS: dict[Any, str] = {int: "an integer", float: "a number"}


def convert_value(raw: Any, tp: Any) -> Any:
    """``raw`` (text of a properties file, or already a value) as type ``tp``: ``bool`` accepts
    ``true``/``false`` in any case, ``int``/``float`` decimal text, an ``Enum`` its value or name;
    for ``X | None`` an empty text is None. Other types take the text as is.

    Raises:
        ValueError: the text does not parse as ``tp`` (e.g. ``tlsEnable=yes``, ``listenPort=x``).
    """
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        if raw is None or (isinstance(raw, str) and not raw.strip() and type(None) in args):
            return None
        tp = next((a for a in args if a is not type(None)), str)
    if not isinstance(raw, str):
        return tp(raw) if isinstance(tp, type) and issubclass(tp, enum.Enum) else raw
    text = raw.strip()
    if tp is bool:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{raw!r} is not a boolean (true or false)")
        return text.lower() == "true"
    if tp in _NUMBERS:
        try:
            return tp(text)
        except ValueError:
            raise ValueError(f"{raw!r} is not {_NUMBERS[tp]}") from None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for member in tp:
            if text in (str(member.value), member.name):
                return member
        raise ValueError(f"{raw!r} is not one of {', '.join(str(m.value) for m in tp)}")
    return text


def typed_settings(cls: type, props: Mapping[str, str], *,
                   on_unknown: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The known keys of ``props`` (camelCase or snake_case) as ``{snake_name: typed value}`` for
    the dataclass ``cls`` (inline fields included); unknown keys go to ``on_unknown`` (skipped
    when it is None).

    Raises:
        ValueError: a value does not parse as its field's type; the message names the key.
    """
    known = settings_fields(cls)
    out: dict[str, Any] = {}
    for key, raw in props.items():
        name = snake(key)
        if name not in known:
            if on_unknown is not None:
                on_unknown(key)
            continue
        try:
            out[name] = convert_value(raw, _setting_type(cls, name))
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    return out


def apply_properties(obj: object, props: Mapping[str, str], *,
                     on_unknown: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Set the known keys of ``props`` on the settings dataclass ``obj`` (inline fields
    included): ``rocketmq-namesrv -c``, UPDATE_BROKER_CONFIG, UPDATE_NAMESRV_CONFIG. Returns
    ``{snake_name: value}`` of what was set; nothing is set when a value does not parse.

    Raises:
        ValueError: a value does not parse (see :func:`typed_settings`).
    """
    cls: type = type(obj)  # typed `type`: mypy wrongly finds type[object] not Hashable for @cache
    changed = typed_settings(cls, props, on_unknown=on_unknown)
    paths = settings_fields(cls)
    for name, value in changed.items():
        setattr(_owner_of(obj, paths[name]), name, value)
    return changed


def coerce_settings(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` keyed by field name with text converted to the field types (values of other
    types pass unchanged, enums are looked up)."""
    return {name: convert_value(v, _setting_type(cls, name)) for name, v in values.items()}


def _owner_of(obj: Any, path: Iterable[str]) -> Any:
    for part in path:
        obj = getattr(obj, part)
    return obj


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _field_type(cls: type, name: str) -> Any:
    return _hints(cls)[name]


def _setting_type(cls: type, name: str) -> Any:
    path = settings_fields(cls)[name]
    for part in path:
        cls = _field_type(cls, part)
    return _field_type(cls, name)
