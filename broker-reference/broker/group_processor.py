"""Consumer-group administration: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200),
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), DELETE_SUBSCRIPTIONGROUP (207),
INVOKE_BROKER_TO_RESET_OFFSET (222, pushing RESET_CONSUMER_CLIENT_OFFSET 220 to the group's
clients), GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309, with the stored
message as body), both forwarded to the client's connection."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol.admin_bodies import SubscriptionGroupConfig
from rocketmq_sdk.protocol.bodies import ResetOffsetBody, ResetOffsetBodyForC
from rocketmq_sdk.protocol.codes import LanguageCode, RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    ResetOffsetRequestHeader,
)
from rocketmq_sdk.protocol.message import MessageQueue
from rocketmq_sdk.protocol.msgid import decode_offset_msg_id
from rocketmq_sdk.remoting import Channel, RemotingCommand

from .requests import ACL_ADMIN, ACL_NONE, SLAVE_REFUSES_ADMIN, Body, handles

if TYPE_CHECKING:
    from .context import BrokerContext

log = logging.getLogger("rocketmq_broker")

#: how long the broker waits for a client's GET_CONSUMER_RUNNING_INFO answer (Java: 5 s)
RUNNING_INFO_TIMEOUT_MS = 5000
#: how long it waits for a client's CONSUME_MESSAGE_DIRECTLY answer (Java ``Broker2Client.callClient``: 10 s)
CONSUME_DIRECTLY_TIMEOUT_MS = 10000


class GroupProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    # -- subscription groups -----------------------------------------------------------------
    @handles(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, header=None, writes=True, acl=ACL_ADMIN,
             on_slave=SLAVE_REFUSES_ADMIN, body=Body.SUBSCRIPTION_GROUP)
    def update_group(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        sg = SubscriptionGroupConfig.from_json(cmd.body or b"{}")
        if not sg.group_name:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "groupName is empty")
        self.broker.groups.update(sg)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, header=None, writes=False, acl=ACL_NONE)
    def all_groups(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=self.broker.groups.wrapper().to_json())

    @handles(RequestCode.DELETE_SUBSCRIPTIONGROUP, header=DeleteSubscriptionGroupRequestHeader, writes=True,
             acl=ACL_ADMIN, on_slave=SLAVE_REFUSES_ADMIN)
    def delete_group(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = DeleteSubscriptionGroupRequestHeader.from_ext_fields(cmd.ext_fields)
        group = h.group_name or ""
        self.broker.groups.delete(group)
        if h.remove_offset:
            self.broker.offsets.remove_group(group)
        return cmd.response(ResponseCode.SUCCESS)

    # -- offsets reset --------------------------------------------------------------------------
    @handles(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header=ResetOffsetRequestHeader, writes=False,
             acl=ACL_NONE)
    def reset_offset(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        """Java ``Broker2Client.resetOffset``: per write queue, the offset stored at
        ``timestamp`` (-1: the max offset); without ``isForce`` an offset only moves back. The
        table is pushed to every client of the group (oneway 220) and returned; the clients
        commit it. A group that never committed gets SYSTEM_ERROR, an offline one
        CONSUMER_NOT_ONLINE."""
        h = ResetOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        b, topic, group = self.broker, h.topic or "", h.group or ""
        ts = h.timestamp if h.timestamp is not None else -1
        tc = b.topics.get(topic)
        if tc is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
        table: dict[MessageQueue, int] = {}
        for qid in range(tc.write_queue_nums):
            current = b.offsets.query(group, topic, qid)
            if current < 0:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            target = (b.store.get_max_offset_in_queue(topic, qid) if ts == -1
                      else b.store.get_offset_in_queue_by_time(topic, qid, ts))
            table[MessageQueue(topic, b.config.broker_name, qid)] = (
                target if h.is_force or target < current else current)
        g = b.consumers.groups.get(group)
        if g is None or not g.channels:
            return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE,
                                f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
                                f"Timestamp: {ts}")
        ext = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=ts, is_force=False).to_ext_fields()
        java_body = ResetOffsetBody(table).to_json()
        c_body = ResetOffsetBodyForC.from_offsets(table).to_json()
        for chan, info in list(g.channels.items()):
            body = c_body if info.language == LanguageCode.CPP else java_body
            try:
                chan.send(RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(ext), body,
                                                  oneway=True))
                log.info("[reset-offset] sent to %s (%s) for %s@%s", info.client_id, chan.remote_addr, topic, group)
            except MQError as exc:
                log.warning("[reset-offset] could not reach %s: %s", info.client_id, exc)
        return cmd.response(ResponseCode.SUCCESS, body=java_body)

    # -- consumer running info -------------------------------------------------------------------
    async def _forward_to_client(self, cmd: RemotingCommand, group: str, client_id: str, body: bytes | None,
                                 timeout_ms: int) -> RemotingCommand:
        """Send ``cmd``'s code, ext fields and ``body`` to the connection of ``client_id`` in
        ``group`` and relay its answer (Java ``Broker2Client.callClient``)."""
        g = self.broker.consumers.groups.get(group)
        target = None
        for chan, info in (g.channels.items() if g is not None else ()):
            if info.client_id == client_id:
                target = chan
        if target is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        fwd = RemotingCommand.request(cmd.code, dict(cmd.ext_fields or {}), body)
        try:
            answer = await target.invoke(fwd, timeout_ms)
        except MQError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
        return cmd.response(answer.code, answer.remark, answer.ext_fields, answer.body)

    @handles(RequestCode.GET_CONSUMER_RUNNING_INFO, header=GetConsumerRunningInfoRequestHeader, writes=False,
             acl=ACL_NONE)
    async def running_info(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumerRunningInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        return await self._forward_to_client(cmd, h.consumer_group or "", h.client_id or "", cmd.body,
                                             RUNNING_INFO_TIMEOUT_MS)

    @handles(RequestCode.CONSUME_MESSAGE_DIRECTLY, header=ConsumeMessageDirectlyResultRequestHeader,
             writes=False, acl=ACL_NONE)
    async def consume_directly(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        """The message named by ``msgId`` (an offset message id) is read from the commit log and
        sent, as the body, to the client, which runs its listener on it and answers a
        ConsumeMessageDirectlyResult."""
        h = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(cmd.ext_fields)
        cmd.ext_fields["brokerName"] = self.broker.config.broker_name
        try:
            offset = decode_offset_msg_id(h.msg_id or "")[2]
        except (ValueError, TypeError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"illegal msgId {h.msg_id!r}: {exc}")
        raw = self.broker.store.look_message_by_offset(offset)
        if raw is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return await self._forward_to_client(cmd, h.consumer_group or "", h.client_id or "", bytes(raw),
                                             CONSUME_DIRECTLY_TIMEOUT_MS)
