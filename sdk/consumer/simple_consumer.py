"""``SimpleConsumer``: RocketMQ 5.x stateless (POP) consumption over the remoting protocol.

As the 5.x client API's ``SimpleConsumer``: the application subscribes topics, calls
:meth:`SimpleConsumer.receive` for up to 32 messages at a time, and acknowledges each with
:meth:`SimpleConsumer.ack` within its invisible duration; a message not acknowledged in time is
delivered again (to any consumer of the group) with ``reconsume_times`` + 1. There is no
rebalance: any number of consumers share the queues, more consumers than queues included.

On the wire: POP_MESSAGE (200050, ``queueId`` -1: every queue of one broker), ACK_MESSAGE
(200051), CHANGE_MESSAGE_INVISIBLETIME (200053) with the receipt handle of each message
(``POP_CK``, see :mod:`rocketmq_sdk.protocol.pop`). It needs a 5.x broker: a 4.x one answers
REQUEST_CODE_NOT_SUPPORTED, raised as :class:`~rocketmq_sdk.exceptions.RequestCodeNotSupportedError`.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import logging
import time
from collections import OrderedDict
from typing import Unpack

from ..config import ConsumerConfig
from ..config_types import ConsumerSettings
from ..exceptions import ClientStateError, IllegalArgumentError, MQBrokerError, broker_error
from ..protocol.bodies import SubscriptionData
from ..protocol.codes import PermName, RequestCode, ResponseCode
from ..protocol.message import MessageExt
from ..protocol.message_codec import decode_messages
from ..protocol.pop import (
    MAX_POP_MESSAGES,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
    ReceiptHandle,
    attach_handles,
)
from ..remoting.command import RemotingCommand
from .pull_consumer import ActiveConsumerBase

__all__ = ["MAX_INVISIBLE_DURATION_S", "SimpleConsumer"]

log = logging.getLogger("rocketmq_sdk.consumer.simple")

#: longest invisible duration a broker accepts, seconds (12 h, the 5.x proxy's maximum)
MAX_INVISIBLE_DURATION_S = 12 * 3600.0
_NOTHING = frozenset({ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND, ResponseCode.NO_MESSAGE})


def _seconds(value: float | datetime.timedelta, what: str) -> float:
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise IllegalArgumentError(f"{what} must be seconds (int/float) or a timedelta, got {value!r}")
    return float(value)


def _invisible_ms(value: float | datetime.timedelta) -> int:
    s = _seconds(value, "invisible_duration")
    if not 0 < s <= MAX_INVISIBLE_DURATION_S:
        raise IllegalArgumentError(f"invisible_duration must be in (0, {MAX_INVISIBLE_DURATION_S:.0f}] s, got {s}")
    return max(1, int(s * 1000))


class SimpleConsumer(ActiveConsumerBase):
    """Receive, acknowledge, change invisibility: the 5.x ``SimpleConsumer`` on remoting.

    Args:
        group: consumer group.
        namesrv_addr: name server list ``"host:port;host:port"``.
        await_duration: how long a :meth:`receive` that finds nothing waits for messages on the
            broker (long polling), seconds or ``timedelta``; 0 answers at once. Default 5 s.
        orderly: orderly POP (``order=true``): a queue's messages are handed out in order, and
            the queue stays blocked for the group until they are acknowledged or their
            invisible duration passes (then the same messages come again). Default False.
        **config: any :class:`~rocketmq_sdk.config.ConsumerConfig` setting
            (``consume_from_where`` decides where a new group starts: last offset by default).

    Raises:
        IllegalArgumentError: bad group name or settings.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *,
                 await_duration: float | datetime.timedelta = 5.0, orderly: bool = False,
                 **config: Unpack[ConsumerSettings]) -> None:
        super().__init__(group, ConsumerConfig.from_kwargs(namesrv_addr=namesrv_addr, **config))
        wait = _seconds(await_duration, "await_duration")
        if wait < 0:
            raise IllegalArgumentError(f"await_duration must be >= 0 s, got {wait}")
        self.await_duration_ms = int(wait * 1000)
        self.orderly = orderly
        self._rr = itertools.count()
        self._acked: OrderedDict[str, None] = OrderedDict()

    # -------------------------------------------------------------- subscriptions

    def subscribe(self, topic: str, filter_expression: str = "*") -> None:
        """Receive messages of ``topic`` whose tag matches ``filter_expression`` (``"*"`` or
        ``"TagA || TagB"``). May be called before or after :meth:`start`.

        Raises:
            IllegalArgumentError: bad topic name or expression.
        """
        from ..protocol.codes import TOPIC_MAX_LENGTH, check_name
        check_name(topic, "topic", TOPIC_MAX_LENGTH)
        try:
            sub = SubscriptionData.build(topic, filter_expression or "*", int(time.time() * 1000))
        except ValueError as exc:
            raise IllegalArgumentError(f"bad filter expression {filter_expression!r}: {exc}") from None
        self.subscriptions[topic] = sub
        if self.running:
            self.instance.run(self.instance.update_topic_route(topic), self._timeout_s())

    def unsubscribe(self, topic: str) -> None:
        """Stop receiving ``topic``."""
        self.subscriptions.pop(topic, None)

    # -------------------------------------------------------------- receive

    def receive(self, max_message_num: int = 16, invisible_duration: float | datetime.timedelta = 30.0
                ) -> list[MessageExt]:
        """Up to ``max_message_num`` messages of one subscribed topic (topics and brokers taken in
        turn), invisible to the group for ``invisible_duration``; waits up to ``await_duration``
        when there are none (then returns ``[]``). Each message carries its receipt handle
        (:attr:`MessageExt.receipt_handle`) for :meth:`ack` / :meth:`change_invisible_duration`.

        Args:
            max_message_num: 1..32.
            invisible_duration: seconds (or ``timedelta``), > 0 and ≤ 12 h.

        Raises:
            IllegalArgumentError: a value out of range, or no subscription.
            ClientStateError: not started.
            RequestCodeNotSupportedError: the broker is not a 5.x broker (no POP).
            MQBrokerError: another refusal (e.g. TOPIC_NOT_EXIST); RemotingError.
        """
        coro = self._receive(*self._receive_args(max_message_num, invisible_duration))
        return self.instance.run(coro, self._timeout_s() + self.await_duration_ms / 1000.0)

    async def receive_async(self, max_message_num: int = 16,
                            invisible_duration: float | datetime.timedelta = 30.0) -> list[MessageExt]:
        """:meth:`receive` for asyncio code: waits on the caller's loop without blocking it."""
        return await self._on_loop(self._receive(*self._receive_args(max_message_num, invisible_duration)))

    def _receive_args(self, max_message_num: int, invisible_duration: float | datetime.timedelta) -> tuple[int, int]:
        if isinstance(max_message_num, bool) or not isinstance(max_message_num, int) \
                or not 0 < max_message_num <= MAX_POP_MESSAGES:
            raise IllegalArgumentError(f"max_message_num must be 1..{MAX_POP_MESSAGES}, got {max_message_num!r}")
        ms = _invisible_ms(invisible_duration)
        if not self.subscriptions:
            raise IllegalArgumentError(f"consumer {self.group} has no subscription: call subscribe() first")
        return max_message_num, ms

    async def _on_loop(self, coro):
        inst = self._client
        if inst is None or not self.running:
            coro.close()
            raise ClientStateError(f"consumer {self.group} is not started")
        return await asyncio.wrap_future(inst.loop_thread.submit(coro))

    async def _targets(self) -> list[tuple[str, str, str]]:
        """(topic, broker name, master address) of every readable broker of every subscription."""
        inst = self.instance
        out = []
        for topic in sorted(self.subscriptions):
            route = inst.routes.get(topic)
            if route is None:
                route = await inst.update_topic_route(topic)
            if route is None:
                continue
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
                if qd.perm & PermName.READ and qd.read_queue_nums > 0:
                    addr = await inst.find_broker_master_or_refresh(qd.broker_name, topic)
                    if addr is not None:
                        out.append((topic, qd.broker_name, addr))
        return out

    async def _receive(self, max_n: int, invisible_ms: int) -> list[MessageExt]:
        targets = await self._targets()
        if not targets:
            raise MQBrokerError(ResponseCode.TOPIC_NOT_EXIST,
                                f"no readable broker for {', '.join(sorted(self.subscriptions))}")
        topic, broker_name, addr = targets[next(self._rr) % len(targets)]
        sub = self.subscriptions[topic]
        header = PopMessageRequestHeader(
            consumer_group=self.group, topic=topic, queue_id=-1, max_msg_nums=max_n, invisible_time=invisible_ms,
            poll_time=self.await_duration_ms, born_time=int(time.time() * 1000),
            init_mode=0 if self.config.consume_from_where.name == "CONSUME_FROM_FIRST_OFFSET" else 1,
            exp_type=sub.expression_type or "TAG", exp=sub.sub_string, order=self.orderly, bname=broker_name)
        cmd = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
        resp = await self.instance.remoting.invoke(addr, cmd, self.await_duration_ms + self.config.mq_client_api_timeout)
        if resp.code in _NOTHING:
            return []
        if resp.code == ResponseCode.POLLING_FULL:
            log.info("broker %s holds too many POP requests of %s; nothing received", addr, self.group)
            return []
        if resp.code != ResponseCode.SUCCESS:
            raise broker_error(resp.code, resp.remark, addr)
        msgs = decode_messages(resp.body)
        for m in msgs:
            m.broker_name = broker_name
        return attach_handles(msgs, resp.ext_fields, broker_name)

    # -------------------------------------------------------------- ack / change invisibility

    def _handle(self, message: MessageExt) -> ReceiptHandle:
        text = getattr(message, "receipt_handle", None)
        if not text:
            raise IllegalArgumentError("the message has no receipt handle: only messages returned by receive() "
                                       "can be acknowledged")
        try:
            return ReceiptHandle.parse(text)
        except ValueError as exc:
            raise IllegalArgumentError(f"bad receipt handle: {exc}") from None

    def _check_not_acked(self, handle: ReceiptHandle) -> None:
        if str(handle) in self._acked:
            raise IllegalArgumentError(f"message at {handle.queue_id}:{handle.queue_offset} was already acknowledged "
                                       f"by this consumer")

    def _remember_acked(self, handle: ReceiptHandle) -> None:
        self._acked[str(handle)] = None
        while len(self._acked) > 65536:
            self._acked.popitem(last=False)

    def ack(self, message: MessageExt) -> None:
        """Acknowledge a received message: it will not be delivered again. Acknowledging after
        the invisible duration passed is accepted by the broker but may be too late: the
        message may already have been delivered again.

        Raises:
            IllegalArgumentError: not a received message, or already acknowledged here.
            ClientStateError: not started. MQBrokerError (e.g. NO_MESSAGE 208: the offset is no
            longer in its queue), RemotingError.
        """
        handle = self._handle(message)
        self._check_not_acked(handle)
        self.instance.run(self._ack(message, handle), self._timeout_s())
        self._remember_acked(handle)

    async def ack_async(self, message: MessageExt) -> None:
        """:meth:`ack` for asyncio code."""
        handle = self._handle(message)
        self._check_not_acked(handle)
        await self._on_loop(self._ack(message, handle))
        self._remember_acked(handle)

    async def _broker(self, handle: ReceiptHandle, topic: str) -> str:
        addr = await self.instance.find_broker_master_or_refresh(handle.broker_name, topic)
        if addr is None:
            raise MQBrokerError(-1, f"broker {handle.broker_name} not found")
        return addr

    async def _ack(self, message: MessageExt, handle: ReceiptHandle) -> None:
        addr = await self._broker(handle, message.topic)
        header = AckMessageRequestHeader(consumer_group=self.group, topic=handle.topic_for_ack(self.group, message.topic),
                                         queue_id=handle.queue_id, extra_info=str(handle),
                                         offset=handle.queue_offset, bname=handle.broker_name)
        resp = await self.instance.remoting.invoke(addr, RemotingCommand.request(
            RequestCode.ACK_MESSAGE, header.to_ext_fields()), self.config.mq_client_api_timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise broker_error(resp.code, resp.remark, addr)

    def change_invisible_duration(self, message: MessageExt, invisible_duration: float | datetime.timedelta) -> None:
        """Make ``message`` invisible for ``invisible_duration`` from now (longer or shorter;
        "consume later" with a short one). The message's receipt handle is replaced by the new
        one: acknowledge the message object afterwards as usual.

        Raises:
            IllegalArgumentError: not a received message, already acknowledged, or a duration
                out of (0, 12 h].
            ClientStateError, MQBrokerError, RemotingError: as :meth:`ack`.
        """
        handle = self._handle(message)
        self._check_not_acked(handle)
        ms = _invisible_ms(invisible_duration)
        self.instance.run(self._change(message, handle, ms), self._timeout_s())

    async def change_invisible_duration_async(self, message: MessageExt,
                                              invisible_duration: float | datetime.timedelta) -> None:
        """:meth:`change_invisible_duration` for asyncio code."""
        handle = self._handle(message)
        self._check_not_acked(handle)
        await self._on_loop(self._change(message, handle, _invisible_ms(invisible_duration)))

    async def _change(self, message: MessageExt, handle: ReceiptHandle, invisible_ms: int) -> None:
        addr = await self._broker(handle, message.topic)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=self.group, topic=handle.topic_for_ack(self.group, message.topic), queue_id=handle.queue_id,
            extra_info=str(handle), offset=handle.queue_offset, invisible_time=invisible_ms, bname=handle.broker_name)
        resp = await self.instance.remoting.invoke(addr, RemotingCommand.request(
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields()), self.config.mq_client_api_timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise broker_error(resp.code, resp.remark, addr)
        ext = resp.ext_fields
        new = handle.replace(ck_offset=handle.queue_offset, pop_time=int(ext["popTime"]),
                             invisible_time=int(ext["invisibleTime"]), revive_qid=int(ext["reviveQid"]))
        message.properties["POP_CK"] = str(new)
