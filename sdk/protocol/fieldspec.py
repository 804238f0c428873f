"""The wire spec of a declarative dataclass: what typed headers (:mod:`.headers`) and JSON bodies
(:mod:`.beans`) derive from their fields once per class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from ..properties import camel

V = TypeVar("V")


def type_name(f: dataclasses.Field[Any]) -> str:
    """The annotation of ``f`` as text (``"int | None"``; the modules use postponed annotations)."""
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))


def field_spec(cls: Any, key_metadata: str, convert: Callable[[dataclasses.Field[Any]], V], *,
               by_key: bool = False) -> tuple[tuple[str, str, V], ...]:
    """``(attribute, wire key, convert(field))`` for each dataclass field of ``cls``, in field
    order or sorted by key (``by_key``); the wire key is ``field.metadata[key_metadata]`` when
    given, else the camelCase attribute name (``queue_id`` → ``queueId``)."""
    spec = [(f.name, f.metadata[key_metadata] if key_metadata in f.metadata else camel(f.name), convert(f))
            for f in dataclasses.fields(cls)]
    if by_key:
        spec.sort(key=lambda item: item[1])
    return tuple(spec)
