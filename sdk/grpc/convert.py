"""One codec between RocketMQ's message properties (what the remoting protocol and the store
carry) and the ``apache.rocketmq.v2.Message`` of the 5.x gRPC API, used by the SDK's gRPC client
and by the reference broker's gRPC proxy in both directions.

Mapping (as Apache RocketMQ's proxy converts): ``tag`` ↔ ``TAGS``, ``keys`` ↔ ``KEYS``
(space-separated), ``message_id`` ↔ ``UNIQ_KEY``, ``message_group`` ↔ ``__SHARDINGKEY``,
``message_type`` TRANSACTION ↔ ``TRAN_MSG=true``, ``delivery_timestamp`` ↔ a ``DELAY`` level (the
4.x store knows delay levels only: the smallest level that is not earlier than the requested time,
capped at the largest), ``orphaned_transaction_recovery_duration`` ↔
``CHECK_IMMUNITY_TIME_IN_SECONDS``, ``trace_context`` ↔ ``TRACE_CONTEXT``; every other property
is a user property.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Mapping
from typing import Any

from ..protocol.codes import MessageConst as MC
from ..protocol.delay_levels import DELAY_LEVELS_MS, delay_level_for
from ..protocol.message import MessageExt
from . import v2

#: ``MessageConst.PROPERTY_SHARDING_KEY``: where a 5.x message group lives among the properties
SHARDING_KEY = "__SHARDINGKEY"
#: the property holding a received message's receipt handle (as over remoting POP)
POP_CK = "POP_CK"
#: ``MessageConst.PROPERTY_TRACE_CONTEXT``
TRACE_CONTEXT = "TRACE_CONTEXT"
#: properties the 5.x message carries in its system properties (never as user properties)
SYSTEM_KEYS = frozenset({MC.TAGS, MC.KEYS, MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, SHARDING_KEY, MC.TRANSACTION_PREPARED,
                         MC.DELAY_TIME_LEVEL, MC.CHECK_IMMUNITY_TIME_IN_SECONDS, TRACE_CONTEXT,
                         MC.PRODUCER_GROUP, MC.WAIT_STORE_MSG_OK, MC.RECONSUME_TIME, MC.MAX_RECONSUME_TIMES,
                         MC.REAL_TOPIC, MC.REAL_QUEUE_ID, MC.CLUSTER, MC.MSG_REGION, MC.TRACE_SWITCH,
                         MC.TRANSACTION_CHECK_TIMES, MC.TRANSACTION_PREPARED_QUEUE_OFFSET,
                         *MC.TIMER_PROPERTIES})


#: the properties of a message with no tags, keys or user properties (its id and WAIT)
_ID_AND_WAIT = frozenset({MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MC.WAIT_STORE_MSG_OK})


def message_type_of(props: Mapping[str, str]) -> v2.MessageType:
    """The 5.x ``MessageType`` of a message with these properties."""
    if props.get(MC.TRANSACTION_PREPARED, "").lower() == "true":
        return v2.TRANSACTION
    if props.get(SHARDING_KEY):
        return v2.FIFO
    if int(props.get(MC.DELAY_TIME_LEVEL, "0") or 0) > 0:
        return v2.DELAY
    return v2.NORMAL


def to_v2(topic: str, body: bytes, props: Mapping[str, str], *, namespace: str = "",
          delay_levels_ms: tuple[int, ...] = DELAY_LEVELS_MS, now_ms: int | None = None) -> Any:
    """A ``v2.Message`` for a message of ``topic`` with RocketMQ properties ``props``
    (:func:`v2_base` + :func:`fill_v2`).

    A ``DELAY`` level becomes ``delivery_timestamp`` = now + that level's delay. Born time and
    host are the caller's to set (``system_properties.born_timestamp``/``born_host``).
    """
    m = v2_base(topic, namespace)
    fill_v2(m, body, props, delay_levels_ms=delay_levels_ms, now_ms=now_ms)
    return m


def v2_base(topic: str, namespace: str = "") -> Any:
    """The part of a ``v2.Message`` of ``topic`` that is the same for all its messages (topic,
    namespace, IDENTITY body encoding, CRC32 digest type, message type NORMAL): a template a sender copies
    (``CopyFrom``) before :func:`fill_v2`."""
    m = v2.Message()
    m.topic.name = topic
    if namespace:
        m.topic.resource_namespace = namespace
    sp = m.system_properties
    sp.body_encoding = v2.IDENTITY
    sp.body_digest.type = v2.CRC32
    sp.message_type = v2.NORMAL
    return m


def fill_v2(m: Any, body: bytes, props: Mapping[str, str], *, delay_levels_ms: tuple[int, ...] = DELAY_LEVELS_MS,
            now_ms: int | None = None) -> None:
    """Set the body, its digest and what ``props`` (RocketMQ properties) say in ``m``, a
    :func:`v2_base` of the message's topic (see :func:`to_v2`)."""
    m.body = body
    sp = m.system_properties
    if props.keys() <= _ID_AND_WAIT:  # the usual message: nothing else to map
        sp.message_id = props.get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
        sp.body_digest.checksum = crc32_hex(body)
        return
    user = m.user_properties
    for key, value in props.items():
        if key not in SYSTEM_KEYS:
            user[key] = value
    get = props.get
    tags = get(MC.TAGS)
    if tags:
        sp.tag = tags
    keys = get(MC.KEYS)
    if keys:
        sp.keys.extend(k for k in keys.split(MC.KEY_SEPARATOR) if k)
    sp.message_id = get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
    group = get(SHARDING_KEY)
    if group:
        sp.message_group = group
    trace = get(TRACE_CONTEXT)
    if trace:
        sp.trace_context = trace
    kind = message_type_of(props)
    if kind != v2.NORMAL:
        sp.message_type = kind
    level = int(get(MC.DELAY_TIME_LEVEL, "0") or 0)
    if level > 0 and delay_levels_ms:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        at = now + delay_levels_ms[min(level, len(delay_levels_ms)) - 1]
        sp.delivery_timestamp.seconds, sp.delivery_timestamp.nanos = divmod(at, 1000)[0], at % 1000 * 1_000_000
    immunity = get(MC.CHECK_IMMUNITY_TIME_IN_SECONDS)
    if immunity and immunity.lstrip("-").isdigit():
        sp.orphaned_transaction_recovery_duration.seconds = int(immunity)
    sp.body_digest.checksum = crc32_hex(body)


def crc32_hex(body: bytes) -> str:
    """The CRC32 body digest of the 5.x API: 8 upper-case hex digits."""
    return f"{zlib.crc32(body) & 0xFFFFFFFF:08X}"


def timestamp_ms(ts: Any) -> int:
    """A ``google.protobuf.Timestamp`` in ms since the epoch."""
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def set_timestamp_ms(ts: Any, ms: int) -> None:
    """Set a ``google.protobuf.Timestamp`` to ``ms`` since the epoch."""
    ts.seconds, rest = divmod(ms, 1000)
    ts.nanos = rest * 1_000_000


def from_v2(m: Any, *, delay_levels_ms: tuple[int, ...] = DELAY_LEVELS_MS, now_ms: int | None = None,
            timers: bool = False) -> dict[str, str]:
    """The RocketMQ properties of a ``v2.Message`` (no checks: see the proxy's request checks).

    ``delivery_timestamp`` becomes ``TIMER_DELIVER_MS`` with ``timers`` (a 5.x broker's timer
    wheel), else a ``DELAY`` level (:func:`delay_level_for`); the message id becomes
    ``UNIQ_KEY``; ``TRAN_MSG=true`` is set for a TRANSACTION message.
    """
    props: dict[str, str] = dict(m.user_properties)
    sp = m.system_properties
    if sp.HasField("tag") and sp.tag:
        props[MC.TAGS] = sp.tag
    if sp.keys:
        props[MC.KEYS] = MC.KEY_SEPARATOR.join(sp.keys)
    if sp.message_id:
        props[MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sp.message_id
    if sp.HasField("message_group") and sp.message_group:
        props[SHARDING_KEY] = sp.message_group
    if sp.HasField("trace_context") and sp.trace_context:
        props[TRACE_CONTEXT] = sp.trace_context
    if sp.message_type == v2.TRANSACTION:
        props[MC.TRANSACTION_PREPARED] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            props[MC.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(sp.orphaned_transaction_recovery_duration.seconds)
    if sp.HasField("delivery_timestamp"):
        now = int(time.time() * 1000) if now_ms is None else now_ms
        at = timestamp_ms(sp.delivery_timestamp)
        if timers:
            if at > now:
                props[MC.TIMER_DELIVER_MS] = str(at)
        else:
            level = delay_level_for(at - now, delay_levels_ms)
            if level > 0:
                props[MC.DELAY_TIME_LEVEL] = str(level)
    return props


def message_ext(m: Any) -> MessageExt:
    """A ``MessageExt`` of a ``v2.Message`` the proxy delivered (receipt handle in
    ``receipt_handle``, the delivery attempt as ``reconsume_times`` + 1)."""
    sp = m.system_properties
    props = from_v2(m)
    if sp.HasField("receipt_handle"):
        props[POP_CK] = sp.receipt_handle
    return MessageExt(topic=m.topic.name, body=m.body, properties=props, queue_id=sp.queue_id,
                      queue_offset=sp.queue_offset, born_timestamp=timestamp_ms(sp.born_timestamp),
                      born_host=sp.born_host, store_timestamp=timestamp_ms(sp.store_timestamp),
                      store_host=sp.store_host, reconsume_times=max(0, sp.delivery_attempt - 1))
