"""Queue and topic queries and management: GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
GET_EARLIEST_MSG_STORETIME (32), SEARCH_OFFSET_BY_TIMESTAMP (29), VIEW_MESSAGE_BY_ID (33),
UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketmq_sdk.protocol.bodies import TopicConfig
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode, is_valid_name
from rocketmq_sdk.protocol.headers import (
    CreateTopicRequestHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    TopicRequestHeader,
    ViewMessageRequestHeader,
)
from rocketmq_sdk.remoting import Channel, RemotingCommand

from .config_file import pretty
from .requests import ACL_ADMIN, ACL_NONE, SLAVE_REFUSES_ADMIN, handles

if TYPE_CHECKING:
    from .context import BrokerContext


class AdminProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    @handles(RequestCode.GET_MAX_OFFSET, header=QueueRequestHeader, writes=False, acl=ACL_NONE)
    def max_offset(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = QueueRequestHeader.from_ext_fields(cmd.ext_fields)
        off = self.broker.store.get_max_offset_in_queue(h.topic or "", h.queue_id or 0)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": str(off)})

    @handles(RequestCode.GET_MIN_OFFSET, header=QueueRequestHeader, writes=False, acl=ACL_NONE)
    def min_offset(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = QueueRequestHeader.from_ext_fields(cmd.ext_fields)
        off = self.broker.store.get_min_offset_in_queue(h.topic or "", h.queue_id or 0)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": str(off)})

    @handles(RequestCode.GET_EARLIEST_MSG_STORETIME, header=QueueRequestHeader, writes=False, acl=ACL_NONE)
    def earliest_time(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = QueueRequestHeader.from_ext_fields(cmd.ext_fields)
        ts = self.broker.store.get_earliest_message_time(h.topic or "", h.queue_id or 0)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"timestamp": str(ts)})

    @handles(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header=SearchOffsetRequestHeader, writes=False,
             acl=ACL_NONE)
    def search_offset(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        off = self.broker.store.get_offset_in_queue_by_time(h.topic or "", h.queue_id or 0, h.timestamp or 0)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": str(off)})

    @handles(RequestCode.VIEW_MESSAGE_BY_ID, header=ViewMessageRequestHeader, writes=False, acl=ACL_NONE)
    def view_message(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = ViewMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        raw = self.broker.store.look_message_by_offset(h.offset or 0)
        if raw is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        return cmd.response(ResponseCode.SUCCESS, body=bytes(raw))

    @handles(RequestCode.UPDATE_AND_CREATE_TOPIC, header=CreateTopicRequestHeader, writes=True, acl=ACL_ADMIN,
             on_slave=SLAVE_REFUSES_ADMIN)
    def create_topic(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = CreateTopicRequestHeader.from_ext_fields(cmd.ext_fields)
        topic = h.topic or ""
        if not is_valid_name(topic):
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"The specified topic[{topic}] contains illegal characters")
        if topic == self.broker.config.broker_cluster_name:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"the topic[{topic}] is conflict with system reserved words.")
        tc = TopicConfig(topic, h.read_queue_nums or 8, h.write_queue_nums or 8,
                         h.perm if h.perm is not None else 6, h.topic_filter_type or "SINGLE_TAG",
                         h.topic_sys_flag or 0, bool(h.order))
        self.broker.topics.update(tc)
        self.broker.register_to_namesrv_soon()
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.DELETE_TOPIC_IN_BROKER, header=TopicRequestHeader, writes=True, acl=ACL_ADMIN,
             on_slave=SLAVE_REFUSES_ADMIN)
    def delete_topic(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        topic = TopicRequestHeader.from_ext_fields(cmd.ext_fields).topic or ""
        self.broker.topics.delete(topic)
        self.broker.store.delete_topics([topic])
        self.broker.register_to_namesrv_soon()
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_ALL_TOPIC_CONFIG, header=None, writes=False, acl=ACL_NONE)
    def all_topic_config(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=pretty(self.broker.topics.wrapper().to_dict()).encode())
