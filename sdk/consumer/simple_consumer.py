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
from typing import Any, Unpack

from ..config import ConsumerConfig, grpc_twin_wanted
from ..config_types import ConsumerSettings
from ..exceptions import ClientStateError, IllegalArgumentError, MQBrokerError
from ..protocol.bodies import SubscriptionData
from ..protocol.codes import ResponseCode
from ..protocol.message import MessageExt
from ..protocol.pop import (
    ReceiptHandle,
)
from .durations import MAX_INVISIBLE_DURATION_S, receive_args
from .durations import as_seconds as _seconds
from .durations import invisible_ms as _invisible_ms
from .pop_client import PopClient
from .pull_consumer import ActiveConsumerBase
from .selector import MessageSelector, resolve_selector

__all__ = ["MAX_INVISIBLE_DURATION_S", "SimpleConsumer"]

log = logging.getLogger("rocketmq_sdk.consumer.simple")

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
        protocol: ``"remoting"`` (default) or ``"grpc"``: the same API over RocketMQ 5's gRPC API
            to a proxy given as ``endpoints="host:port"`` (or a ``grpc://`` address); the object is
            then a :class:`~rocketmq_sdk.consumer.grpc_simple_consumer.GrpcSimpleConsumer`.

    Raises:
        IllegalArgumentError: bad group name or settings.
    """

    def __new__(cls, group: str = "", namesrv_addr: str | None = None, *args: Any, protocol: str = "remoting",
                **kwargs: Any) -> Any:
        # protocol="grpc" (or a grpc:// address): the same API over RocketMQ 5's gRPC API
        if grpc_twin_wanted(cls, SimpleConsumer, protocol, namesrv_addr):
            from .grpc_simple_consumer import GrpcSimpleConsumer
            return GrpcSimpleConsumer(group, namesrv_addr, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, group: str, namesrv_addr: str | None = None, *,
                 await_duration: float | datetime.timedelta = 5.0, orderly: bool = False,
                 protocol: str = "remoting", **config: Unpack[ConsumerSettings]) -> None:
        super().__init__(group, ConsumerConfig.from_kwargs(namesrv_addr=namesrv_addr, **config))
        wait = _seconds(await_duration, "await_duration")
        if wait < 0:
            raise IllegalArgumentError(f"await_duration must be >= 0 s, got {wait}")
        self.await_duration_ms = int(wait * 1000)
        self.orderly = orderly
        self._rr = itertools.count()
        self._acked: OrderedDict[str, None] = OrderedDict()
        self._pop: PopClient | None = None

    # -------------------------------------------------------------- subscriptions

    def subscribe(self, topic: str, filter_expression: str | MessageSelector = "*") -> None:
        """Receive messages of ``topic`` whose tag matches ``filter_expression`` (``"*"`` or
        ``"TagA || TagB"``), or that a SQL92 selector over their properties selects
        (``MessageSelector.by_sql("a > 5 AND TAGS = 'x'")``, Java 5.x ``FilterExpression`` of type
        SQL92: the broker evaluates it, and must have ``enablePropertyFilter=true``, else
        :meth:`receive` raises ``MQBrokerError`` "The broker does not support consumer to filter
        message by SQL92"; an expression that does not compile: code 23
        SUBSCRIPTION_PARSE_FAILED). May be called before or after :meth:`start`.

        Raises:
            IllegalArgumentError: bad topic name or tag expression.
        """
        from ..protocol.codes import TOPIC_MAX_LENGTH, check_name
        check_name(topic, "topic", TOPIC_MAX_LENGTH)
        expression, expression_type = resolve_selector(filter_expression)
        try:
            sub = SubscriptionData.build(topic, expression or "*", int(time.time() * 1000), expression_type)
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
        return receive_args(self.group, bool(self.subscriptions), max_message_num, invisible_duration)

    def _pop_client(self) -> PopClient:
        pc = self._pop
        if pc is None or pc.instance is not self._client:
            pc = self._pop = PopClient(self.instance, self.group, self.config.mq_client_api_timeout)
        return pc

    async def _receive(self, max_n: int, invisible_ms: int) -> list[MessageExt]:
        pc = self._pop_client()
        targets = await pc.targets(list(self.subscriptions))
        if not targets:
            raise MQBrokerError(ResponseCode.TOPIC_NOT_EXIST,
                                f"no readable broker for {', '.join(sorted(self.subscriptions))}")
        target = targets[next(self._rr) % len(targets)]
        init_mode = 0 if self.config.consume_from_where.name == "CONSUME_FROM_FIRST_OFFSET" else 1
        return await pc.pop(target, self.subscriptions[target.topic], max_n, invisible_ms, self.await_duration_ms,
                            init_mode=init_mode, order=self.orderly)

    async def _on_loop(self, coro):
        inst = self._client
        if inst is None or not self.running:
            coro.close()
            raise ClientStateError(f"consumer {self.group} is not started")
        return await asyncio.wrap_future(inst.loop_thread.submit(coro))

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

    def ack(self, message: MessageExt | list[MessageExt] | tuple[MessageExt, ...]) -> None:
        """Acknowledge a received message, or several: they will not be delivered again.
        Acknowledging after the invisible duration passed is accepted by the broker but may be
        too late: the message may already have been delivered again.

        One message: ACK_MESSAGE, whose refusal is raised. Several (a list or tuple): one
        BATCH_ACK_MESSAGE per broker (5.x ``BatchAckMessageRequestBody``, as the 5.x proxy and
        ``PushConsumer(pop=True)`` acknowledge), one ACK_MESSAGE per message on a broker without
        it (before 5.1.4); a 5.x broker answers a batch as a whole, so an offset that is no
        longer in its queue is not reported then.

        Raises:
            IllegalArgumentError: not a received message, already acknowledged here, twice in
                the list, or an empty list (nothing is sent then).
            ClientStateError: not started. MQBrokerError (e.g. NO_MESSAGE 208: the offset is no
            longer in its queue), RemotingError.
        """
        pairs = self._ack_pairs(message)
        self.instance.run(self._ack(pairs), self._timeout_s())
        for _m, handle in pairs:
            self._remember_acked(handle)

    async def ack_async(self, message: MessageExt | list[MessageExt] | tuple[MessageExt, ...]) -> None:
        """:meth:`ack` for asyncio code."""
        pairs = self._ack_pairs(message)
        await self._on_loop(self._ack(pairs))
        for _m, handle in pairs:
            self._remember_acked(handle)

    def _ack_pairs(self, message: MessageExt | list[MessageExt] | tuple[MessageExt, ...]
                   ) -> list[tuple[MessageExt, ReceiptHandle]]:
        msgs = list(message) if isinstance(message, (list, tuple)) else [message]
        if not msgs:
            raise IllegalArgumentError("nothing to acknowledge: the list of messages is empty")
        pairs, seen = [], set()
        for m in msgs:
            handle = self._handle(m)
            self._check_not_acked(handle)
            if str(handle) in seen:
                raise IllegalArgumentError(f"message at {handle.queue_id}:{handle.queue_offset} is twice in the list")
            seen.add(str(handle))
            pairs.append((m, handle))
        return pairs

    async def _ack(self, pairs: list[tuple[MessageExt, ReceiptHandle]]) -> None:
        pc = self._pop_client()
        if len(pairs) == 1:
            await pc.ack(*pairs[0])
        else:
            await pc.batch_ack(pairs)

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
        self.instance.run(self._pop_client().change_invisible_time(message, handle, ms), self._timeout_s())

    async def change_invisible_duration_async(self, message: MessageExt,
                                              invisible_duration: float | datetime.timedelta) -> None:
        """:meth:`change_invisible_duration` for asyncio code."""
        handle = self._handle(message)
        self._check_not_acked(handle)
        await self._on_loop(self._pop_client().change_invisible_time(message, handle, _invisible_ms(invisible_duration)))

