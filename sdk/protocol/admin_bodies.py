"""JSON bodies of the admin and name-server requests (docs/protocol.md §3.2, §3.6): clusters, topic lists, KV
tables, connections, consume/topic statistics, subscription groups.

All are :class:`~rocketmq_sdk.protocol.beans.JsonBean` dataclasses: ``to_json()`` writes the Java
form (fastjson default: bare int keys, ``MessageQueue`` object keys, alphabetical bean
properties), ``from_json()`` reads that form or standard JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .beans import INT_KEY, MQ, MQ_KEY, JsonBean, bean, enum_codec, json_field, list_of, map_of
from .bodies import (
    BrokerData,
    ConsumeFromWhere,
    ConsumeType,
    DataVersion,
    MessageModel,
    SubscriptionData,
)
from .message import MessageQueue


@dataclass(slots=True)
class KVTable(JsonBean):
    """``{"table":{"k":"v"}}``: GET_KVLIST_BY_NAMESPACE, GET_BROKER_RUNTIME_INFO, REGISTER_BROKER
    response."""

    table: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class TopicList(JsonBean):
    """``{"topicList":[...], "brokerAddr": ...}`` (206, 224, 304, 305)."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None


@dataclass(slots=True)
class GroupList(JsonBean):
    """``{"groupList":[...]}`` (QUERY_TOPIC_CONSUME_BY_WHO)."""

    group_list: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ClusterInfo(JsonBean):
    """GET_BROKER_CLUSTER_INFO: brokers by name and broker names by cluster."""

    broker_addr_table: dict[str, BrokerData] = json_field(default_factory=dict, codec=map_of(bean(BrokerData)))
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    def broker_names(self, cluster: str) -> list[str]:
        return list(self.cluster_addr_table.get(cluster, []))


@dataclass(slots=True)
class Connection(JsonBean):
    """One client channel of a group: ``{"clientAddr","clientId","language","version"}``."""

    client_addr: str = ""
    client_id: str = ""
    language: str = "JAVA"
    version: int = 0


@dataclass(slots=True)
class ConsumerConnection(JsonBean):
    """GET_CONSUMER_CONNECTION_LIST response."""

    connection_set: list[Connection] = json_field(default_factory=list, codec=list_of(bean(Connection)))
    consume_from_where: ConsumeFromWhere | None = json_field(None, codec=enum_codec(ConsumeFromWhere))
    consume_type: ConsumeType | None = json_field(None, codec=enum_codec(ConsumeType))
    message_model: MessageModel | None = json_field(None, codec=enum_codec(MessageModel))
    subscription_table: dict[str, SubscriptionData] = json_field(default_factory=dict,
                                                                 codec=map_of(bean(SubscriptionData)))


@dataclass(slots=True)
class ProducerConnection(JsonBean):
    """GET_PRODUCER_CONNECTION_LIST response: ``{"connectionSet":[...]}``."""

    connection_set: list[Connection] = json_field(default_factory=list, codec=list_of(bean(Connection)))


@dataclass(slots=True)
class OffsetWrapper(JsonBean):
    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0


@dataclass(slots=True)
class ConsumeStats(JsonBean):
    """GET_CONSUME_STATS response: per queue broker/consumer offsets, and the group's TPS."""

    consume_tps: float = 0.0
    offset_table: dict[MessageQueue, OffsetWrapper] = json_field(default_factory=dict,
                                                                 codec=map_of(bean(OffsetWrapper), MQ_KEY))

    def diff_total(self) -> int:
        """Messages not yet consumed, summed over queues (``ConsumeStats.computeTotalDiff``)."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())


@dataclass(slots=True)
class TopicOffset(JsonBean):
    last_update_timestamp: int = 0
    max_offset: int = 0
    min_offset: int = 0


@dataclass(slots=True)
class TopicStatsTable(JsonBean):
    """GET_TOPIC_STATS_INFO response: per queue min/max offset and last update time."""

    offset_table: dict[MessageQueue, TopicOffset] = json_field(default_factory=dict,
                                                               codec=map_of(bean(TopicOffset), MQ_KEY))


@dataclass(slots=True)
class SubscriptionGroupConfig(JsonBean):
    """A consumer group's broker-side settings (defaults of 4.9.8)."""

    group_name: str = ""
    broker_id: int = 0
    consume_broadcast_enable: bool = True
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    notify_consumer_ids_changed_enable: bool = True
    retry_max_times: int = 16
    retry_queue_nums: int = 1
    which_broker_when_consume_slowly: int = 1
    #: 5.x ``consumeMessageOrderly``: a FIFO group (5.x proxies hand its messages out in message
    #: group order); None (4.9.8: no such field) is left out of the JSON
    consume_message_orderly: bool | None = None


@dataclass(slots=True)
class SubscriptionGroupWrapper(JsonBean):
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG response and ``subscriptionGroup.json``."""

    data_version: DataVersion = json_field(default_factory=DataVersion, codec=bean(DataVersion))
    subscription_group_table: dict[str, SubscriptionGroupConfig] = json_field(
        default_factory=dict, codec=map_of(bean(SubscriptionGroupConfig)))


@dataclass(slots=True)
class QueueTimeSpan(JsonBean):
    consume_time_stamp: int = 0
    consume_time_stamp_str: str | None = None
    delay_time: int = 0
    max_time_stamp: int = 0
    max_time_stamp_str: str | None = None
    message_queue: MessageQueue | None = json_field(None, codec=MQ)
    min_time_stamp: int = 0
    min_time_stamp_str: str | None = None


@dataclass(slots=True)
class QueryConsumeTimeSpanBody(JsonBean):
    consume_time_span_set: list[QueueTimeSpan] = json_field(default_factory=list, codec=list_of(bean(QueueTimeSpan)))


@dataclass(slots=True)
class GetConsumerStatusBody(JsonBean):
    """GET_CONSUMER_STATUS_FROM_CLIENT / INVOKE_BROKER_TO_GET_CONSUMER_STATUS response."""

    consumer_table: dict[str, dict[MessageQueue, int]] = json_field(
        default_factory=dict, codec=map_of(map_of(INT_KEY, MQ_KEY)))
    message_queue_table: dict[MessageQueue, int] = json_field(default_factory=dict, codec=map_of(INT_KEY, MQ_KEY))
