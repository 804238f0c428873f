"""Read-only admin queries: GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208),
GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204), GET_BROKER_RUNTIME_INFO
(28), QUERY_TOPIC_CONSUME_BY_WHO (300), GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305) and
QUERY_MESSAGE (12). Bodies and error texts follow what a 4.9.8 broker answers
(``captures/admin.jsonl``)."""

from __future__ import annotations

import shutil
import time
from typing import TYPE_CHECKING

from rocketmq_sdk.protocol.admin_bodies import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    GroupList,
    KVTable,
    OffsetWrapper,
    ProducerConnection,
    TopicList,
    TopicOffset,
    TopicStatsTable,
)
from rocketmq_sdk.protocol.codes import SYSTEM_TOPICS, LanguageCode, RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import (
    GetConsumeStatsRequestHeader,
    ProducerGroupRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    TopicRequestHeader,
)
from rocketmq_sdk.protocol.message import MessageQueue
from rocketmq_sdk.remoting import Channel, RemotingCommand

from .requests import ACL_NONE, SUB, Acl, TopicRes, handles

if TYPE_CHECKING:
    from .client_manager import ClientChannelInfo
    from .context import BrokerContext

#: ``MixAll.UNIQUE_MSG_QUERY_FLAG``: the key is a UNIQ_KEY (message id) rather than a KEYS item
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
DEFAULT_QUERY_MAX_NUM = 32
BROKER_VERSION = 409  # V4_9_8


def language_name(code: int) -> str:
    try:
        return LanguageCode(code).name
    except ValueError:
        return "OTHER"


def connection_of(info: ClientChannelInfo) -> Connection:
    return Connection(info.channel.remote_addr, info.client_id, language_name(info.language), info.version)


class StatsProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.boot_ms = int(time.time() * 1000)

    def _last_store_time(self, topic: str, queue_id: int, next_offset: int) -> int:
        """Store time of the message before ``next_offset`` (0 when there is none)."""
        if next_offset <= 0:
            return 0
        ts = self.broker.store.get_message_store_timestamp(topic, queue_id, next_offset - 1)
        return max(ts, 0)

    @handles(RequestCode.GET_TOPIC_STATS_INFO, header=TopicRequestHeader, writes=False, acl=ACL_NONE)
    def topic_stats(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        topic = TopicRequestHeader.from_ext_fields(cmd.ext_fields).topic or ""
        tc = self.broker.topics.get(topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store, name = self.broker.store, self.broker.config.broker_name
        table = TopicStatsTable()
        for qid in range(tc.write_queue_nums):
            hi = store.get_max_offset_in_queue(topic, qid)
            lo = max(store.get_min_offset_in_queue(topic, qid), 0)
            table.offset_table[MessageQueue(topic, name, qid)] = TopicOffset(
                self._last_store_time(topic, qid, hi), hi, lo)
        return cmd.response(ResponseCode.SUCCESS, body=table.to_json())

    @handles(RequestCode.GET_CONSUME_STATS, header=GetConsumeStatsRequestHeader, writes=False, acl=ACL_NONE)
    def consume_stats(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumeStatsRequestHeader.from_ext_fields(cmd.ext_fields)
        b, group = self.broker, h.consumer_group or ""
        topics = [h.topic] if h.topic else b.offsets.topics_of_group(group)
        stats = ConsumeStats()
        for topic in topics:
            tc = b.topics.get(topic)
            if tc is None:
                continue
            g = b.consumers.groups.get(group)
            if not h.topic and g is not None and g.subscriptions and topic not in g.subscriptions:
                continue  # Java skips topics the online group no longer subscribes
            for qid in range(tc.write_queue_nums):
                broker_off = max(b.store.get_max_offset_in_queue(topic, qid), 0)
                consumer_off = max(b.offsets.query(group, topic, qid), 0)
                stats.offset_table[MessageQueue(topic, b.config.broker_name, qid)] = OffsetWrapper(
                    broker_off, consumer_off, self._last_store_time(topic, qid, consumer_off))
        stats.consume_tps = b.consume_tps(group)
        return cmd.response(ResponseCode.SUCCESS, body=stats.to_json())

    @handles(RequestCode.GET_CONSUMER_CONNECTION_LIST, header=GetConsumeStatsRequestHeader, writes=False,
             acl=ACL_NONE)
    def consumer_connections(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        group = GetConsumeStatsRequestHeader.from_ext_fields(cmd.ext_fields).consumer_group or ""
        g = self.broker.consumers.groups.get(group)
        if g is None or not g.channels:
            return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        body = ConsumerConnection([connection_of(i) for i in g.channels.values()], g.consume_from_where,
                                  g.consume_type, g.message_model, dict(g.subscriptions))
        return cmd.response(ResponseCode.SUCCESS, body=body.to_json())

    @handles(RequestCode.GET_PRODUCER_CONNECTION_LIST, header=ProducerGroupRequestHeader, writes=False,
             acl=ACL_NONE)
    def producer_connections(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        group = ProducerGroupRequestHeader.from_ext_fields(cmd.ext_fields).producer_group or ""
        chans = self.broker.producers.groups.get(group)
        if not chans:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        body = ProducerConnection([connection_of(i) for i in chans.values()])
        return cmd.response(ResponseCode.SUCCESS, body=body.to_json())

    @handles(RequestCode.GET_BROKER_RUNTIME_INFO, header=None, writes=False, acl=ACL_NONE)
    def runtime_info(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        b, store = self.broker, self.broker.store
        up = int(time.time() * 1000) - self.boot_ms
        d, rem = divmod(up // 1000, 86400)
        hrs, rem = divmod(rem, 3600)
        mins, secs = divmod(rem, 60)
        try:
            du = shutil.disk_usage(b.config.store.store_path_root_dir)
            ratio = f"{(du.total - du.free) / du.total:.2f}"
            capacity = f"Total : {du.total / 2**30:.1f} GiB, Free : {du.free / 2**30:.1f} GiB."
        except OSError:
            ratio, capacity = "-1", "-1"
        table = {
            "brokerVersion": "479" if b.config.is_v5 else str(BROKER_VERSION),  # V5_3_3 / V4_9_8
            "brokerVersionDesc": "V5_3_3" if b.config.is_v5 else "V4_9_8",
            "bootTimestamp": str(self.boot_ms), "runtime": f"[ {d} days, {hrs} hours, {mins} minutes, {secs} seconds ]",
            "msgPutTotalTodayNow": str(b.stats_put), "msgGetTotalTodayNow": str(b.stats_get),
            "msgPutTotalTodayMorning": "0", "msgGetTotalTodayMorning": "0",
            "msgPutTotalYesterdayMorning": "0", "msgGetTotalYesterdayMorning": "0",
            "commitLogMinOffset": str(store.get_min_phy_offset()),
            "commitLogMaxOffset": str(store.get_max_phy_offset()),
            "commitLogDiskRatio": ratio, "consumeQueueDiskRatio": ratio, "commitLogDirCapacity": capacity,
            "earliestMessageTimeStamp": "-1", "dispatchBehindBytes": "0", "remainHowManyDataToFlush": "0 B",
            "putTps": "0.0 0.0 ", "getTotalTps": "0.0 0.0 0.0", "getFoundTps": "0.0 0.0 ",
            "getMissTps": "0.0 0.0 ", "getTransferedTps": "0.0 0.0 ",
            "sendThreadPoolQueueSize": "0", "pullThreadPoolQueueSize": "0", "queryThreadPoolQueueSize": "0",
            "EndTransactionQueueSize": "0",
        }
        # replication (not in 4.9.8's answer): master side of the HA service, or the slave's link
        table["brokerRole"] = b.config.broker_role
        if b.ha_client is not None:
            table["haMasterAddress"] = b.ha_client.master_address or ""
            table["haConnected"] = "true" if b.ha_client.connected else "false"
        else:
            table.update(b.ha.runtime_info())
        if b.dledger is not None:  # DLedger mode (issue 27): this member's view of its group
            table.update(b.dledger.runtime_info())
        for level, off in sorted(dict(b.schedule.offsets).items()):
            table[f"scheduleMessageOffset_{level}"] = f"{off},{off}"
        return cmd.response(ResponseCode.SUCCESS, body=KVTable(table).to_json())

    @handles(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, header=TopicRequestHeader, writes=False, acl=ACL_NONE)
    def consume_by_who(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        topic = TopicRequestHeader.from_ext_fields(cmd.ext_fields).topic or ""
        b = self.broker
        groups = {name for name, g in b.consumers.groups.items() if topic in g.subscriptions}
        groups.update(b.offsets.groups_of_topic(topic))
        return cmd.response(ResponseCode.SUCCESS, body=GroupList(sorted(groups)).to_json())

    @handles(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, header=None, writes=False, acl=ACL_NONE)
    def system_topics(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        c = self.broker.config
        topics = set(SYSTEM_TOPICS) | {c.broker_cluster_name, c.broker_name, f"{c.broker_cluster_name}_REPLY_TOPIC"}
        return cmd.response(ResponseCode.SUCCESS, body=TopicList(sorted(topics)).to_json())

    @handles(RequestCode.QUERY_MESSAGE, header=QueryMessageRequestHeader, writes=False,
             acl=Acl(TopicRes("topic", SUB)))
    def query_message(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        max_num = h.max_num or DEFAULT_QUERY_MAX_NUM
        if str(cmd.ext_fields.get(UNIQUE_MSG_QUERY_FLAG, "")).lower() == "true":
            max_num = DEFAULT_QUERY_MAX_NUM
        end = h.end_timestamp if h.end_timestamp is not None else 2**63 - 1
        res = self.broker.store.query_message(h.topic or "", h.key or "", max_num, h.begin_timestamp or 0, end)
        ext = QueryMessageResponseHeader(res.index_last_update_timestamp,
                                         res.index_last_update_phyoffset).to_ext_fields()
        if not res.message_buffers:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                                ext_fields=ext)
        return cmd.response(ResponseCode.SUCCESS, body=res.body(), ext_fields=ext)
