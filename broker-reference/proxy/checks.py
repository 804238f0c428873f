"""The proxy's checks of what a 5.x request names and carries, before anything is sent to a
broker: the request guard's name rules (``rocketmq_sdk.protocol.validators``) and the 5.x
limits, each refused with its 5.x status code (``ProxyError``)."""

from __future__ import annotations

import re
import zlib
from typing import Any

from rocketmq_sdk.grpc import v2
from rocketmq_sdk.grpc.convert import SYSTEM_KEYS, timestamp_ms
from rocketmq_sdk.producer.namespace import wrap_namespace
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.validators import group_problem, topic_problem

from .status import ProxyError

#: Apache proxy limits: message group and key/tag lengths, properties size, delay horizon
MAX_MESSAGE_GROUP = 64
MAX_NAME_FIELD = 1024
MAX_PROPERTIES_BYTES = 16 * 1024
MAX_DELAY_MS = 40 * 86_400_000
_RESERVED = MC.RESERVED | SYSTEM_KEYS
#: a control separator RocketMQ's property encoding uses (one regex scan instead of three)
_SEPARATOR = re.compile("[\x00-\x02]")
#: legal topic names remembered by :func:`topic_name`: (namespace, name) -> broker-side name
_NAMES_CACHED = 4096
_legal_topics: dict[tuple[str, str], str] = {}


def topic_name(resource: Any) -> str:
    """The broker-side name of a topic ``v2.Resource`` (``namespace%name`` with a namespace).
    Legal names are remembered (at most :data:`_NAMES_CACHED`): a topic's every request asks.

    Raises:
        ProxyError: ILLEGAL_TOPIC.
    """
    key = (resource.resource_namespace, resource.name)
    name = _legal_topics.get(key)
    if name is not None:
        return name
    name = wrap_namespace(key[0] or None, key[1])
    problem = topic_problem(name)
    if problem is not None:
        raise ProxyError(v2.ILLEGAL_TOPIC, problem)
    if len(_legal_topics) >= _NAMES_CACHED:
        _legal_topics.clear()
    _legal_topics[key] = name
    return name


def group_name(resource: Any) -> str:
    """The broker-side name of a consumer group ``v2.Resource``.

    Raises:
        ProxyError: ILLEGAL_CONSUMER_GROUP.
    """
    name = wrap_namespace(resource.resource_namespace or None, resource.name)
    problem = group_problem(name)
    if problem is not None:
        raise ProxyError(v2.ILLEGAL_CONSUMER_GROUP, problem)
    return name


def _text(value: str, code: int, what: str, max_len: int = MAX_NAME_FIELD) -> None:
    if len(value) > max_len or not value.strip() or _SEPARATOR.search(value) is not None:
        raise ProxyError(code, f"illegal {what} {value[:100]!r}: blank, longer than {max_len} or with a "
                               "control separator")


def check_message(m: Any, max_body: int, now_ms: int) -> bytes:
    """Check one message of a SendMessage request; its body (gunzipped when GZIP-encoded).

    Raises:
        ProxyError: ILLEGAL_MESSAGE_ID, ILLEGAL_MESSAGE_TAG, ILLEGAL_MESSAGE_KEY,
            ILLEGAL_MESSAGE_GROUP, ILLEGAL_MESSAGE_PROPERTY_KEY, MESSAGE_PROPERTIES_TOO_LARGE,
            MESSAGE_BODY_EMPTY, MESSAGE_BODY_TOO_LARGE, ILLEGAL_DELIVERY_TIME,
            MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, MESSAGE_CORRUPTED, NOT_IMPLEMENTED.
    """
    sp = m.system_properties
    if not sp.message_id:
        raise ProxyError(v2.ILLEGAL_MESSAGE_ID, "message id is empty")
    _text(sp.message_id, v2.ILLEGAL_MESSAGE_ID, "message id", 128)
    if sp.HasField("tag"):
        _text(sp.tag, v2.ILLEGAL_MESSAGE_TAG, "tag")
        if "|" in sp.tag:
            raise ProxyError(v2.ILLEGAL_MESSAGE_TAG, f"tag {sp.tag[:100]!r} contains '|'")
    for key in sp.keys:
        _text(key, v2.ILLEGAL_MESSAGE_KEY, "key")
        if " " in key:
            raise ProxyError(v2.ILLEGAL_MESSAGE_KEY, f"key {key[:100]!r} contains a space (the key separator)")
    size = 0
    for k, v in m.user_properties.items():
        _text(k, v2.ILLEGAL_MESSAGE_PROPERTY_KEY, "property name")
        if k in _RESERVED:
            raise ProxyError(v2.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property name {k!r} is reserved by RocketMQ")
        if _SEPARATOR.search(v) is not None:
            raise ProxyError(v2.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property {k!r} has a control separator in its value")
        size += len(k.encode()) + len(v.encode()) + 2
    if size > MAX_PROPERTIES_BYTES:
        raise ProxyError(v2.MESSAGE_PROPERTIES_TOO_LARGE,
                         f"user properties take {size} bytes, more than {MAX_PROPERTIES_BYTES}")
    kind = sp.message_type
    has_group = sp.HasField("message_group")
    if has_group:
        _text(sp.message_group, v2.ILLEGAL_MESSAGE_GROUP, "message group", MAX_MESSAGE_GROUP)
    has_delivery = sp.HasField("delivery_timestamp")
    if has_delivery:
        delay = timestamp_ms(sp.delivery_timestamp) - now_ms
        if delay > MAX_DELAY_MS:
            raise ProxyError(v2.ILLEGAL_DELIVERY_TIME, f"delivery time is {delay} ms ahead, more than {MAX_DELAY_MS}")
    if (has_group and kind != v2.FIFO) or (kind == v2.FIFO and not has_group) or (has_delivery and kind != v2.DELAY):
        raise ProxyError(v2.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                         f"message type {v2.MessageType.Name(kind)} conflicts with its properties "
                         f"(message group {'set' if has_group else 'unset'}, delivery time "
                         f"{'set' if has_delivery else 'unset'})")
    if kind not in (v2.MESSAGE_TYPE_UNSPECIFIED, v2.NORMAL, v2.FIFO, v2.DELAY, v2.TRANSACTION):
        raise ProxyError(v2.NOT_IMPLEMENTED, f"message type {kind} is not supported by this broker")
    body = m.body
    if sp.body_encoding == v2.GZIP:
        d = zlib.decompressobj(wbits=31)
        try:
            body = d.decompress(body, max_body + 1)
        except zlib.error as exc:
            raise ProxyError(v2.MESSAGE_CORRUPTED, f"GZIP body does not inflate: {exc}") from None
    if not body:
        raise ProxyError(v2.MESSAGE_BODY_EMPTY, "message body is empty")
    if len(body) > max_body:
        raise ProxyError(v2.MESSAGE_BODY_TOO_LARGE, f"message body is larger than {max_body} bytes")
    return body
