"""The POP requests of one consumer group (RocketMQ 5.x, ../shared/docs/rocketmq5-remoting.md §5):
POP_MESSAGE, ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME on the client's loop, shared by
:class:`~rocketmq_sdk.consumer.simple_consumer.SimpleConsumer` and the POP mode of
:class:`~rocketmq_sdk.consumer.push_consumer.PushConsumer`."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from ..client.instance import MQClientInstance
from ..exceptions import MQBrokerError, broker_error
from ..protocol.bodies import SubscriptionData
from ..protocol.codes import PermName, RequestCode, ResponseCode
from ..protocol.message import MessageExt
from ..protocol.message_codec import decode_messages
from ..protocol.pop import (
    POP_CK,
    AckMessageRequestHeader,
    BatchAck,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
    ReceiptHandle,
    attach_handles,
    encode_batch_ack_body,
)
from ..remoting.command import RemotingCommand

__all__ = ["PopClient", "PopTarget"]

log = logging.getLogger("rocketmq_sdk.consumer.pop")

_NOTHING = frozenset({ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND, ResponseCode.NO_MESSAGE})


@dataclass(frozen=True, slots=True)
class PopTarget:
    """A broker serving a topic: where a pop goes."""

    topic: str
    broker_name: str
    addr: str


class PopClient:
    """POP requests of ``group`` through ``instance`` (call the coroutines on its loop).

    Args:
        instance: the client instance (routes, connections).
        group: the consumer group.
        timeout_ms: request timeout on top of a pop's poll time, ms.
    """

    def __init__(self, instance: MQClientInstance, group: str, timeout_ms: int) -> None:
        self.instance = instance
        self.group = group
        self.timeout_ms = timeout_ms
        #: brokers that answered BATCH_ACK_MESSAGE "not supported" (5.x before 5.1.4): one ACK each
        self._no_batch_ack: set[str] = set()

    async def targets(self, topics: list[str]) -> list[PopTarget]:
        """Every readable broker of every topic (routes looked up when unknown)."""
        inst = self.instance
        out = []
        for topic in sorted(topics):
            route = inst.routes.get(topic)
            if route is None:
                route = await inst.update_topic_route(topic)
            if route is None:
                continue
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
                if qd.perm & PermName.READ and qd.read_queue_nums > 0:
                    addr = await inst.find_broker_master_or_refresh(qd.broker_name, topic)
                    if addr is not None:
                        out.append(PopTarget(topic, qd.broker_name, addr))
        return out

    async def pop(self, target: PopTarget, sub: SubscriptionData, max_n: int, invisible_ms: int, poll_ms: int, *,
                  init_mode: int = 1, order: bool = False) -> list[MessageExt]:
        """POP_MESSAGE of every queue of ``target`` (``queueId`` -1); ``[]`` when nothing came
        within ``poll_ms``. Each message gets its receipt handle (``POP_CK``).

        Raises:
            MQBrokerError (``RequestCodeNotSupportedError`` from a 4.x broker), RemotingError.
        """
        header = PopMessageRequestHeader(
            consumer_group=self.group, topic=target.topic, queue_id=-1, max_msg_nums=max_n,
            invisible_time=invisible_ms, poll_time=poll_ms, born_time=int(time.time() * 1000), init_mode=init_mode,
            exp_type=sub.expression_type or "TAG", exp=sub.sub_string, order=order, bname=target.broker_name)
        cmd = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
        resp = await self.instance.remoting.invoke(target.addr, cmd, poll_ms + self.timeout_ms)
        if resp.code in _NOTHING:
            return []
        if resp.code == ResponseCode.POLLING_FULL:
            log.info("broker %s holds too many POP requests of %s; nothing received", target.addr, self.group)
            return []
        if resp.code != ResponseCode.SUCCESS:
            raise broker_error(resp.code, resp.remark, target.addr)
        msgs = decode_messages(resp.body)
        for m in msgs:
            m.broker_name = target.broker_name
        return attach_handles(msgs, resp.ext_fields, target.broker_name)

    async def _broker(self, handle: ReceiptHandle, topic: str) -> str:
        addr = await self.instance.find_broker_master_or_refresh(handle.broker_name, topic)
        if addr is None:
            raise MQBrokerError(-1, f"broker {handle.broker_name} not found")
        return addr

    async def ack(self, message: MessageExt, handle: ReceiptHandle) -> None:
        """ACK_MESSAGE of ``message`` (to the POP retry topic for a handle with a retry flag).

        Raises:
            MQBrokerError, RemotingError.
        """
        addr = await self._broker(handle, message.topic)
        header = AckMessageRequestHeader(consumer_group=self.group, topic=handle.topic_for_ack(self.group, message.topic),
                                         queue_id=handle.queue_id, extra_info=str(handle),
                                         offset=handle.queue_offset, bname=handle.broker_name)
        resp = await self.instance.remoting.invoke(addr, RemotingCommand.request(
            RequestCode.ACK_MESSAGE, header.to_ext_fields()), self.timeout_ms)
        if resp.code != ResponseCode.SUCCESS:
            raise broker_error(resp.code, resp.remark, addr)

    async def batch_ack(self, messages: list[tuple[MessageExt, ReceiptHandle]]) -> None:
        """BATCH_ACK_MESSAGE (200151): one request per broker for ``messages``, one body entry
        per checkpoint (retry flag, queue, start offset, pop time), as 5.x's
        ``BatchAckMessageRequestBody``. A broker without it (REQUEST_CODE_NOT_SUPPORTED) gets
        one ACK_MESSAGE per message, now and from then on.

        Raises:
            MQBrokerError, RemotingError.
        """
        by_broker: dict[str, dict[tuple, BatchAck]] = {}
        topics: dict[str, str] = {}
        for m, h in messages:
            entries = by_broker.setdefault(h.broker_name, {})
            topics.setdefault(h.broker_name, m.topic)
            key = (m.topic, h.retry_flag, h.queue_id, h.ck_offset, h.pop_time, h.revive_qid, h.invisible_time)
            entry = entries.get(key)
            if entry is None:
                entry = entries[key] = BatchAck(self.group, m.topic, h.retry_flag, h.queue_id, h.ck_offset,
                                                h.revive_qid, h.pop_time, h.invisible_time, [])
            entry.offsets.append(h.queue_offset)
        for broker_name, entries in by_broker.items():
            addr = await self.instance.find_broker_master_or_refresh(broker_name, topics[broker_name])
            if addr is None:
                raise MQBrokerError(-1, f"broker {broker_name} not found")
            if addr not in self._no_batch_ack:
                body = encode_batch_ack_body(list(entries.values()), broker_name)
                resp = await self.instance.remoting.invoke(addr, RemotingCommand.request(
                    RequestCode.BATCH_ACK_MESSAGE, {}, body), self.timeout_ms)
                if resp.code == ResponseCode.SUCCESS:
                    continue
                if resp.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                    raise broker_error(resp.code, resp.remark, addr)
                log.info("broker %s has no BATCH_ACK_MESSAGE: group %s acknowledges one message at a time there",
                         addr, self.group)
                self._no_batch_ack.add(addr)
            for m, h in messages:
                if h.broker_name == broker_name:
                    await self.ack(m, h)

    async def change_invisible_time(self, message: MessageExt, handle: ReceiptHandle, invisible_ms: int) -> None:
        """CHANGE_MESSAGE_INVISIBLETIME; the message's ``POP_CK`` becomes the new handle.

        Raises:
            MQBrokerError, RemotingError.
        """
        addr = await self._broker(handle, message.topic)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=self.group, topic=handle.topic_for_ack(self.group, message.topic), queue_id=handle.queue_id,
            extra_info=str(handle), offset=handle.queue_offset, invisible_time=invisible_ms, bname=handle.broker_name)
        resp = await self.instance.remoting.invoke(addr, RemotingCommand.request(
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields()), self.timeout_ms)
        if resp.code != ResponseCode.SUCCESS:
            raise broker_error(resp.code, resp.remark, addr)
        ext = resp.ext_fields
        new = handle.replace(ck_offset=handle.queue_offset, pop_time=int(ext["popTime"]),
                             invisible_time=int(ext["invisibleTime"]), revive_qid=int(ext["reviveQid"]))
        message.properties[POP_CK] = str(new)
