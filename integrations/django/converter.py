"""Payload <-> message conversion (rocketmq-spring's ``RocketMQMessageConverter``).

Outgoing: ``bytes`` as is, ``str`` as UTF-8, a Django model instance through the model
serializer (``ROCKETMQ["MODEL_SERIALIZER"]``), a dataclass through ``dataclasses.asdict``, a
pydantic model through ``model_dump(mode="json")``, anything else (dict, list, numbers...) as
JSON with Django's ``DjangoJSONEncoder`` (dates, decimals, UUIDs). Incoming: the listener's
type hint picks the conversion (:meth:`MessageConverter.from_message`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import typing
from collections.abc import Mapping
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from rocketmq_sdk import Message, MessageExt

__all__ = ["ConversionError", "MessageConverter", "model_to_json_dict", "parse_destination"]


class ConversionError(ValueError):
    """A payload could not be converted (to a body, or from a body to the listener's type)."""


@functools.lru_cache(maxsize=1024)
def parse_destination(destination: str) -> tuple[str, str | None]:
    """``"topic"`` or ``"topic:tag"`` (rocketmq-spring's destination form) -> (topic, tag).

    Raises:
        ValueError: an empty topic or tag.
    """
    if not isinstance(destination, str):
        raise ValueError(f"destination must be 'topic' or 'topic:tag', not {type(destination).__name__}")
    topic, sep, tag = destination.partition(":")
    if not topic or (sep and not tag):
        raise ValueError(f"bad destination {destination!r}: expected 'topic' or 'topic:tag'")
    return topic, tag or None


def model_to_json_dict(instance: Any) -> dict[str, Any]:
    """The default model serializer: every concrete field by attribute name (``customer_id``
    for a foreign key), values as the model holds them (the JSON encoder handles dates,
    decimals and UUIDs)."""
    return {f.attname: f.value_from_object(instance) for f in instance._meta.concrete_fields}


def _is_model_instance(payload: Any) -> bool:
    meta = getattr(type(payload), "_meta", None)
    return meta is not None and hasattr(meta, "concrete_fields") and hasattr(payload, "pk")


def supports_payload_type(target: Any) -> bool:
    """Whether the default converter turns a message into ``target`` (a listener's payload
    type hint): ``bytes``, ``str``, ``dict``, ``list``, JSON scalars, ``Any`` / ``object``,
    ``Message`` / ``MessageExt``, a dataclass, a pydantic model, or a typing construct over
    them (``dict[str, int]``, ``X | None``). Any other class, e.g. a Django model, is not
    (the JSON would silently arrive as a ``dict``)."""
    origin = typing.get_origin(target) or target
    if not isinstance(origin, type):
        return True  # Any, unions, literals...: the decoded JSON
    return (origin in (bytes, str, dict, list, int, float, bool, object) or issubclass(origin, Message)
            or dataclasses.is_dataclass(origin) or _is_pydantic_class(origin))


def _is_pydantic_class(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_validate_json") and hasattr(tp, "model_dump")


_ENCODER = DjangoJSONEncoder(separators=(",", ":"))


class MessageConverter:
    """Turns payloads into :class:`~rocketmq_sdk.Message` objects and bodies back into the types
    listeners ask for. Subclass it and name the subclass in ``ROCKETMQ["MESSAGE_CONVERTER"]`` to
    change the wire format.

    Args:
        model_serializer: ``instance -> JSON-able value`` for Django model instances (default
            :func:`model_to_json_dict`).
    """

    def __init__(self, model_serializer: typing.Callable[[Any], Any] | None = None) -> None:
        self.model_serializer = model_serializer or model_to_json_dict

    # ------------------------------------------------------------------ outgoing

    def to_body(self, payload: Any) -> bytes:
        """The message body of ``payload`` (see the module docstring).

        Raises:
            ConversionError: the payload cannot be serialized.
        """
        kind = type(payload)
        if kind is not dict and kind is not list:
            if isinstance(payload, bytes | bytearray | memoryview):
                return bytes(payload)
            if isinstance(payload, str):
                return payload.encode("utf-8")
            payload = self._jsonable(payload)
        try:
            return _ENCODER.encode(payload).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise ConversionError(f"cannot convert {type(payload).__name__} to a message body: {exc}") from exc

    def _jsonable(self, payload: Any) -> Any:
        """Model instances, dataclasses and pydantic models as JSON-able values; others as they are."""
        if _is_model_instance(payload):
            return self.model_serializer(payload)
        if dataclasses.is_dataclass(payload) and not isinstance(payload, type):
            return dataclasses.asdict(payload)
        if _is_pydantic_class(type(payload)):
            return payload.model_dump(mode="json")
        return payload

    def to_message(self, destination: str, payload: Any, *, keys: str | list[str] | None = None,
                   headers: Mapping[str, Any] | None = None, delay_level: int = 0,
                   deliver_time_ms: int | None = None, delay_ms: int | None = None) -> Message:
        """A :class:`Message` for ``destination`` (``"topic"`` / ``"topic:tag"``), with a delay
        level or a timer (``deliver_time_ms`` epoch ms / ``delay_ms``, RocketMQ 5.x) when given.

        ``headers``: ``"KEYS"`` (str or list) and ``"TAGS"`` (overrides the destination's tag)
        as rocketmq-spring's ``RocketMQHeaders``; every other entry becomes a user property
        (value ``str()``-ed). A :class:`Message` payload is sent as it is (destination ignored).

        Raises:
            ValueError: a bad destination; ConversionError: an unconvertible payload.
            rocketmq_sdk.IllegalArgumentError: a reserved property name; a timer more than 3 days
                ahead, negative, or together with a delay level.
        """
        if isinstance(payload, Message):
            return payload
        topic, tag = parse_destination(destination)
        props: dict[str, str] = {}
        for name, value in (headers or {}).items():
            upper = name.upper()
            if upper == "KEYS":
                keys = value
            elif upper == "TAGS":
                tag = str(value)
            else:
                props[name] = str(value)
        return Message(topic, self.to_body(payload), tags=tag, keys=keys, properties=props,
                       delay_time_level=delay_level, deliver_time_ms=deliver_time_ms, delay_ms=delay_ms)

    # ------------------------------------------------------------------ incoming

    @staticmethod
    def supports(target: Any) -> bool:
        """Whether :meth:`from_message` can produce ``target`` (see :func:`supports_payload_type`)."""
        return supports_payload_type(target)

    def from_message(self, msg: MessageExt, target: Any) -> Any:
        """Convert a received message to ``target`` (a type hint).

        ``MessageExt``/``Message``: the message itself; ``bytes``: the body; ``str``: the body
        decoded as UTF-8; a dataclass: ``target(**json)``; a pydantic model:
        ``target.model_validate_json(body)``; ``dict``, ``list``, ``Any`` or no hint: the
        JSON-decoded body.

        Raises:
            ConversionError: the body does not decode or does not fit ``target``.
        """
        origin = typing.get_origin(target) or target
        if isinstance(origin, type) and issubclass(origin, Message):
            return msg
        try:
            if origin is bytes:
                return msg.body
            if origin is str:
                return msg.body.decode("utf-8")
            if _is_pydantic_class(origin):
                return origin.model_validate_json(msg.body)
            value = json.loads(msg.body)
            if dataclasses.is_dataclass(origin):
                if not isinstance(value, dict):
                    raise ConversionError(f"{origin.__name__} needs a JSON object, got {type(value).__name__}")
                return origin(**value)
            if origin in (dict, list) and not isinstance(value, origin):
                raise ConversionError(f"expected a JSON {origin.__name__}, got {type(value).__name__}")
            return value
        except ConversionError:
            raise
        except Exception as exc:  # decode errors, pydantic ValidationError, bad dataclass fields
            name = getattr(origin, "__name__", str(origin))
            raise ConversionError(f"cannot convert message {msg.msg_id} to {name}: {exc}") from exc
