"""Compiled SQL92 subscriptions per topic and consumer group (RocketMQ ``ConsumerFilterManager``
and ``ExpressionMessageFilter``, without the bloom filter of the consume-queue extension).

Heartbeats register each group's non-TAG subscriptions (compiled once per ``subVersion``);
pulls that carry the subscription in their header get a compiled filter from a small cache
keyed by group, topic, ``subVersion`` and expression. The broker then evaluates the expression
for every message it reads from the commit log, over the message properties (``TAGS``,
``KEYS``, user properties), exactly as RocketMQ's ``isMatchedByCommitLog`` does: only a TRUE
result delivers the message.

As Java's manager, the registered filters are kept in ``config/consumerFilter.json`` (written
atomically, loaded at start; every filter loaded is marked dead, as Java "thinks all consumers
are dead when load", and a heartbeat with the same ``subVersion`` revives it); a group that
leaves or stops subscribing a topic only marks its filter dead, and dead filters are dropped
after ``filterDataCleanTimeSpan`` (24 h) when the file is written. Each entry carries the
``bloomFilterData`` of Java's default bloom filter (:mod:`.bloom`), so a 4.9.8 broker loads the
file too; this broker ignores that part when reading (it builds no consume-queue bit maps).
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from rocketmq_broker.broker.config_file import pretty, read_json, write_atomically
from rocketmq_broker.filter.bloom import BloomFilter
from rocketmq_broker.filter.expression import Expression, compile_expression
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.bodies import SubscriptionData
from rocketmq_sdk.protocol.codes import RETRY_GROUP_TOPIC_PREFIX, MessageSysFlag, ResponseCode
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.message_codec import POS_BORN_HOST, POS_SYS_FLAG, decode_properties

__all__ = ["SQL92", "ConsumerFilterData", "ConsumerFilterManager", "RetryMessageFilter", "check_subscription",
           "is_tag_type", "record_properties"]

log = logging.getLogger("rocketmq_broker.filter")

SQL92 = "SQL92"
"""The only non-TAG expression type RocketMQ's broker registers (``ExpressionType.SQL92``)."""

_BUILD_CACHE_SIZE = 1024
MS_24_HOUR = 24 * 3600 * 1000
_BLOOM = BloomFilter()  # Java's default: maxErrorRateOfBloomFilter 20, expectConsumerNumUseFilter 32
"""Default ``filterDataCleanTimeSpan``: how long a dead filter is kept (ms)."""
_I32 = struct.Struct(">i")
_H16 = struct.Struct(">h")


def record_properties(record) -> dict[str, str]:
    """The properties of a stored message record (docs/protocol.md §4.5), without decoding the rest.

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
        compiled: the compiled expression (None: a persisted expression that no longer
            compiles; every message passes then, as Java's "no expression").
        born_time: when it was compiled (ms since the epoch).
        dead_time: when its group left or stopped subscribing the topic (ms; 0: alive).
    """

    topic: str
    group: str
    expression: str
    expression_type: str
    client_version: int
    compiled: Expression | None
    born_time: int = 0
    dead_time: int = 0

    @property
    def dead(self) -> bool:
        """Java ``isDead``: ``deadTime >= bornTime``."""
        return self.dead_time >= self.born_time

    def to_dict(self) -> dict[str, Any]:
        """The entry of ``consumerFilter.json`` (Java's fields; ``bloomFilterData`` of ``group#topic``)."""
        return {"bloomFilterData": _BLOOM.generate(f"{self.group}#{self.topic}"),
                "bornTime": self.born_time, "clientVersion": self.client_version, "consumerGroup": self.group,
                "dead": self.dead, "deadTime": self.dead_time, "expression": self.expression,
                "expressionType": self.expression_type, "topic": self.topic}

    def matches_properties(self, properties: Mapping[str, str] | None) -> bool:
        """True when a message with these properties is delivered (None properties: True, as
        RocketMQ does when it cannot judge, e.g. at message arrival without properties)."""
        if properties is None or self.compiled is None:
            return True
        try:
            return self.compiled.evaluate(properties)
        except Exception:  # noqa: BLE001 - RocketMQ logs and does not deliver
            log.exception("evaluating %r failed for %s", self.expression, self.group)
            return False

    def matches_record(self, record) -> bool:
        """True when the stored message record (commit-log bytes) is delivered."""
        return _matches_record(self, record, "for")


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
    return ConsumerFilterData(topic, group, expression, expression_type, client_version, compiled, _now_ms())


def _matches_record(judge: ConsumerFilterData | RetryMessageFilter, record, what: str) -> bool:
    """``judge.matches_properties`` of a stored record's properties; False (logged as "filtering
    ``what`` <group>") for a record whose properties cannot be read."""
    try:
        properties = record_properties(record)
    except (struct.error, IndexError, UnicodeDecodeError):
        log.warning("unreadable stored record while filtering %s %s; not delivered", what, judge.group)
        return False
    return judge.matches_properties(properties)


def _now_ms() -> int:
    return int(time.time() * 1000)


class RetryMessageFilter:
    """Java ``ExpressionForRetryMessageFilter`` for a pull of ``%RETRY%<group>`` when the broker's
    ``filterSupportRetry`` is set: each retry message is judged by the group's registered filter
    of its original topic (``RETRY_TOPIC`` property); a message whose topic has no filter (or
    without ``RETRY_TOPIC``) is delivered."""

    __slots__ = ("group", "manager")

    def __init__(self, manager: ConsumerFilterManager, group: str) -> None:
        self.manager = manager
        self.group = group

    def matches_properties(self, properties: Mapping[str, str] | None) -> bool:
        if properties is None:
            return True
        real_topic = properties.get(MC.RETRY_TOPIC)
        data = self.manager.get(real_topic, self.group) if real_topic else None
        return True if data is None else data.matches_properties(properties)

    def matches_record(self, record) -> bool:
        """True when the stored retry message record (commit-log bytes) is delivered."""
        return _matches_record(self, record, "retries of")


class ConsumerFilterManager:
    """The broker's compiled non-TAG subscriptions (thread-safe).

    ``register`` follows RocketMQ's version rules: an older ``subVersion`` never replaces a
    newer one (an equal one only revives a dead filter); a newer version with the same
    expression only bumps the version; a newer expression that does not compile removes the
    group's filter (its pulls then get ``FILTER_DATA_NOT_EXIST``, "Your expression may be
    wrong!"). A TAG subscription leaves an existing filter of the topic as it is (Java).

    Args:
        path: the ``consumerFilter.json`` to load and persist (None: memory only).
        clean_time_span_ms: dead filters older than this are dropped when persisting
            (``filterDataCleanTimeSpan``, 24 h).
    """

    def __init__(self, path: str | None = None, clean_time_span_ms: int = MS_24_HOUR) -> None:
        self.path = path
        self.clean_time_span_ms = clean_time_span_ms
        self._by_topic: dict[str, dict[str, ConsumerFilterData]] = {}
        self._built: OrderedDict[tuple, ConsumerFilterData | None] = OrderedDict()
        self._lock = threading.Lock()
        self._persisted: str | None = None

    def register(self, group: str, subscriptions: Iterable[SubscriptionData]) -> None:
        """Record a heartbeat's subscriptions of ``group`` (TAG ones are ignored); filters of
        topics the group no longer subscribes to are marked dead."""
        subs = list(subscriptions)
        for sub in subs:
            self._register_one(sub.topic, group, sub.sub_string, sub.expression_type, sub.sub_version)
        topics = {sub.topic for sub in subs}
        now = _now_ms()
        with self._lock:
            for topic, groups in self._by_topic.items():
                data = groups.get(group)
                if data is not None and topic not in topics and not data.dead:
                    groups[group] = replace(data, dead_time=now)
                    log.info("Consumer filter changed: %s, make illegal topic dead: %s", group, topic)

    def _register_one(self, topic: str, group: str, expression: str | None, expression_type: str,
                      client_version: int) -> None:
        if is_tag_type(expression_type) or not expression:
            return
        with self._lock:
            old = self._by_topic.get(topic, {}).get(group)
        if old is not None and client_version <= old.client_version:
            if client_version == old.client_version and old.dead:
                self._put(old, replace(old, dead_time=0))
                log.info("Re alive consumer filter: group %s topic %s", group, topic)
            return
        if old is not None and old.expression == expression and old.expression_type == expression_type:
            data: ConsumerFilterData | None = replace(old, client_version=client_version, dead_time=0)
        else:
            data = _compile(topic, group, expression, expression_type, client_version)
        self._put(old, data, topic, group)
        if data is not None and (old is None or old.expression != expression):
            log.info("consumer filter registered: group %s topic %s %s %r (version %d)",
                     group, topic, expression_type, expression, client_version)

    def _put(self, old: ConsumerFilterData | None, data: ConsumerFilterData | None, topic: str = "",
             group: str = "") -> None:
        """Replace ``old`` by ``data`` (None: remove) unless a newer version came meanwhile."""
        topic, group = (old.topic, old.group) if old is not None else (topic, group)
        with self._lock:
            groups = self._by_topic.setdefault(topic, {})
            current = groups.get(group)
            if current is not old and current is not None and (
                    data is None or current.client_version >= data.client_version):
                return
            if data is None:
                groups.pop(group, None)
            else:
                groups[group] = data
            if not groups:
                del self._by_topic[topic]

    def unregister(self, group: str) -> None:
        """Mark every filter of ``group`` dead (its last client went away); Java keeps them for
        ``filterDataCleanTimeSpan``."""
        now = _now_ms()
        with self._lock:
            for groups in self._by_topic.values():
                data = groups.get(group)
                if data is not None and not data.dead:
                    groups[group] = replace(data, dead_time=now)
                    log.info("Unregister consumer filter: group %s topic %s", group, data.topic)

    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        """The group's registered filter of ``topic`` (dead or alive, as Java), or None."""
        groups = self._by_topic.get(topic)
        return None if groups is None else groups.get(group)

    def retry_filter(self, retry_topic: str) -> RetryMessageFilter:
        """The filter of a ``%RETRY%<group>`` pull with ``filterSupportRetry``."""
        return RetryMessageFilter(self, retry_topic[len(RETRY_GROUP_TOPIC_PREFIX):])

    # -- consumerFilter.json ----------------------------------------------------------------------
    def clean(self) -> None:
        """Drop the filters dead for ``clean_time_span_ms`` or more, and topics left empty."""
        now = _now_ms()
        with self._lock:
            for topic, groups in list(self._by_topic.items()):
                for group, data in list(groups.items()):
                    if data.dead and now - data.dead_time >= self.clean_time_span_ms:
                        log.info("Remove filter consumer %s of %s, died too long!", group, topic)
                        del groups[group]
                if not groups:
                    del self._by_topic[topic]

    def to_dict(self) -> dict[str, Any]:
        """The ``consumerFilter.json`` document (Java ``ConsumerFilterManager.encode``, cleaned first)."""
        self.clean()
        with self._lock:
            return {"filterDataByTopic": {
                topic: {"groupFilterData": {g: d.to_dict() for g, d in groups.items()}, "topic": topic}
                for topic, groups in self._by_topic.items()}}

    def persist(self) -> None:
        """Write ``consumerFilter.json`` atomically (no-op without a path or when nothing changed
        since the last write).

        Raises:
            OSError: the file cannot be written.
        """
        if self.path is None:
            return
        text = pretty(self.to_dict())
        if text != self._persisted:  # unchanged since the last write: no fsync
            write_atomically(self.path, text)
            self._persisted = text

    def load(self) -> None:
        """Read ``consumerFilter.json`` (or its ``.bak``) if present: each filter is compiled
        again and, if alive in the file, marked dead 30 s ago (not before its birth), as Java."""
        doc = read_json(self.path) if self.path is not None else None
        by_topic = doc.get("filterDataByTopic") if isinstance(doc, dict) else None
        if not isinstance(by_topic, dict):
            return
        dead_time = _now_ms() - 30_000
        loaded: dict[str, dict[str, ConsumerFilterData]] = {}
        for topic, entry in by_topic.items():
            groups = entry.get("groupFilterData") if isinstance(entry, dict) else None
            for group, d in (groups or {}).items():
                if not isinstance(d, dict):
                    continue
                try:
                    data = self._decode(topic, group, d, dead_time)
                except (TypeError, ValueError) as exc:
                    log.error("load filter data error, group %s topic %s: %s", group, topic, exc)
                    continue
                loaded.setdefault(topic, {})[group] = data
                log.info("load exist consumer filter data: group %s topic %s %r", group, topic, data.expression)
        with self._lock:
            self._by_topic = loaded

    @staticmethod
    def _decode(topic: str, group: str, d: dict[str, Any], dead_time: int) -> ConsumerFilterData:
        expression, etype = str(d.get("expression") or ""), str(d.get("expressionType") or SQL92)
        compiled = None
        try:
            compiled = compile_expression(expression)
        except ValueError as exc:
            log.error("load filter data error, expression %r of group %s topic %s: %s", expression, group, topic, exc)
        born = int(d.get("bornTime") or 0)
        dead = int(d.get("deadTime") or 0) or max(dead_time, born)
        return ConsumerFilterData(str(d.get("topic") or topic), str(d.get("consumerGroup") or group), expression,
                                  etype, int(d.get("clientVersion") or 0), compiled, born, dead)

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
