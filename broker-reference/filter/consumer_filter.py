"""Compiled SQL92 subscriptions per topic and consumer group (RocketMQ ``ConsumerFilterManager``
and ``ExpressionMessageFilter``, without the bloom filter of the consume-queue extension).

Heartbeats register each group's non-TAG subscriptions (compiled once per ``subVersion``);
pulls that carry the subscription in their header get a compiled filter from a small cache
keyed by group, topic, ``subVersion`` and expression. The broker then evaluates the expression
for every message it reads from the commit log, over the message properties (``TAGS``,
``KEYS``, user properties), exactly as RocketMQ's ``isMatchedByCommitLog`` does: only a TRUE
result delivers the message.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rocketmq_broker.filter.expression import Expression, compile_expression
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.bodies import SubscriptionData
from rocketmq_sdk.protocol.codes import MessageSysFlag, ResponseCode
from rocketmq_sdk.protocol.message_codec import POS_BORN_HOST, POS_SYS_FLAG, decode_properties

__all__ = ["SQL92", "ConsumerFilterData", "ConsumerFilterManager", "check_subscription", "is_tag_type",
           "record_properties"]

log = logging.getLogger("rocketmq_broker.filter")

SQL92 = "SQL92"
"""The only non-TAG expression type RocketMQ's broker registers (``ExpressionType.SQL92``)."""

_BUILD_CACHE_SIZE = 1024
_I32 = struct.Struct(">i")
_H16 = struct.Struct(">h")


def record_properties(record) -> dict[str, str]:
    """The properties of a stored message record (protocol doc §4.5), without decoding the rest.

    Raises:
        struct.error, IndexError: the record is truncated.
        UnicodeDecodeError: the properties are not UTF-8.
    """
    sys_flag = _I32.unpack_from(record, POS_SYS_FLAG)[0]
    p = POS_BORN_HOST + (20 if sys_flag & MessageSysFlag.BORNHOST_V6 else 8) + 8  # + store timestamp
    p += (20 if sys_flag & MessageSysFlag.STOREHOST_V6 else 8) + 12  # + reconsume times, prepared offset
    p += 4 + _I32.unpack_from(record, p)[0]  # body
    p += 1 + record[p]  # topic
    props_len = _H16.unpack_from(record, p)[0]
    if props_len <= 0:
        return {}
    return decode_properties(bytes(record[p + 2:p + 2 + props_len]).decode("utf-8"))


def is_tag_type(expression_type: str | None) -> bool:
    """RocketMQ ``ExpressionType.isTagType``: None, empty or ``TAG``."""
    return not expression_type or expression_type == "TAG"


@dataclass(frozen=True, slots=True)
class ConsumerFilterData:
    """One group's compiled subscription of one topic.

    Attributes:
        topic / group: what it filters.
        expression / expression_type: the subscription as the client sent it.
        client_version: the client's ``subVersion`` (ms timestamp) it was compiled for.
        compiled: the compiled expression.
    """

    topic: str
    group: str
    expression: str
    expression_type: str
    client_version: int
    compiled: Expression

    def matches_properties(self, properties: Mapping[str, str] | None) -> bool:
        """True when a message with these properties is delivered (None properties: True, as
        RocketMQ does when it cannot judge, e.g. at message arrival without properties)."""
        if properties is None:
            return True
        try:
            return self.compiled.evaluate(properties)
        except Exception:  # noqa: BLE001 - RocketMQ logs and does not deliver
            log.exception("evaluating %r failed for %s", self.expression, self.group)
            return False

    def matches_record(self, record) -> bool:
        """True when the stored message record (commit-log bytes) is delivered."""
        try:
            properties = record_properties(record)
        except (struct.error, IndexError, UnicodeDecodeError):
            log.warning("unreadable stored record while filtering for %s; not delivered", self.group)
            return False
        return self.matches_properties(properties)


def _compile(topic: str, group: str, expression: str | None, expression_type: str,
             client_version: int) -> ConsumerFilterData | None:
    """RocketMQ ``ConsumerFilterManager.build``: None for a TAG type, an empty expression, an
    unknown type or an expression that does not compile (logged)."""
    if is_tag_type(expression_type) or not expression:
        return None
    if expression_type != SQL92:
        log.warning("no filter for expression type %s (group %s, topic %s)", expression_type, group, topic)
        return None
    try:
        compiled = compile_expression(expression)
    except ValueError as exc:
        log.warning("parse error: expr=%s, topic=%s, group=%s, error=%s", expression, topic, group, exc)
        return None
    return ConsumerFilterData(topic, group, expression, expression_type, client_version, compiled)


class ConsumerFilterManager:
    """The broker's compiled non-TAG subscriptions (thread-safe).

    ``register`` follows RocketMQ's version rules: an older or equal ``subVersion`` never
    replaces a newer one; a newer version with the same expression only bumps the version; a
    newer expression that does not compile removes the group's filter (its pulls then get
    ``FILTER_DATA_NOT_EXIST``, "Your expression may be wrong!").
    """

    def __init__(self) -> None:
        self._by_topic: dict[str, dict[str, ConsumerFilterData]] = {}
        self._built: OrderedDict[tuple, ConsumerFilterData | None] = OrderedDict()
        self._lock = threading.Lock()

    def register(self, group: str, subscriptions: Iterable[SubscriptionData]) -> None:
        """Record a heartbeat's subscriptions of ``group`` (TAG ones are ignored); filters of
        topics the group no longer subscribes to are dropped."""
        topics = set()
        for sub in subscriptions:
            topics.add(sub.topic)
            self._register_one(sub.topic, group, sub.sub_string, sub.expression_type, sub.sub_version)
        with self._lock:
            for topic, groups in list(self._by_topic.items()):
                if topic not in topics and groups.pop(group, None) is not None and not groups:
                    del self._by_topic[topic]

    def _register_one(self, topic: str, group: str, expression: str | None, expression_type: str,
                      client_version: int) -> None:
        if is_tag_type(expression_type) or not expression:
            with self._lock:
                groups = self._by_topic.get(topic)
                if groups is not None:
                    groups.pop(group, None)
            return
        with self._lock:
            old = self._by_topic.get(topic, {}).get(group)
        if old is not None:
            if client_version <= old.client_version:
                return
            if old.expression == expression and old.expression_type == expression_type:
                data: ConsumerFilterData | None = ConsumerFilterData(
                    topic, group, expression, expression_type, client_version, old.compiled)
            else:
                data = _compile(topic, group, expression, expression_type, client_version)
        else:
            data = _compile(topic, group, expression, expression_type, client_version)
        with self._lock:
            groups = self._by_topic.setdefault(topic, {})
            if data is None:
                groups.pop(group, None)
            else:
                current = groups.get(group)
                if current is None or current.client_version < data.client_version:
                    groups[group] = data
                    log.info("consumer filter registered: group %s topic %s %s %r (version %d)",
                             group, topic, expression_type, expression, client_version)
            if not groups:
                del self._by_topic[topic]

    def unregister(self, group: str) -> None:
        """Forget every filter of ``group`` (its last client went away)."""
        with self._lock:
            for topic, groups in list(self._by_topic.items()):
                if groups.pop(group, None) is not None and not groups:
                    del self._by_topic[topic]

    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        """The group's registered filter of ``topic``, or None."""
        groups = self._by_topic.get(topic)
        return None if groups is None else groups.get(group)

    def build(self, topic: str, group: str, expression: str | None, expression_type: str,
              client_version: int) -> ConsumerFilterData | None:
        """A filter for a pull that carries its subscription, compiled once per group, topic,
        ``subVersion`` and expression (LRU of 1024 entries); None when the expression is empty
        or does not compile."""
        key = (group, topic, client_version, expression_type, expression)
        with self._lock:
            if key in self._built:
                self._built.move_to_end(key)
                return self._built[key]
        data = _compile(topic, group, expression, expression_type, client_version)
        with self._lock:
            self._built[key] = data
            if len(self._built) > _BUILD_CACHE_SIZE:
                self._built.popitem(last=False)
        return data


def check_subscription(body: bytes | None, enable_property_filter: bool) -> tuple[int, str | None]:
    """The broker's answer to CHECK_CLIENT_CONFIG (46), as Java's ``ClientManageProcessor``.

    Args:
        body: the ``CheckClientRequestBody`` JSON (``clientId``, ``group``, ``subscriptionData``).
        enable_property_filter: the broker's ``enablePropertyFilter``.

    Returns:
        (response code, remark): SUCCESS for no subscription or a TAG one; SYSTEM_ERROR "The
        broker does not support consumer to filter message by <type>" when filtering is off;
        SUBSCRIPTION_PARSE_FAILED with the compiler's message when the expression is bad.
    """
    try:
        data = fastjson.loads(body) if body else None
    except ValueError:
        data = None
    sd = data.get("subscriptionData") if isinstance(data, dict) else None
    if not isinstance(sd, dict) or not sd.get("topic"):
        return ResponseCode.SUCCESS, None
    sub = SubscriptionData.from_dict(sd)
    if is_tag_type(sub.expression_type):
        return ResponseCode.SUCCESS, None
    if not enable_property_filter:
        return ResponseCode.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {sub.expression_type}"
    if sub.expression_type != SQL92:
        return ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"no filter for expression type {sub.expression_type}"
    try:
        compile_expression(sub.sub_string)
    except ValueError as exc:
        log.warning("Client %s@%s filter message, but failed to compile expression! sub=%s, error=%s",
                    data.get("clientId"), data.get("group"), sub.sub_string, exc)
        return ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc)
    return ResponseCode.SUCCESS, None
