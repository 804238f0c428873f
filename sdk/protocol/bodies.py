"""JSON bodies of remoting commands (docs/protocol.md §3.6), as small data classes.

``to_json()`` writes the Java client's form (fastjson: alphabetical keys, enums by name);
``from_json()`` accepts the Java form and the C++ client's (enum ordinals, ``subVersion`` as a
string, empty ``tagsSet``/``codeSet`` omitted, ``codeSet`` holding ``atoi(tag)`` — so codes are
recomputed from the tags).
"""

from __future__ import annotations

import enum
import json
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import fastjson
from .beans import INT, MQ, MQ_KEY, PLAIN, JsonBean, bean, enum_codec, json_field, list_of, map_of, parse_body
from .javahash import java_string_hash
from .message import MessageQueue


class _NamedEnum(enum.Enum):
    """Enum written by name (Java form), read from a name or an ordinal (C++ form)."""

    @property
    def ordinal(self) -> int:
        return list(type(self)).index(self)

    @classmethod
    def parse(cls, v: Any):
        if isinstance(v, int) or (isinstance(v, str) and v.isdigit()):
            return list(cls)[int(v)]
        return cls[v]


class ConsumeType(_NamedEnum):
    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"


class MessageModel(_NamedEnum):
    """Java ``MessageModel``: CLUSTERING (the group shares the queues; offsets on the broker) or
    BROADCASTING (every instance gets every message; offsets in a local file)."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(_NamedEnum):
    """Java ``ConsumeFromWhere``: where a group with no stored offset starts a queue (LAST_OFFSET:
    new messages only; FIRST_OFFSET: from the oldest kept; TIMESTAMP: ``consume_timestamp``)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


def _dumps(d: Any) -> bytes:
    # Bean dicts below are built with their keys in fastjson's (alphabetical) order; maps keep
    # their own order, so a body read from Java is written back byte for byte.
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


SUB_ALL = "*"


_D = TypeVar("_D", bound="_DictJson")


class _DictJson:
    """``to_json``/``from_json`` for the hand-written classes that have ``to_dict``/``from_dict``."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError  # every subclass writes its own

    @classmethod
    def from_dict(cls, d: Any) -> Any:
        raise NotImplementedError  # every subclass reads its own

    def to_json(self) -> bytes:
        return _dumps(self.to_dict())

    @classmethod
    def from_json(cls: type[_D], body: bytes | str) -> _D:
        return parse_body(cls.__name__, body, cls.from_dict)


@dataclass
class SubscriptionData(_DictJson):
    """A topic subscription: tag expression ``*`` or ``TagA || TagB`` (or SQL92)."""

    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    @classmethod
    def build(cls, topic: str, expression: str | None, sub_version: int, expression_type: str = "TAG"):
        """Parse a tag expression as the Java ``FilterAPI.buildSubscriptionData`` does."""
        expr = (expression or "").strip()
        sd = cls(topic=topic, sub_string=expr or SUB_ALL, sub_version=sub_version, expression_type=expression_type)
        if expression_type == "TAG" and expr and expr != SUB_ALL:
            for tag in expr.split("||"):
                tag = tag.strip()
                if tag and tag not in sd.tags_set:
                    sd.tags_set.append(tag)
                    sd.code_set.append(java_string_hash(tag))
        if sd.sub_string != SUB_ALL and not sd.tags_set and expression_type == "TAG":
            sd.sub_string = SUB_ALL
        return sd

    def matches_tag(self, tags: str | None) -> bool:
        """Exact tag check the consumer does after the broker's hash filter."""
        if not self.tags_set:
            return True
        return tags is not None and tags in self.tags_set

    def to_dict(self) -> dict:
        return {"classFilterMode": self.class_filter_mode, "codeSet": self.code_set,
                "expressionType": self.expression_type, "subString": self.sub_string,
                "subVersion": self.sub_version, "tagsSet": self.tags_set, "topic": self.topic}

    @classmethod
    def from_dict(cls, d: dict) -> SubscriptionData:
        tags = [t for t in (d.get("tagsSet") or []) if t]
        try:
            sub_version = int(d.get("subVersion") or 0)
        except (TypeError, ValueError):
            sub_version = 0
        return cls(topic=d["topic"], sub_string=d.get("subString") or SUB_ALL, tags_set=tags,
                   code_set=[java_string_hash(t) for t in tags], sub_version=sub_version,
                   expression_type=d.get("expressionType") or "TAG",
                   class_filter_mode=bool(d.get("classFilterMode", False)))


@dataclass
class ConsumerData(_DictJson):
    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscriptions: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_dict(self) -> dict:
        return {"consumeFromWhere": self.consume_from_where.value, "consumeType": self.consume_type.value,
                "groupName": self.group_name, "messageModel": self.message_model.value,
                "subscriptionDataSet": [s.to_dict() for s in self.subscriptions], "unitMode": self.unit_mode}

    @classmethod
    def from_dict(cls, d: dict) -> ConsumerData:
        return cls(group_name=d["groupName"],
                   consume_type=ConsumeType.parse(d.get("consumeType", "CONSUME_PASSIVELY")),
                   message_model=MessageModel.parse(d.get("messageModel", "CLUSTERING")),
                   consume_from_where=ConsumeFromWhere.parse(d.get("consumeFromWhere", "CONSUME_FROM_LAST_OFFSET")),
                   subscriptions=[SubscriptionData.from_dict(s) for s in d.get("subscriptionDataSet") or []],
                   unit_mode=bool(d.get("unitMode", False)))


@dataclass
class HeartbeatData:
    """HEART_BEAT body. ``heartbeat_fingerprint`` / ``without_sub`` are RocketMQ 5.x's
    (heartbeat v2: a non-zero fingerprint, and ``withoutSub`` true for a heartbeat that only
    refreshes the channel); None leaves them out, as 4.x clients do."""

    client_id: str
    producer_groups: list[str] = field(default_factory=list)
    consumers: list[ConsumerData] = field(default_factory=list)
    heartbeat_fingerprint: int | None = None
    without_sub: bool | None = None

    def to_json(self) -> bytes:
        d: dict[str, Any] = {"clientID": self.client_id, "consumerDataSet": [c.to_dict() for c in self.consumers]}
        if self.heartbeat_fingerprint is not None:  # fastjson's alphabetical order
            d["heartbeatFingerprint"] = self.heartbeat_fingerprint
        d["producerDataSet"] = [{"groupName": g} for g in self.producer_groups]
        if self.without_sub is not None:
            d["withoutSub"] = self.without_sub
        return _dumps(d)

    def fingerprint(self) -> int:
        """A stable signed 32-bit hash of what this heartbeat subscribes (client id, sub
        versions and the v2 fields left out), the broker's only use of it being "did it change".
        Never 0 (0 means heartbeat v1)."""
        consumers = [dict(c.to_dict(), subscriptionDataSet=sorted(
            (dict(s.to_dict(), subVersion=0) for s in c.subscriptions), key=lambda s: str(s.get("topic"))))
            for c in self.consumers]
        text = _dumps({"consumerDataSet": consumers, "producerDataSet": [{"groupName": g} for g in self.producer_groups]})
        h = zlib.crc32(text) & 0xFFFFFFFF
        h = h - (1 << 32) if h >= 1 << 31 else h
        return h or 1

    @classmethod
    def from_json(cls, body: bytes) -> HeartbeatData:
        return parse_body(cls.__name__, body, cls._from_dict)

    @classmethod
    def _from_dict(cls, d: dict) -> HeartbeatData:
        fp, without = d.get("heartbeatFingerprint"), d.get("withoutSub")
        return cls(client_id=d.get("clientID", ""),
                   producer_groups=[p["groupName"] for p in d.get("producerDataSet") or []],
                   consumers=[ConsumerData.from_dict(c) for c in d.get("consumerDataSet") or []],
                   heartbeat_fingerprint=None if fp is None else int(fp),
                   without_sub=None if without is None else without is True or str(without).lower() == "true")


@dataclass
class QueueData(_DictJson):
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = 6
    topic_sys_flag: int = 0

    def to_dict(self) -> dict:
        return {"brokerName": self.broker_name, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}

    @classmethod
    def from_dict(cls, d: dict) -> QueueData:
        return cls(d["brokerName"], int(d["readQueueNums"]), int(d["writeQueueNums"]), int(d.get("perm", 6)),
                   int(d.get("topicSysFlag", d.get("topicSynFlag", 0)) or 0))


@dataclass
class BrokerData(_DictJson):
    """A broker (master and slaves) in route and cluster data.

    ``enable_acting_master`` (RocketMQ 5.x, always sent by 5.x name servers; None: absent, as
    from 4.x) and ``zone_name`` (5.x, only when the broker sets ``zoneName``) are kept as read.
    """

    broker_name: str
    cluster: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    enable_acting_master: bool | None = None
    zone_name: str | None = None

    def master_addr(self) -> str | None:
        return self.broker_addrs.get(0)

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"brokerAddrs": dict(self.broker_addrs), "brokerName": self.broker_name,
                             "cluster": self.cluster}
        if self.enable_acting_master is not None:
            d["enableActingMaster"] = self.enable_acting_master
        if self.zone_name is not None:
            d["zoneName"] = self.zone_name
        return d

    @classmethod
    def from_dict(cls, d: dict) -> BrokerData:
        acting = d.get("enableActingMaster")
        zone = d.get("zoneName")
        return cls(d["brokerName"], d.get("cluster", ""), {int(k): v for k, v in (d.get("brokerAddrs") or {}).items()},
                   None if acting is None else acting is True or str(acting).lower() == "true",
                   None if zone is None else str(zone))


@dataclass
class TopicRouteData:
    """A topic's route. ``topic_queue_mapping_by_broker`` is RocketMQ 5.x's static-topic
    mapping (broker name → mapping info, kept as the name server sent it; None when absent)."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    order_topic_conf: str | None = None
    topic_queue_mapping_by_broker: dict[str, Any] | None = None

    def to_json(self, *, standard: bool = True) -> bytes:
        d: dict[str, Any] = {"brokerDatas": [b.to_dict() for b in self.broker_datas], "filterServerTable": {},
                             "queueDatas": [q.to_dict() for q in self.queue_datas]}
        if self.order_topic_conf:
            d["orderTopicConf"] = self.order_topic_conf
        if self.topic_queue_mapping_by_broker:
            d["topicQueueMappingByBroker"] = self.topic_queue_mapping_by_broker
        return fastjson.dumps(d, standard=standard).encode("utf-8")

    @classmethod
    def from_json(cls, body: bytes) -> TopicRouteData:
        """Raises: ValueError: malformed route JSON (a hostile or broken name server)."""
        return parse_body(cls.__name__, body, cls._from_dict)

    @classmethod
    def _from_dict(cls, d: dict) -> TopicRouteData:
        mapping = d.get("topicQueueMappingByBroker")
        return cls([QueueData.from_dict(q) for q in d.get("queueDatas") or []],
                   [BrokerData.from_dict(b) for b in d.get("brokerDatas") or []], d.get("orderTopicConf"),
                   mapping if isinstance(mapping, dict) and mapping else None)


@dataclass
class TopicConfig(_DictJson):
    topic_name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_dict(self) -> dict:
        return {"order": self.order, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicFilterType": self.topic_filter_type, "topicName": self.topic_name,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}

    def encode_compact(self) -> str:
        """Java ``TopicConfig.encode()``: ``"<name> <read> <write> <perm> <filterType>"``."""
        return (f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} "
                f"{self.topic_filter_type}")

    @classmethod
    def decode_compact(cls, text: str) -> TopicConfig:
        """Inverse of :meth:`encode_compact`.

        Raises:
            ValueError: fewer than five fields or non-numeric counts.
        """
        parts = text.split(" ")
        if len(parts) < 5:
            raise ValueError(f"not an encoded TopicConfig: {text!r}")
        return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])

    @classmethod
    def from_dict(cls, d: dict) -> TopicConfig:
        return cls(d["topicName"], int(d.get("readQueueNums", 8)), int(d.get("writeQueueNums", 8)),
                   int(d.get("perm", 6)), d.get("topicFilterType") or "SINGLE_TAG", int(d.get("topicSysFlag", 0)),
                   bool(d.get("order", False)))


@dataclass
class DataVersion(_DictJson):
    timestamp: int = 0
    counter: int = 0

    def to_dict(self) -> dict:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_dict(cls, d: dict | None) -> DataVersion:
        d = d or {}
        c = d.get("counter", 0)
        return cls(int(d.get("timestamp", 0)), int(c.get("value", 0) if isinstance(c, dict) else c))


@dataclass
class TopicConfigSerializeWrapper(_DictJson):
    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_dict(self) -> dict:
        return {"dataVersion": self.data_version.to_dict(),
                "topicConfigTable": {k: v.to_dict() for k, v in self.topic_config_table.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> TopicConfigSerializeWrapper:
        return cls({k: TopicConfig.from_dict(v) for k, v in (d.get("topicConfigTable") or {}).items()},
                   DataVersion.from_dict(d.get("dataVersion")))


@dataclass
class RegisterBrokerBody:
    topic_config_wrapper: TopicConfigSerializeWrapper = field(default_factory=TopicConfigSerializeWrapper)
    filter_server_list: list[str] = field(default_factory=list)

    def to_json(self) -> bytes:
        return _dumps({"filterServerList": self.filter_server_list,
                       "topicConfigSerializeWrapper": self.topic_config_wrapper.to_dict()})

    @classmethod
    def from_json(cls, body: bytes) -> RegisterBrokerBody:
        return parse_body(cls.__name__, body, cls._from_dict)

    @classmethod
    def _from_dict(cls, d: dict) -> RegisterBrokerBody:
        return cls(TopicConfigSerializeWrapper.from_dict(d.get("topicConfigSerializeWrapper") or {}),
                   list(d.get("filterServerList") or []))

    def encode(self, compress: bool = False) -> bytes:
        """The REGISTER_BROKER body: JSON, or with ``compress=True`` the compressed form (header
        ``compressed=true``): a zlib stream of ``int len + DataVersion JSON``, ``int topicCount``,
        per topic ``int len + "<name> <read> <write> <perm> <filterType>"``, then ``int len +
        filterServerList JSON``. The compressed form loses topicSysFlag and order, as in Java.
        """
        if not compress:
            return self.to_json()
        parts = [_len_prefixed(self.topic_config_wrapper.data_version.to_json())]
        table = self.topic_config_wrapper.topic_config_table
        parts.append(_INT.pack(len(table)))
        for tc in table.values():
            parts.append(_len_prefixed(tc.encode_compact().encode("utf-8")))
        parts.append(_len_prefixed(_dumps(self.filter_server_list)))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, body: bytes, compressed: bool = False) -> RegisterBrokerBody:
        """Read either form of the REGISTER_BROKER body.

        Raises:
            ValueError: the body is not valid in the announced form.
        """
        if not compressed:
            return cls.from_json(body)
        try:
            raw = zlib.decompress(body)
            pos = 0

            def chunk() -> bytes:
                nonlocal pos
                (n,) = _INT.unpack_from(raw, pos)
                if n < 0 or pos + 4 + n > len(raw):
                    raise ValueError(f"bad length {n} at {pos}")
                pos += 4 + n
                return raw[pos - n:pos]

            version = DataVersion.from_json(chunk())
            (count,) = _INT.unpack_from(raw, pos)
            pos += 4
            table = {}
            for _ in range(count):
                tc = TopicConfig.decode_compact(chunk().decode("utf-8"))
                table[tc.topic_name] = tc
            servers = list(fastjson.loads(chunk())) if pos < len(raw) else []
        except (zlib.error, struct.error, UnicodeDecodeError) as exc:
            raise ValueError(f"malformed compressed RegisterBrokerBody: {exc}") from exc
        return cls(TopicConfigSerializeWrapper(table, version), servers)


_INT = struct.Struct(">i")


def _len_prefixed(data: bytes) -> bytes:
    return _INT.pack(len(data)) + data


def consumer_list_to_json(client_ids: list[str]) -> bytes:
    return _dumps({"consumerIdList": client_ids})


def consumer_list_from_json(body: bytes) -> list[str]:
    return list(fastjson.loads(body).get("consumerIdList") or [])


def mq_set_to_json(client_id: str, group: str, mqs: list[MessageQueue]) -> bytes:
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ request body."""
    return _dumps({"clientId": client_id, "consumerGroup": group, "mqSet": [m.to_dict() for m in mqs]})


# --- bodies built on the declarative JsonBean base -------------------------------------------
@dataclass(slots=True)
class ProducerData(JsonBean):
    """One producer group of a heartbeat (``{"groupName": ...}``)."""

    group_name: str = ""


@dataclass(slots=True)
class ConsumerListBody(JsonBean):
    """GET_CONSUMER_LIST_BY_GROUP response: ``{"consumerIdList": [...]}``."""

    consumer_id_list: list[str] = field(default_factory=list)


@dataclass(slots=True)
class LockBatchRequestBody(JsonBean):
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ request: ``{"clientId","consumerGroup","mqSet"}``."""

    client_id: str | None = None
    consumer_group: str | None = None
    mq_set: list[MessageQueue] = json_field(default_factory=list, codec=list_of(MQ))


UnlockBatchRequestBody = LockBatchRequestBody


@dataclass(slots=True)
class LockBatchResponseBody(JsonBean):
    """LOCK_BATCH_MQ response: ``{"lockOKMQSet": [MessageQueue...]}``."""

    lock_ok_mq_set: list[MessageQueue] = json_field(default_factory=list, key="lockOKMQSet", codec=list_of(MQ))


@dataclass(slots=True)
class ResetOffsetBody(JsonBean):
    """RESET_CONSUMER_CLIENT_OFFSET body for Java consumers (and the INVOKE_BROKER_TO_RESET_OFFSET
    response): ``{"offsetTable":{{MessageQueue}:offset}}`` with object keys."""

    offset_table: dict[MessageQueue, int] = json_field(default_factory=dict, codec=map_of(INT, MQ_KEY))


@dataclass(slots=True)
class MessageQueueForC(JsonBean):
    broker_name: str = ""
    offset: int = 0
    queue_id: int = 0
    topic: str = ""


@dataclass(slots=True)
class ResetOffsetBodyForC(JsonBean):
    """RESET_CONSUMER_CLIENT_OFFSET body the C++ client parses:
    ``{"offsetTable":[{"brokerName","offset","queueId","topic"}]}``."""

    offset_table: list[MessageQueueForC] = json_field(default_factory=list, codec=list_of(bean(MessageQueueForC)))

    @classmethod
    def from_offsets(cls, offsets: dict[MessageQueue, int]) -> ResetOffsetBodyForC:
        return cls([MessageQueueForC(mq.broker_name, off, mq.queue_id, mq.topic) for mq, off in offsets.items()])

    def offsets(self) -> dict[MessageQueue, int]:
        return {MessageQueue(e.topic, e.broker_name, e.queue_id): e.offset for e in self.offset_table}


class ConsumeMessageDirectlyResultCode(enum.Enum):
    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


@dataclass(slots=True)
class ConsumeMessageDirectlyResult(JsonBean):
    """CONSUME_MESSAGE_DIRECTLY response body."""

    auto_commit: bool = True
    consume_result: ConsumeMessageDirectlyResultCode | None = json_field(
        None, codec=enum_codec(ConsumeMessageDirectlyResultCode))
    order: bool = False
    remark: str | None = None
    spent_time_mills: int = 0


@dataclass(slots=True)
class ConsumerRunningInfo(JsonBean):
    """GET_CONSUMER_RUNNING_INFO response (kept loose: process-queue and status entries stay dicts,
    as the C++ client writes some numbers as strings)."""

    jstack: str | None = None
    mq_table: dict[MessageQueue, dict] = json_field(default_factory=dict, codec=map_of(PLAIN, MQ_KEY))
    properties: dict[str, str] = field(default_factory=dict)
    status_table: dict[str, Any] = field(default_factory=dict)
    subscription_set: list[SubscriptionData] = json_field(default_factory=list,
                                                          codec=list_of(bean(SubscriptionData)))
