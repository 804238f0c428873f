"""HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38) and consumer offsets
(QUERY_CONSUMER_OFFSET 14, UPDATE_CONSUMER_OFFSET 15)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketmq_broker.filter.consumer_filter import check_subscription
from rocketmq_sdk.protocol.bodies import HeartbeatData, MessageModel, consumer_list_to_json
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode, retry_topic
from rocketmq_sdk.protocol.headers import (
    ConsumerGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketmq_sdk.remoting import Channel, RemotingCommand

from .client_manager import ClientChannelInfo
from .requests import ACL_NONE, SUB, Acl, Body, GroupRes, HeartbeatRes, SlaveRule, TopicRes, handles
from .v5_heartbeat import HeartbeatV2

if TYPE_CHECKING:
    from .context import BrokerContext

log = logging.getLogger("rocketmq_broker")


class ClientProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.v2 = HeartbeatV2()

    @handles(RequestCode.HEART_BEAT, header=None, writes=True, acl=Acl(HeartbeatRes()),
             on_slave=SlaveRule.SERVE, body=Body.HEARTBEAT)
    def heartbeat(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        b = self.broker
        hb = HeartbeatData.from_json(cmd.body)
        ch.attributes["client_id"] = hb.client_id
        consumers, ext = hb.consumers, None
        if b.config.is_v5:  # heartbeat v2 (issue 32)
            consumers, ext = self.v2.resolve(hb, self._stored_subscriptions)
        for cd in consumers:
            sg = b.groups.find(cd.group_name)  # auto-creates the group's settings, as Java does
            if sg is not None and cd.message_model == MessageModel.CLUSTERING:
                _, created = b.topics.create_system(retry_topic(cd.group_name), max(sg.retry_queue_nums, 1))
                if created:
                    b.register_to_namesrv_soon()
            info = ClientChannelInfo(ch, hb.client_id, cmd.language, cmd.version)
            if b.consumers.register(cd, info) and (sg is None or sg.notify_consumer_ids_changed_enable):
                b.notify_consumer_ids_changed(cd.group_name)
        for group in hb.producer_groups:
            b.producers.register(group, ClientChannelInfo(ch, hb.client_id, cmd.language, cmd.version))
        return cmd.response(ResponseCode.SUCCESS, ext_fields=ext)

    def _stored_subscriptions(self, group: str):
        g = self.broker.consumers.groups.get(group)
        return None if g is None else list(g.subscriptions.values())

    @handles(RequestCode.CHECK_CLIENT_CONFIG, header=None, writes=False, acl=ACL_NONE)
    def check_client_config(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG (46): can this broker filter the body's ``subscriptionData``?"""
        code, remark = check_subscription(cmd.body, self.broker.config.enable_property_filter)
        return cmd.response(code, remark)

    @handles(RequestCode.UNREGISTER_CLIENT, header=UnregisterClientRequestHeader, writes=False,
             acl=Acl(GroupRes("consumerGroup")))
    def unregister(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = UnregisterClientRequestHeader.from_ext_fields(cmd.ext_fields)
        b = self.broker
        if h.producer_group:
            b.producers.unregister_channel(ch, h.producer_group)
        if h.consumer_group:
            for g in b.consumers.unregister_channel(ch, h.consumer_group):
                b.notify_consumer_ids_changed(g)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_CONSUMER_LIST_BY_GROUP, header=ConsumerGroupRequestHeader, writes=False,
             acl=Acl(GroupRes("consumerGroup")))
    def consumer_list(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = ConsumerGroupRequestHeader.from_ext_fields(cmd.ext_fields)
        g = self.broker.consumers.groups.get(h.consumer_group or "")
        if g is None or not g.channels:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"no consumer for this group, {h.consumer_group}")
        return cmd.response(ResponseCode.SUCCESS, body=consumer_list_to_json(g.client_ids()))

    @handles(RequestCode.QUERY_CONSUMER_OFFSET, header=QueryConsumerOffsetRequestHeader, writes=False,
             acl=ACL_NONE)
    def query_offset(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        b = self.broker
        offset = b.offsets.query(h.consumer_group or "", h.topic or "", h.queue_id or 0)
        if offset >= 0:
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})
        # Java: a queue that never lost its first message (min offset ≤ 0, offset 0 not swapped out
        # of the page cache; an empty or unknown queue too, as the 4.9.8 captures show) reports
        # offset 0 for a new group. This store keeps no page-cache notion, so min ≤ 0 is enough.
        min_offset = b.store.get_min_offset_in_queue(h.topic or "", h.queue_id or 0)
        if min_offset <= 0:
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": "0"})
        return cmd.response(ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    @handles(RequestCode.UPDATE_CONSUMER_OFFSET, header=UpdateConsumerOffsetRequestHeader, writes=True,
             acl=Acl(GroupRes("consumerGroup"), TopicRes("topic", SUB)), on_slave=SlaveRule.SERVE)
    def update_offset(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        if self.broker.config.is_v5:  # 5.x validates commits (../shared/docs/rocketmq5-remoting.md §8.1)
            if h.consumer_group not in self.broker.groups.table:
                return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {h.consumer_group} not exist!")
            if self.broker.topics.get(h.topic or "") is None:
                return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"Topic {h.topic} not exist!")
        self.broker.offsets.commit(h.consumer_group or "", h.topic or "", h.queue_id or 0, h.commit_offset or 0)
        return cmd.response(ResponseCode.SUCCESS)
