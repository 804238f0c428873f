"""Typed results of :class:`~rocketmq_sdk.admin.client.AdminClient` calls.

Plain dataclasses: ``dataclasses.asdict`` (or :func:`to_jsonable`) turns any of them into the
JSON the CLI prints with ``--json``. Times are epoch milliseconds.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

from rocketmq_sdk.protocol.message import MessageExt, MessageQueue


@dataclass(slots=True)
class QueueStatus:
    """One queue of ``topicStatus``: offsets range and the time of its last message."""

    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int = 0


@dataclass(slots=True)
class BrokerInfo:
    """One broker of ``clusterList``; ``role`` is ``MASTER`` for broker id 0, else ``SLAVE``.

    ``version``, ``in_tps``, ``out_tps`` and ``commit_log_max_offset`` come from
    GET_BROKER_RUNTIME_INFO and are None when the broker did not answer it.
    ``replication_lag`` (slaves only): bytes the slave's CommitLog is behind its master's
    (master ``commitLogMaxOffset`` − slave ``commitLogMaxOffset``, what 4.9.8 offers for it);
    None for a master or when either figure is missing (e.g. the master is down).
    """

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    role: str
    version: str | None = None
    in_tps: float | None = None
    out_tps: float | None = None
    commit_log_max_offset: int | None = None
    replication_lag: int | None = None
    #: DLedger mode (the reference broker's runtime info; None elsewhere): member id, role
    #: (LEADER / FOLLOWER / CANDIDATE), term, last log index, and on the leader each member's
    #: ``{id: (index, lag in entries)}``
    dledger_id: str | None = None
    dledger_role: str | None = None
    dledger_term: int | None = None
    dledger_index: int | None = None
    dledger_peers: dict[str, tuple[int, int | None]] | None = None


@dataclass(slots=True)
class QueueProgress:
    """One queue of ``consumerProgress``."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    lag: int
    last_timestamp: int = 0


@dataclass(slots=True)
class ConsumerProgress:
    """A consumer group's offsets on every broker, sorted by topic, broker, queue."""

    group: str
    consume_tps: float
    queues: list[QueueProgress] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        """Messages not consumed yet, summed over all queues (Java ``computeTotalDiff``)."""
        return sum(q.lag for q in self.queues)


@dataclass(slots=True)
class GroupSummary:
    """One line of ``consumerProgress`` without ``-g``: a group, its online clients and lag.

    ``count`` is the number of online clients (0 when none is connected, and then ``version``,
    ``consume_type`` and ``message_model`` are None).
    """

    group: str
    count: int
    version: int | None
    consume_type: str | None
    message_model: str | None
    consume_tps: float
    diff_total: int


@dataclass(slots=True)
class ClientConnection:
    """One online client of a group."""

    client_id: str
    client_addr: str
    language: str
    version: int


@dataclass(slots=True)
class Subscription:
    topic: str
    expression: str
    expression_type: str = "TAG"


@dataclass(slots=True)
class GroupConnections:
    """``consumerConnection``: the clients online in a group, and what they subscribe to."""

    group: str
    connections: list[ClientConnection] = field(default_factory=list)
    subscriptions: list[Subscription] = field(default_factory=list)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None


@dataclass(slots=True)
class ResetOffsetEntry:
    """One queue moved by ``resetOffsetByTime``; ``direct`` when the group was offline on that
    broker and its offset was written with UPDATE_CONSUMER_OFFSET (``resetOffsetByTimestampOld``)."""

    topic: str
    broker_name: str
    queue_id: int
    offset: int
    direct: bool = False


@dataclass(slots=True)
class MasterlessBroker:
    """A broker name whose master the name server no longer lists: reads go to ``read_from``,
    its slave with the lowest broker id; writes to it fail until the master is back."""

    cluster: str
    broker_name: str
    read_from: str


def message_to_dict(msg: MessageExt) -> dict[str, Any]:
    """A stored message as a JSON-ready dict; the body is decoded as UTF-8 (``replace``)."""
    return {
        "msgId": msg.msg_id,
        "offsetMsgId": msg.offset_msg_id,
        "topic": msg.topic,
        "tags": msg.tags,
        "keys": list(msg.keys),
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "reconsumeTimes": msg.reconsume_times,
        "bornTimestamp": msg.born_timestamp,
        "bornHost": msg.born_host,
        "storeTimestamp": msg.store_timestamp,
        "storeHost": msg.store_host,
        "sysFlag": msg.sys_flag,
        "bodyCRC": msg.body_crc,
        "properties": dict(msg.properties),
        "body": msg.body.decode("utf-8", "replace"),
        "bodyLength": len(msg.body),
    }


def to_jsonable(value: Any) -> Any:
    """Convert result dataclasses, enums, message queues and messages to JSON-ready values."""
    if isinstance(value, MessageExt):
        return message_to_dict(value)
    if isinstance(value, MessageQueue):
        return {"topic": value.topic, "brokerName": value.broker_name, "queueId": value.queue_id}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, ConsumerProgress):
            out["total_lag"] = value.total_lag
        return out
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def mq_label(mq: MessageQueue) -> str:
    """``topic@broker@queueId``: a message queue as a JSON object key."""
    return f"{mq.topic}@{mq.broker_name}@{mq.queue_id}"


def running_info_to_dict(info: Any) -> dict[str, Any]:
    """A :class:`~rocketmq_sdk.protocol.bodies.ConsumerRunningInfo` as standard JSON values
    (queue keys as ``topic@broker@queueId``)."""
    return {
        "properties": dict(info.properties),
        "subscriptions": [{"topic": s.topic, "expression": s.sub_string, "expression_type": s.expression_type}
                          for s in info.subscription_set],
        "mqTable": {mq_label(mq): to_jsonable(v) for mq, v in info.mq_table.items()},
        "statusTable": to_jsonable(info.status_table),
        "jstack": info.jstack,
    }
