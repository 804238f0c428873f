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

import logging
import threading
from typing import Any, Unpack

from ..aio import AsyncLifecycle
from ..client.instance import MQClientInstance, get_client_instance, release_client_instance
from ..client.route import subscribe_queues_from_route
from ..config import ConsumerConfig
from ..config_types import ConsumerSettings
from ..exceptions import ClientStateError, IllegalArgumentError, MQBrokerError, MQError, TopicNotExistError
from ..protocol.bodies import ConsumerData, ConsumeType, MessageModel, SubscriptionData
from ..protocol.codes import GROUP_MAX_LENGTH, PullSysFlag, check_name
from ..protocol.codes import MessageConst as MC
from ..protocol.headers import PullMessageRequestHeader
from ..protocol.message import MessageQueue, PullResult, PullStatus
from .offset_store import LocalFileOffsetStore, ReadOffsetType, RemoteBrokerOffsetStore
from .pull_node import PullFromWhichNode
from .selector import MessageSelector, resolve_selector

__all__ = ["ActiveConsumerBase", "PullConsumer"]

log = logging.getLogger("rocketmq_sdk.consumer.pull")


class ActiveConsumerBase(AsyncLifecycle):
    """Lifecycle, offset store and queue/offset look-ups shared by the pull and lite-pull
    consumers (Java ``CONSUME_ACTIVELY`` consumers). Registered in the client instance so the
    brokers list it in the group (heartbeats) and its offsets are persisted periodically."""

    consume_type = ConsumeType.CONSUME_ACTIVELY

    def __init__(self, group: str, config: ConsumerConfig) -> None:
        self.group = check_name(group, "consumer group", GROUP_MAX_LENGTH)
        self.config = config
        self.subscriptions: dict[str, SubscriptionData] = {}
        self._instance: MQClientInstance | None = None
        self.offset_store: RemoteBrokerOffsetStore | LocalFileOffsetStore | None = None
        #: the broker id each queue is pulled from next (the answers' ``suggestWhichBrokerId``)
        self._pull_nodes = PullFromWhichNode()
        self._state_lock = threading.Lock()
        self._state = "CREATED"

    @property
    def clustering(self) -> bool:
        return self.config.message_model is MessageModel.CLUSTERING

    @property
    def running(self) -> bool:
        return self._state == "RUNNING"

    @property
    def instance(self) -> MQClientInstance:
        inst = self._instance
        if inst is None:
            raise ClientStateError(f"consumer {self.group} is not started")
        return inst

    def _timeout_s(self) -> float:
        return self.config.mq_client_api_timeout / 1000.0 + 1.0

    def start(self) -> None:
        """Connect and register the group.

        Raises:
            ClientStateError: wrong state, no name server, or the group already has a consumer in
                this client instance.
        """
        with self._state_lock:
            if self._state != "CREATED":
                raise ClientStateError(f"consumer {self.group} cannot start: it is {self._state}")
            if not self.config.namesrv_addr_list:
                raise ClientStateError("namesrv_addr is not set")
            inst = get_client_instance(self.config)
            inst.register_consumer(self)
            self._instance = inst
            if self.clustering:
                self.offset_store = RemoteBrokerOffsetStore(inst, self.group)
            else:
                self.offset_store = LocalFileOffsetStore(self.config.local_offset_store_dir, inst.client_id, self.group)
                self.offset_store.load()
            self._state = "RUNNING"
            try:
                inst.run(self._start_async(), self._timeout_s() * 3)
            except BaseException:
                self._state = "CREATED"
                inst.consumers.pop(self.group, None)
                self._instance = None
                release_client_instance(inst)
                raise
        log.info("%s %s started (client %s)", type(self).__name__, self.group, inst.client_id)

    async def _start_async(self) -> None:
        inst = self.instance
        await inst.start()
        for topic in list(self.subscriptions):
            try:
                await inst.update_topic_route(topic)
            except MQError as exc:
                log.warning("route of %s not available yet: %s", topic, exc)
        await inst.send_heartbeat_to_all()

    def shutdown(self) -> None:
        """Persist the offsets, unregister from the brokers. Idempotent."""
        with self._state_lock:
            if self._state != "RUNNING":
                self._state = "SHUTDOWN"
                return
            self._state = "SHUTDOWN"
        self._before_shutdown()
        inst = self.instance
        try:
            inst.run(self._persist_and_unregister(), self._timeout_s() * 2)
        except MQError:
            log.warning("consumer %s: final offset persist or unregister failed", self.group, exc_info=True)
            inst.consumers.pop(self.group, None)
        self._instance = None
        release_client_instance(inst)
        log.info("%s %s shut down", type(self).__name__, self.group)

    def _before_shutdown(self) -> None:
        """Hook for subclasses (stop background work)."""

    async def _persist_and_unregister(self) -> None:
        await self.offset_store.persist_all(self._offset_queues(), oneway=False)
        await self.instance.unregister(consumer_group=self.group)

    def _offset_queues(self) -> set[MessageQueue]:
        return set(self.offset_store.snapshot())

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -------------------------------------------------------------- ConsumerInner

    def _consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, self.consume_type, self.config.message_model,
                            self.config.consume_from_where, list(self.subscriptions.values()))

    def _subscribed_topics(self) -> list[str]:
        return list(self.subscriptions)

    def _update_subscribe_info(self, topic: str, mqs: list[MessageQueue]) -> None:
        pass

    async def _do_rebalance(self) -> None:
        pass

    async def _persist_offsets(self) -> None:
        if self.running and self.offset_store is not None:
            await self.offset_store.persist_all(self._offset_queues())

    # -------------------------------------------------------------- look-ups

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (from the name server, sorted).

        Raises:
            TopicNotExistError: no route; RemotingError.
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
        """The queue's next offset to be written (GET_MAX_OFFSET)."""
        return self._queue_call(mq, "get_max_offset")

    def min_offset(self, mq: MessageQueue) -> int:
        """The queue's lowest offset still stored (GET_MIN_OFFSET)."""
        return self._queue_call(mq, "get_min_offset")

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The offset of the message stored nearest ``timestamp_ms`` (epoch ms;
        SEARCH_OFFSET_BY_TIMESTAMP)."""
        return self._queue_call(mq, "search_offset", timestamp_ms)

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        """Record ``offset`` (the next to consume) for ``mq`` in the offset store (persisted
        periodically and at shutdown)."""
        self.offset_store.update_offset(mq, offset, increase_only=False)

    def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        """The group's offset of ``mq``: from the broker / file (``from_store``) or memory;
        -1 when there is none, -2 when the broker lookup failed."""
        kind = ReadOffsetType.READ_FROM_STORE if from_store else ReadOffsetType.MEMORY_FIRST_THEN_STORE
        return self.instance.run(self.offset_store.read_offset(mq, kind), self._timeout_s())


class PullConsumer(ActiveConsumerBase):
    """Pull messages from queues the application chooses (Java ``DefaultMQPullConsumer``).

    Args:
        group: consumer group.
        namesrv_addr: name server list.
        **config: :class:`~rocketmq_sdk.config.ConsumerConfig` settings (``message_model``,
            ``instance_name``, ``local_offset_store_dir``...).

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
        if offset < 0 or max_nums <= 0:
            raise IllegalArgumentError("offset must be ≥ 0 and max_nums > 0")
        expression, expression_type = resolve_selector(expression)
        sub = SubscriptionData.build(mq.topic, expression, 0, expression_type)
        if mq.topic not in self.subscriptions:
            self.subscriptions[mq.topic] = SubscriptionData.build(mq.topic, "*", 0)
        timeout = timeout_ms or (self.consumer_timeout_when_suspend if block else self.consumer_pull_timeout)
        header = PullMessageRequestHeader(
            consumer_group=self.group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset,
            max_msg_nums=max_nums, sys_flag=PullSysFlag.build(False, block, True), commit_offset=0,
            suspend_timeout_millis=self.broker_suspend_max_time if block else 0,
            subscription=sub.sub_string, sub_version=0, expression_type=sub.expression_type, bname=mq.broker_name)

        async def do_pull() -> PullResult:
            addr = await self._pull_nodes.address(self.instance, mq, header)
            result = await self.instance.api.pull_message(addr, header, timeout)
            self._pull_nodes.update(mq, result.suggest_which_broker_id)
            return result

        result = self.instance.run(do_pull(), timeout / 1000.0 + 1.0)
        if result.pull_status is PullStatus.FOUND:
            msgs = result.msg_found_list
            if sub.tags_set:
                msgs = [m for m in msgs if m.tags in sub.tags_set]
            for m in msgs:
                m.broker_name = mq.broker_name
                m.properties[MC.MIN_OFFSET] = str(result.min_offset)
                m.properties[MC.MAX_OFFSET] = str(result.max_offset)
            result.msg_found_list = msgs
        return result

    def pull_block_if_not_found(self, mq: MessageQueue, expression: str | MessageSelector | None, offset: int,
                                max_nums: int) -> PullResult:
        """Java ``pullBlockIfNotFound``: :meth:`pull` with ``block=True``."""
        return self.pull(mq, expression, offset, max_nums, block=True)

    def __repr__(self) -> str:
        return f"PullConsumer(group={self.group!r}, state={self._state})"
