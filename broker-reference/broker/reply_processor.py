"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): the reply half of request-reply
(Java 4.9 ``ReplyMessageProcessor``).

A replier sends the reply like a normal message (topic ``<cluster>_REPLY_TOPIC``, created with
the other system topics). The broker:

1. checks it as a send (topic name and permission, queue id);
2. pushes it to the requesting client with PUSH_REPLY_MESSAGE_TO_CLIENT (326, sync, 10 s as
   Java's ``Broker2Client.callClient``), on the connection of the client whose id is the
   message's ``REPLY_TO_CLIENT`` property (producer connections first, then consumer ones);
   the header is a ``ReplyMessageRequestHeader`` with the send header's fields plus
   ``bornHost`` (``ip:port`` of the replier), ``storeHost`` and ``storeTimestamp``, and the
   properties gain ``PUSH_REPLY_TIME`` (first, as in the 4.9.8 capture);
3. stores the reply when ``store_reply_message_enable`` (default true).

The answer is SUCCESS when the push succeeded (``msgId``/``queueOffset`` of the stored copy, or
``"0"``/0 when not stored), else SYSTEM_ERROR with ``push reply message fail, channel of
<clientId> not found.`` (or the push failure), even if the reply was stored, as Java.
"""

from __future__ import annotations

import inspect
import logging
import random
import time
from typing import TYPE_CHECKING

from rocketmq_broker.store.inner_message import InnerMessage, tags_string_to_tags_code
from rocketmq_broker.store.results import PutMessageStatus
from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.codes import PermName, RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import ReplyMessageRequestHeader, SendMessageRequestHeader
from rocketmq_sdk.protocol.message_codec import decode_properties, encode_properties
from rocketmq_sdk.remoting import Channel, RemotingCommand
from rocketmq_sdk.remoting.channel import bad_input_log

from .requests import ACL_NONE, SLAVE_REFUSES_SEND, V2_GROUP_FIELDS, V2_TOPIC_FIELDS, handles
from .send_processor import topic_refusal

if TYPE_CHECKING:
    from .context import BrokerContext

log = logging.getLogger("rocketmq_broker.reply")

#: Java ``Broker2Client.callClient`` timeout, ms.
PUSH_REPLY_TIMEOUT_MS = 10_000
_STORED_OK = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
              PutMessageStatus.SLAVE_NOT_AVAILABLE)


class ReplyProcessor:
    """Handles codes 324 and 325 for a :class:`BrokerController`."""

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    # -- lookup -------------------------------------------------------------------------------
    def find_client_channel(self, client_id: str) -> Channel | None:
        """The open connection of ``client_id`` among producer connections (Java
        ``ProducerManager.findChannel``), then consumer ones."""
        b = self.broker
        for chans in list(b.producers.groups.values()):
            for ch, info in list(chans.items()):
                if info.client_id == client_id and not ch.closed:
                    return ch
        for g in list(b.consumers.groups.values()):
            for ch, info in list(g.channels.items()):
                if info.client_id == client_id and not ch.closed:
                    return ch
        return None

    # -- processing -----------------------------------------------------------------------------
    @handles(RequestCode.SEND_REPLY_MESSAGE, header=SendMessageRequestHeader, writes=True, acl=ACL_NONE,
             on_slave=SLAVE_REFUSES_SEND)
    @handles(RequestCode.SEND_REPLY_MESSAGE_V2, header=SendMessageRequestHeader, writes=True, acl=ACL_NONE,
             on_slave=SLAVE_REFUSES_SEND, topic_fields=V2_TOPIC_FIELDS, group_fields=V2_GROUP_FIELDS)
    async def process(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        if cmd.code == RequestCode.SEND_REPLY_MESSAGE_V2:
            h = SendMessageRequestHeader.from_v2(cmd.ext_fields)
        else:
            h = SendMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        b = self.broker
        topic = h.topic or ""
        refused = topic_refusal(cmd, topic)
        if refused is not None:
            return refused
        tc = b.topics.get(topic)
        if tc is None:
            tc = b.topics.create_in_send(topic, h.default_topic or "", h.default_topic_queue_nums or 4, 0)
            if tc is None:
                return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
            b.register_to_namesrv_soon()
        if not PermName.is_writeable(tc.perm):
            return cmd.response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        queue_id = h.queue_id if h.queue_id is not None else -1
        if queue_id < 0:
            queue_id = random.randrange(max(tc.write_queue_nums, 1))
        if queue_id >= max(tc.read_queue_nums, tc.write_queue_nums):
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"request queueId[{queue_id}] is illegal, {tc} Producer: {ch.remote_addr}")
        props = decode_properties(h.properties or "")
        push_ok, remark = await self._push(ch, h, cmd.body, props)
        ext = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
        if push_ok:
            ext.update(msgId="0", queueId=str(queue_id), queueOffset="0")
        if getattr(b.config, "store_reply_message_enable", True):
            stored = await self._store(ch, h, topic, queue_id, cmd.body, props)
            if stored is not None:  # Java fills these from the store even when the push failed
                ext.update(msgId=stored[0], queueId=str(queue_id), queueOffset=str(stored[1]))
        if not push_ok:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark, ext_fields=ext)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=ext)

    async def _push(self, ch: Channel, h: SendMessageRequestHeader, body: bytes,
                    props: dict[str, str]) -> tuple[bool, str]:
        """PUSH_REPLY_MESSAGE_TO_CLIENT to the requester; ``(ok, remark)``."""
        sender = props.get(MC.MESSAGE_REPLY_TO_CLIENT)
        if not sender:
            bad_input_log.warning("%s is null, can not reply message", MC.MESSAGE_REPLY_TO_CLIENT)
            return False, f"reply message properties[{MC.MESSAGE_REPLY_TO_CLIENT}] is null"
        target = self.find_client_channel(sender)
        if target is None:
            remark = f"push reply message fail, channel of <{sender}> not found."
            bad_input_log.warning("%s", remark)
            return False, remark
        push_props = {MC.PUSH_REPLY_TIME: str(int(time.time() * 1000))}
        push_props.update((k, v) for k, v in props.items() if k != MC.PUSH_REPLY_TIME)
        header = ReplyMessageRequestHeader(
            producer_group=h.producer_group, topic=h.topic, default_topic=h.default_topic,
            default_topic_queue_nums=h.default_topic_queue_nums, queue_id=h.queue_id, sys_flag=h.sys_flag,
            born_timestamp=h.born_timestamp, flag=h.flag, properties=encode_properties(push_props),
            reconsume_times=h.reconsume_times, unit_mode=bool(h.unit_mode),
            born_host=ch.remote_addr, store_host=self.broker.config.broker_addr,
            store_timestamp=int(time.time() * 1000))
        request = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header.to_ext_fields(), body)
        try:
            resp = await target.invoke(request, PUSH_REPLY_TIMEOUT_MS)
        except MQError as exc:
            log.warning("push reply message to <%s> fail: %s", sender, exc)
            return False, f"push reply message to {sender}fail."
        if resp.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s", sender, resp.remark)
            return False, f"push reply message to {sender}fail."
        return True, ""

    async def _store(self, ch: Channel, h: SendMessageRequestHeader, topic: str, queue_id: int, body: bytes,
                     props: dict[str, str]) -> tuple[str, int] | None:
        """Store the reply as sent (Java stores the request's properties string unchanged);
        ``(msgId, queueOffset)`` or None when the store refused it (logged, as Java)."""
        b = self.broker
        inner = InnerMessage(topic=topic, queue_id=queue_id, body=body, properties_string=h.properties or "",
                             flag=h.flag or 0, tags_code=tags_string_to_tags_code(props.get(MC.TAGS)),
                             sys_flag=h.sys_flag or 0, born_timestamp=h.born_timestamp or int(time.time() * 1000),
                             born_host=ch.remote_addr, store_host=b.config.broker_addr,
                             reconsume_times=h.reconsume_times or 0, properties=props)
        result = b.put_message(inner, schedule=False)
        if inspect.isawaitable(result):
            result = await result
        if result is None or result.status not in _STORED_OK or result.append_message_result is None:
            log.warning("process reply message, store put failed: %s", None if result is None else result.status)
            return None
        ar = result.append_message_result
        b.stats_put += ar.msg_num
        return ar.msg_id, ar.logics_offset
