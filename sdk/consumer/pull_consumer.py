"""``PullConsumer``: the application chooses queues and offsets and pulls itself (Java
``DefaultMQPullConsumer``).

Nothing is pulled in the background: :meth:`PullConsumer.pull` sends one PULL_MESSAGE to the
queue's broker (optionally a long poll the broker holds up to ``broker_suspend_max_time`` ms
until messages arrive) and returns a :class:`~rocketmq_sdk.protocol.message.PullResult` whose
messages are filtered by exact tag. Offsets are the application's business: it may keep them
in the group's offset store (:meth:`update_consume_offset`, persisted to the broker every
``persist_consumer_offset_interval`` ms and at shutdown, or to the local file in BROADCASTING)
and read them back with :meth:`fetch_consume_offset`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Unpack

from ..client.route import subscribe_queues_from_route
from ..config import ConsumerConfig
from ..config_types import ConsumerSettings
from ..exceptions import IllegalArgumentError, MQBrokerError, TopicNotExistError
from ..protocol.bodies import ConsumerData, ConsumeType, SubscriptionData
from ..protocol.codes import PullSysFlag
from ..protocol.message import MessageQueue, PullResult
from .base import ConsumerBase
from .offset_store import ReadOffsetType
from .pull_result import process_pull_result, pull_header, pull_once
from .selector import MessageSelector, resolve_selector

__all__ = ["ActiveConsumerBase", "PullConsumer"]

log = logging.getLogger("rocketmq_sdk.consumer.pull")


class ActiveConsumerBase(ConsumerBase):
    """What the pull and lite-pull consumers (Java ``CONSUME_ACTIVELY`` consumers) share beyond
    :class:`~rocketmq_sdk.consumer.base.ConsumerBase`: the topics announced in heartbeats and the
    queue / offset look-ups. Registered in the client instance so the brokers list it in the
    group (heartbeats) and its offsets are persisted every ``persist_consumer_offset_interval``
    ms.

    Attributes:
        subscriptions: topic → subscription announced in the heartbeats (Java
            ``registerTopics``; the lite-pull consumer's subscribed or assigned topics).
    """

    consume_type = ConsumeType.CONSUME_ACTIVELY

    def __init__(self, group: str, config: ConsumerConfig) -> None:
        super().__init__(group, config)
        self.subscriptions: dict[str, SubscriptionData] = {}

    async def _start_async(self) -> None:
        await super()._start_async()
        await self.instance.send_heartbeat_to_all()

    # -------------------------------------------------------------- ConsumerInner

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, self.consume_type, self.config.message_model,
                            self.config.consume_from_where, list(self.subscriptions.values()))

    def subscribed_topics(self) -> list[str]:
        return list(self.subscriptions)

    # -------------------------------------------------------------- look-ups

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted (Java ``fetchSubscribeMessageQueues``): the
        route is fetched from the name server now. Blocks up to ``mq_client_api_timeout`` + 1 s.

        Raises:
            TopicNotExistError: the name server knows no such topic.
            ClientStateError: not started. RemotingError: no name server answered.
        """
        async def fetch() -> list[MessageQueue]:
            route = await self.instance.update_topic_route(topic)
            if route is None:
                raise TopicNotExistError(17, f"topic {topic} does not exist")
            return subscribe_queues_from_route(topic, route)
        return self.instance.run(fetch(), self._timeout_s())

    async def _addr(self, mq: MessageQueue) -> str:
        addr = await self.instance.find_broker_master_or_refresh(mq.broker_name, mq.topic)
        if addr is None:
            raise MQBrokerError(-1, f"broker {mq.broker_name} not found")
        return addr

    def _queue_call(self, mq: MessageQueue, name: str, *args: Any) -> int:
        async def call() -> int:
            return await getattr(self.instance.api, name)(await self._addr(mq), mq, *args)
        return self.instance.run(call(), self._timeout_s())

    def max_offset(self, mq: MessageQueue) -> int:
        """The queue's max offset: the offset the next stored message gets (GET_MAX_OFFSET to
        the queue's master; Java ``maxOffset``).

        Raises:
            ClientStateError: not started. MQBrokerError (``code`` -1: broker not in the route),
            RemotingError.
        """
        return self._queue_call(mq, "get_max_offset")

    def min_offset(self, mq: MessageQueue) -> int:
        """The queue's min offset: the oldest message still stored (GET_MIN_OFFSET; Java
        ``minOffset``). Raises as :meth:`max_offset`."""
        return self._queue_call(mq, "get_min_offset")

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The offset of the message stored nearest ``timestamp_ms`` (epoch ms;
        SEARCH_OFFSET_BY_TIMESTAMP; Java ``searchOffset``). Raises as :meth:`max_offset`."""
        return self._queue_call(mq, "search_offset", timestamp_ms)

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        """Record ``offset`` (the next offset to consume) for ``mq`` in the group's offset store
        (Java ``updateConsumeOffset``): memory only, thread-safe, no round trip; persisted every
        ``persist_consumer_offset_interval`` ms (5000) and at :meth:`shutdown`, to the brokers
        (CLUSTERING) or the local offsets file (BROADCASTING).

        Raises:
            ClientStateError: not started.
        """
        self.offset_store.update_offset(mq, offset, increase_only=False)

    def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        """The group's offset of ``mq`` (Java ``fetchConsumeOffset``): with ``from_store`` read
        from the broker (QUERY_CONSUMER_OFFSET) or the offsets file, else from memory and, when
        memory has none, from the store. -1 when the group has none, -2 when the broker lookup
        failed.

        Raises:
            ClientStateError: not started.
        """
        kind = ReadOffsetType.READ_FROM_STORE if from_store else ReadOffsetType.MEMORY_FIRST_THEN_STORE
        return self.instance.run(self.offset_store.read_offset(mq, kind), self._timeout_s())


class PullConsumer(ActiveConsumerBase):
    """Pull messages from queues the application chooses (Java ``DefaultMQPullConsumer``).

    Nothing runs in the background but the client's routes, heartbeats and the periodic offset
    persist: every :meth:`pull` is one request the calling thread waits for. Typical use::

        consumer = PullConsumer("my-group", "127.0.0.1:9876")
        consumer.start()
        for mq in consumer.fetch_subscribe_message_queues("orders"):
            offset = max(consumer.fetch_consume_offset(mq), 0)
            result = consumer.pull(mq, "*", offset, 32)
            for msg in result.msg_found_list:
                handle(msg)
            consumer.update_consume_offset(mq, result.next_begin_offset)
        consumer.shutdown()                          # persists the offsets

    The methods are thread-safe (one thread per queue is the usual shape); they block the
    calling thread and must not be called on the client's I/O loop thread.

    Args:
        group: consumer group (``^[%|a-zA-Z0-9_-]+$``, ≤ 255 characters).
        namesrv_addr: name server list ``"host:port;host:port"``.
        **config: :class:`~rocketmq_sdk.config.ConsumerConfig` settings (``message_model``:
            CLUSTERING keeps offsets on the brokers, BROADCASTING in
            ``local_offset_store_dir``; ``instance_name``; ``persist_consumer_offset_interval``
            ms...).

    Raises:
        IllegalArgumentError: illegal group name or unknown setting.
    """

    #: broker hold time of a blocking pull, ms (Java ``brokerSuspendMaxTimeMillis``).
    broker_suspend_max_time = 20_000
    #: client timeout of a blocking pull, ms (Java ``consumerTimeoutMillisWhenSuspend``).
    consumer_timeout_when_suspend = 30_000
    #: client timeout of a non-blocking pull, ms (Java ``consumerPullTimeoutMillis``).
    consumer_pull_timeout = 10_000

    def __init__(self, group: str, namesrv_addr: str | None = None, **config: Unpack[ConsumerSettings]) -> None:
        super().__init__(group, ConsumerConfig.from_kwargs(namesrv_addr=namesrv_addr, **config))

    def pull(self, mq: MessageQueue, expression: str | MessageSelector | None, offset: int, max_nums: int, *,
             block: bool = False, timeout_ms: int | None = None) -> PullResult:
        """PULL_MESSAGE of up to ``max_nums`` messages of ``mq`` from ``offset``, sent to the
        broker the queue's previous answer suggested (``suggestWhichBrokerId``: the master
        first, its slave while the master suggests it; the master when the suggested broker is
        not in the route), as Java's ``PullAPIWrapper``.

        Args:
            mq: the queue.
            expression: tag expression (``*``, ``TagA || TagB``); the result holds only messages
                with one of the tags (the broker filters by tag hash, this by exact tag). Or a
                :class:`~rocketmq_sdk.consumer.selector.MessageSelector`; ``by_sql`` selectors
                are evaluated by the broker (``enablePropertyFilter``).
            offset: first offset wanted.
            max_nums: at most this many messages (1..1024 sensible; the broker caps it).
            block: long poll: the broker holds the request up to ``broker_suspend_max_time`` ms
                when no message is there (Java ``pullBlockIfNotFound``).
            timeout_ms: client timeout (default 30000 blocking, 10000 otherwise).

        Returns:
            ``PullResult``: FOUND (messages), NO_NEW_MSG, NO_MATCHED_MSG or OFFSET_ILLEGAL, with
            ``next_begin_offset`` and the queue's min/max offsets.

        Raises:
            IllegalArgumentError: illegal arguments. MQBrokerError, RemotingError.
        """
        sub, header, timeout = self._pull_request(mq, expression, offset, max_nums, block, timeout_ms)
        inst = self.instance
        result = inst.run(pull_once(inst, self._pull_nodes, mq, header, timeout), timeout / 1000.0 + 1.0)
        process_pull_result(result, mq, sub)
        return result

    def pull_raw(self, mq: MessageQueue, expression: str | MessageSelector | None, offset: int, max_nums: int, *,
                 timeout_ms: int | None = None) -> tuple[PullResult, bytes]:
        """:meth:`pull` (not blocking) with the records left encoded, for readers that decode
        them their own way (the Spark source fills Arrow columns from them).

        Returns:
            ``(result, body)``: the ``PullResult`` with an empty ``msg_found_list``, and the
            body: FOUND's back-to-back stored records (docs/protocol.md §4.5) as the broker sent
            them, ``b""`` for the other statuses. They are not filtered by exact tag (the broker
            filters by tag hash only) and bodies stored compressed are still compressed
            (``message_codec.decode_messages`` decodes them as :meth:`pull` does).

        Raises:
            IllegalArgumentError: illegal arguments. MQBrokerError, RemotingError.
        """
        return self.pull_raw_many(mq, expression, [offset], max_nums, timeout_ms=timeout_ms)[0]

    def pull_raw_many(self, mq: MessageQueue, expression: str | MessageSelector | None, offsets: Sequence[int],
                      max_nums: int, *, timeout_ms: int | None = None) -> list[tuple[PullResult, bytes]]:
        """:meth:`pull_raw` from each of ``offsets``, all PULL_MESSAGE requests in flight at
        once (one round trip for a reader that knows the offsets it wants next).

        Returns:
            One ``(result, body)`` per offset, in the order of ``offsets``.

        Raises:
            IllegalArgumentError: illegal arguments. MQBrokerError, RemotingError: one of the
                pulls failed (the others' answers are dropped).
        """
        requests = [self._pull_request(mq, expression, offset, max_nums, False, timeout_ms) for offset in offsets]
        inst, nodes = self.instance, self._pull_nodes

        async def pull_once_raw(header: Any, timeout: int) -> tuple[PullResult, bytes]:
            addr = await nodes.address(inst, mq, header)
            result, body = await inst.api.pull_message_raw(addr, header, timeout)
            nodes.update(mq, result.suggest_which_broker_id)
            return result, body

        async def pull_all() -> list[tuple[PullResult, bytes]]:
            return list(await asyncio.gather(*(pull_once_raw(header, timeout) for _, header, timeout in requests)))

        return inst.run(pull_all(), max((t for _, _, t in requests), default=0) / 1000.0 + 1.0)

    def _pull_request(self, mq: MessageQueue, expression: str | MessageSelector | None, offset: int, max_nums: int,
                      block: bool, timeout_ms: int | None) -> tuple[SubscriptionData, Any, int]:
        """(subscription, PULL_MESSAGE header, client timeout ms) of one pull (see :meth:`pull`)."""
        if offset < 0 or max_nums <= 0:
            raise IllegalArgumentError("offset must be ≥ 0 and max_nums > 0")
        expression, expression_type = resolve_selector(expression)
        sub = SubscriptionData.build(mq.topic, expression, 0, expression_type)
        if mq.topic not in self.subscriptions:
            self.subscriptions[mq.topic] = SubscriptionData.build(mq.topic, "*", 0)
        timeout = timeout_ms or (self.consumer_timeout_when_suspend if block else self.consumer_pull_timeout)
        header = pull_header(self.group, mq, sub, offset, max_nums, sys_flag=PullSysFlag.build(False, block, True),
                             suspend_timeout_ms=self.broker_suspend_max_time if block else 0, sub_version=0)
        return sub, header, timeout

    def pull_block_if_not_found(self, mq: MessageQueue, expression: str | MessageSelector | None, offset: int,
                                max_nums: int) -> PullResult:
        """Java ``pullBlockIfNotFound``: :meth:`pull` with ``block=True``."""
        return self.pull(mq, expression, offset, max_nums, block=True)

    def __repr__(self) -> str:
        return f"PullConsumer(group={self.group!r}, state={self.state.name})"
