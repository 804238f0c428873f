"""``PushConsumer``: a clustering consumer whose listener is called with pulled messages
(Java ``DefaultMQPushConsumer``, concurrently).

Start-up order (docs/protocol.md §7): routes of the subscribed topics, then a heartbeat (so the broker
lists this client in the group), then a rebalance at once. Rebalances then run every
``rebalance_interval`` ms and whenever a broker sends NOTIFY_CONSUMER_IDS_CHANGED. Offsets live
on the broker (``RemoteBrokerOffsetStore``): piggy-backed on pulls, persisted every
``persist_consumer_offset_interval`` ms, when a queue is dropped and at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Unpack, cast

from ..client.instance import MQClientInstance
from ..config import ConsumerConfig
from ..config_types import ConsumerSettings
from ..exceptions import ClientStateError, IllegalArgumentError, MQError
from ..lifecycle import ServiceState
from ..protocol.bodies import (
    ConsumeMessageDirectlyResult,
    ConsumerData,
    ConsumerRunningInfo,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from ..protocol.codes import check_name, get_retry_topic
from ..protocol.message import MessageExt, MessageQueue
from ..trace.dispatcher import TraceDispatcher, start_or_none
from .allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from .backlog import QueueLag, collect_lags
from .base import ConsumerBase
from .consume_context import ConsumeContext
from .consume_orderly import ConsumeMessageOrderlyService
from .consume_service import ConsumeMessageConcurrentlyService
from .direct_consume import consume_directly
from .listener import MessageListenerConcurrently, MessageListenerOrderly
from .listener_adapters import AsyncListenerRunner, TopicDispatcher, is_async_listener
from .pop_consume import PopSettings
from .pop_mode import PopMode
from .process_queue import ProcessQueue
from .pull_loop import pull_loop
from .queue_lock import QueueLocker
from .rebalance import Rebalancer
from .running_info import build_running_info
from .selector import MessageSelector, resolve_selector
from .stats import ConsumerStats

__all__ = ["PushConsumer"]

log = logging.getLogger("rocketmq_sdk.consumer")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class PushConsumer(ConsumerBase):
    """A push consumer (clustering, concurrent listener).

    Args:
        group: consumer group (``^[%|a-zA-Z0-9_-]+$``, ≤ 255 characters).
        namesrv_addr: name server list ``"host:port;host:port"``.
        allocate_strategy: queue allocation (default ``AllocateMessageQueueAveragely``).
        **config: any :class:`rocketmq_sdk.config.ConsumerConfig` setting
            (``consume_thread_max``, ``pull_batch_size``, ``consume_from_where``,
            ``instance_name``...).
        enable_msg_trace: write Apache RocketMQ message traces (``SubBefore``/``SubAfter``
            records around each listener call, batched asynchronously to the trace topic; Java
            ``enableMsgTrace``, False).
        customized_trace_topic: the trace topic (default ``RMQ_SYS_TRACE_TOPIC``).
        pop: consume through RocketMQ 5.x POP instead of queue rebalancing and pulls (Java:
            client rebalance off, group in POP mode; see ``rocketmq_sdk.consumer.pop_consume``):
            needs 5.x brokers and a concurrent listener. False by default.
        pop_settings: knobs of the POP mode (:class:`~rocketmq_sdk.consumer.pop_consume.PopSettings`;
            default: from the consumer's settings).

    Raises:
        IllegalArgumentError: illegal group name, unknown setting.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *,
                 allocate_strategy: AllocateMessageQueueStrategy | None = None, enable_msg_trace: bool = False,
                 customized_trace_topic: str | None = None, pop: bool = False, pop_settings: PopSettings | None = None,
                 **config: Unpack[ConsumerSettings]) -> None:
        super().__init__(group, ConsumerConfig.from_kwargs(namesrv_addr=namesrv_addr, **config))
        #: POP mode (issue 32): no rebalance, messages popped from every queue
        self.pop = PopMode(group, self.config, lambda: self._rebalancer.subscriptions, pop_settings) if pop else None
        #: the message trace dispatcher (``enable_msg_trace``), else None.
        self.msg_trace = TraceDispatcher(group, "CONSUME", customized_trace_topic, self.config) \
            if enable_msg_trace else None
        #: ``%RETRY%<group>``: the group's retry topic (subscribed in CLUSTERING).
        self.retry_topic = get_retry_topic(group)
        self._rebalancer = Rebalancer(self, allocate_strategy or AllocateMessageQueueAveragely(),
                                      start_pulling=self._start_pulling, queue_locker=self._queue_locks)
        self._listener: MessageListenerConcurrently | MessageListenerOrderly | None = None
        #: the listener is orderly (``register_message_listener(..., orderly=True)``).
        self.orderly = False
        self._consume_service: ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService | None = None
        #: what the pull loops and the consume service see of this consumer (built at start)
        self._context: ConsumeContext | None = None
        self._stats = ConsumerStats()  # Java ConsumerStatsManager: the running info's statusTable
        self._queue_locker: QueueLocker | None = None
        self._async_runner = AsyncListenerRunner(f"rocketmq-listener-{group}",
                                                 event_loop=self.config.event_loop)
        self._dispatcher: TopicDispatcher | None = None
        self._lock_task: asyncio.Task | None = None
        self._expiry_task: asyncio.Task | None = None
        self._pull_tasks: dict[MessageQueue, asyncio.Task] = {}
        self._sub_version = int(time.time() * 1000)
        #: when :meth:`start` began, epoch ms (0 before; shown in the consumer's running info).
        self.start_timestamp_ms = 0
        self._suspended = False

    # -------------------------------------------------------------- configuration

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*",
                  expression_type: str = "TAG") -> None:
        """Subscribe to ``topic`` with a tag expression (``*``, ``TagA``, ``TagA || TagB``) or,
        with ``expression_type="SQL92"`` or ``MessageSelector.by_sql(...)``, a SQL92 selector
        over message properties (``"a > 5 AND region = 'eu'"``; the broker must have
        ``enablePropertyFilter``, else its pulls fail with "The broker does not support consumer
        to filter message by SQL92").

        Raises:
            IllegalArgumentError: illegal topic name or expression type.
        """
        check_name(topic, "topic")
        expression, expression_type = resolve_selector(expression, expression_type)
        # a new version for every change, so brokers replace the group's older subscription
        self._sub_version = max(self._sub_version + 1, int(time.time() * 1000))
        self._rebalancer.subscriptions[topic] = SubscriptionData.build(topic, expression, self._sub_version,
                                                                       expression_type)
        self._announce_subscription(topic, wait_rebalance=False)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its queues are dropped at the next rebalance)."""
        self._rebalancer.subscriptions.pop(topic, None)

    def subscriptions(self) -> dict[str, SubscriptionData]:
        """Topic → subscription (a copy; in CLUSTERING the group's retry topic is added at
        :meth:`start`)."""
        return dict(self._rebalancer.subscriptions)

    def process_queues(self) -> dict[MessageQueue, ProcessQueue]:
        """The queues this consumer owns now → their live ``ProcessQueue`` (messages pulled and
        not yet consumed: ``msg_count``, ``dropped``, ``locked``...). A copy of Java's
        ``processQueueTable``: queues come and go with each rebalance."""
        return dict(self._rebalancer.process_queues)

    def register_message_listener(self, listener: MessageListenerConcurrently | MessageListenerOrderly | Any,
                                  *, orderly: bool | None = None) -> None:
        """Set the listener: ``fn(msgs: list[MessageExt], context) -> status`` or an object with
        ``consume_message(msgs, context)``. It runs on the consume thread pool.

        Concurrent (default): returns ``ConsumeConcurrentlyStatus``; an exception or a None
        result means RECONSUME_LATER. Orderly (``orderly=True``, or an object whose ``orderly``
        attribute is True; Java ``MessageListenerOrderly``): called with
        ``ConsumeOrderlyContext``, one batch at a time per queue in queue order, returns
        ``ConsumeOrderlyStatus``; an exception or None means SUSPEND_CURRENT_QUEUE_A_MOMENT.

        Raises:
            IllegalArgumentError: not callable, or ``on_message`` handlers are registered.
            ClientStateError: the consumer is already started.
        """
        if self.state is not ServiceState.CREATE_JUST:
            raise ClientStateError("register the listener before start()")
        if self._dispatcher is not None and listener is not self._dispatcher:
            raise IllegalArgumentError("handlers are registered with on_message(); use one style")
        fn = getattr(listener, "consume_message", listener)
        if not callable(fn):
            raise IllegalArgumentError("the listener must be callable or have consume_message()")
        self._listener = self._async_runner.wrap(fn) if is_async_listener(fn) else fn
        self.orderly = bool(getattr(listener, "orderly", False)) if orderly is None else orderly

    def listener(self, fn: Any = None, *, orderly: bool = False) -> Any:
        """Decorator form of :meth:`register_message_listener`::

            @consumer.listener
            def handle(msgs, ctx): ...

            @consumer.listener(orderly=True)
            async def handle(msgs, ctx): ...   # coroutines run on a dedicated loop thread

        Returns the function unchanged."""
        def register(f: Any) -> Any:
            self.register_message_listener(f, orderly=orderly)
            return f
        return register(fn) if fn is not None else register

    def on_message(self, topic: str, expression: str | None = "*", *, orderly: bool = False) -> Callable[[Any], Any]:
        """Decorator: subscribe to ``topic`` with ``expression`` and consume its messages with
        the decorated function (sync or ``async``; same signature and results as a listener).
        Several topics may each have their own handler; all are orderly or none.

        Raises:
            IllegalArgumentError: the topic already has a handler, or a listener was registered
                with :meth:`register_message_listener`.
        """
        def register(f: Any) -> Any:
            if self._dispatcher is None:
                if self._listener is not None:
                    raise IllegalArgumentError("a listener is already registered; use one style")
                self._dispatcher = TopicDispatcher()
                self.register_message_listener(self._dispatcher, orderly=orderly)
            fn = getattr(f, "consume_message", f)
            self._dispatcher.add(topic, self._async_runner.wrap(fn) if is_async_listener(fn) else fn)
            self.subscribe(topic, expression)
            return f
        return register

    # -------------------------------------------------------------- lifecycle

    def suspend(self) -> None:
        """Stop pulling new messages (Java ``DefaultMQPushConsumer.suspend``); may be called
        before :meth:`start`. Pulls already in flight still deliver what they return and
        listeners finish what they hold; queues stay owned, offsets keep being committed. Each
        queue's pull loop checks again every ``PULL_DELAY_WHEN_SUSPENDED_S`` (1 s, Java's
        ``PULL_TIME_DELAY_MILLS_WHEN_SUSPEND``) until :meth:`resume`."""
        if not self._suspended:
            self._suspended = True
            log.info("consumer %s suspended", self.group)

    def resume(self) -> None:
        """Pull again after :meth:`suspend` (within 1 s per queue)."""
        if self._suspended:
            self._suspended = False
            log.info("consumer %s resumed", self.group)

    @property
    def suspended(self) -> bool:
        """True between :meth:`suspend` and :meth:`resume`."""
        return self._suspended

    def start(self) -> None:
        """Start consuming: routes of the subscribed topics, a heartbeat (the brokers list this
        client in the group), a rebalance at once, then every ``rebalance_interval`` ms.

        Raises:
            ClientStateError: no listener, no subscription, no name server, already started or
                shut down, or the group already has a consumer in this client instance.
            MQBrokerError: a broker refused an SQL92 subscription (CHECK_CLIENT_CONFIG, as Java's
                ``checkClientInBroker``): SYSTEM_ERROR without ``enablePropertyFilter``,
                SUBSCRIPTION_PARSE_FAILED (23) for an expression that does not compile.
        """
        super().start()

    def _check_startable(self) -> None:
        if self._listener is None:
            raise ClientStateError("register a message listener before start()")
        if not self._rebalancer.subscriptions:
            raise ClientStateError("subscribe to a topic before start()")
        if self.pop is not None:
            self.pop.check_startable(orderly=self.orderly, clustering=self.clustering)
            return
        if self.clustering:  # Java subscribes to the retry topic only in clustering mode
            self._rebalancer.subscriptions.setdefault(
                self.retry_topic, SubscriptionData.build(self.retry_topic, "*", self._sub_version))

    def _prepare_start(self, inst: MQClientInstance) -> None:
        listener = self._listener
        assert listener is not None
        self._queue_locker = QueueLocker(inst, self.group)
        self._async_runner.timeout_s = self.config.consume_timeout * 60.0
        self._async_runner.start()
        if self._async_runner.app_loop is None:  # start() called on an application loop's thread
            self._async_runner.app_loop = _running_loop()
        self.msg_trace = start_or_none(self.msg_trace)
        ctx = self._context = ConsumeContext(
            group=self.group, config=self.config, instance=inst, offset_store=self.offset_store,
            retry_topic=self.retry_topic, orderly=self.orderly, msg_trace=self.msg_trace,
            is_running=lambda: self.running, is_suspended=lambda: self._suspended, stats=self._stats)
        if self.orderly:
            self._consume_service = ConsumeMessageOrderlyService(
                ctx, cast(MessageListenerOrderly, listener), self._queue_locker)
        else:
            self._consume_service = ConsumeMessageConcurrentlyService(ctx, cast(MessageListenerConcurrently, listener))
        self.start_timestamp_ms = int(time.time() * 1000)

    def _undo_start(self) -> None:
        if self._consume_service is not None:
            self._consume_service.shutdown(0)
        self._async_runner.stop()

    async def astart(self) -> None:
        """Start from asyncio code without blocking the loop (``start()`` runs in a worker
        thread). ``async def`` listeners then run on this loop (the application's), so they can
        use its objects (an ``asyncio.Queue``, a database pool...) directly; plain listeners still
        run on the consume threads. Same for ``async with consumer:`` and for ``start()`` called
        from a coroutine. A listener call still holds one consume thread while it runs, and a loop
        that is no longer running gets them sent to the consumer's private listener loop.

        Raises:
            the errors of :meth:`start`.
        """
        self._async_runner.app_loop = asyncio.get_running_loop()
        try:
            await asyncio.to_thread(self.start)
        except BaseException:
            self._async_runner.app_loop = None
            raise

    async def _start_async(self) -> None:
        await super()._start_async()
        inst = self.instance
        await self._check_client_in_broker()
        await inst.send_heartbeat_to_all()
        if self.pop is not None:
            await self.pop.start(inst, cast(MessageListenerConcurrently, self._listener), self._stats)
            return
        await self.do_rebalance()
        loop = asyncio.get_running_loop()
        if self._needs_queue_locks:
            self._lock_task = loop.create_task(self._renew_locks())
        if isinstance(self._consume_service, ConsumeMessageConcurrentlyService):
            self._expiry_task = loop.create_task(self._clean_expired(self._consume_service))

    async def _check_client_in_broker(self) -> None:
        """Java ``checkClientInBroker``: a broker of each SQL92 subscription's topic must accept
        it (CHECK_CLIENT_CONFIG), else ``start()`` fails with its MQBrokerError (SYSTEM_ERROR
        when ``enablePropertyFilter`` is off, SUBSCRIPTION_PARSE_FAILED for a bad expression)."""
        inst = self.instance
        for sub in list(self._rebalancer.subscriptions.values()):
            if sub.expression_type == "TAG":
                continue
            route = inst.routes.get(sub.topic)
            addr = next((a for bd in route.broker_datas if (a := bd.master_addr())), None) if route else None
            if addr is not None:
                await inst.api.check_client_in_broker(addr, self.group, inst.client_id, sub,
                                                      self.config.mq_client_api_timeout)

    async def _clean_expired(self, service: ConsumeMessageConcurrentlyService) -> None:
        """Every ``consume_timeout`` minutes, send back messages stuck in a listener."""
        while self.running:
            await asyncio.sleep(self.config.consume_timeout * 60.0)
            try:
                await asyncio.to_thread(service.clean_expired_messages, self._rebalancer.process_queues)
            except MQError:
                log.warning("group %s: cleaning expired messages failed", self.group, exc_info=True)

    @property
    def _needs_queue_locks(self) -> bool:
        """Orderly clustering consumers lock their queues on the brokers."""
        return self.orderly and self.config.message_model is MessageModel.CLUSTERING

    def _queue_locks(self) -> QueueLocker | None:
        """The broker locks the rebalancer takes and releases (orderly CLUSTERING), else None."""
        return self._queue_locker if self._needs_queue_locks else None

    async def _renew_locks(self) -> None:
        """Java ``lockAll`` every ``rebalance_lock_interval`` ms."""
        locker = self._queue_locker
        assert locker is not None
        while self.running:
            await asyncio.sleep(self.config.rebalance_lock_interval / 1000.0)
            try:
                await locker.lock_all(self._rebalancer.process_queues)
            except MQError:
                log.warning("group %s: lock renewal failed", self.group, exc_info=True)

    def shutdown(self) -> None:
        """Stop pulling, wait up to ``await_termination_timeout`` ms for running listeners,
        persist the offsets, unregister from the brokers. Idempotent."""
        super().shutdown()

    def _stop_background(self) -> None:
        if self.pop is not None:
            self.pop.stop(self.instance, self.config.await_termination_timeout / 1000.0 + self._timeout_s())
        try:
            self.instance.run(self._stop_pulling(), self._timeout_s())
        except MQError:
            log.warning("consumer %s: stopping the pull loops failed", self.group, exc_info=True)
        if self._consume_service is not None:
            self._consume_service.shutdown(self.config.await_termination_timeout / 1000.0)
        if self.msg_trace is not None:
            self.msg_trace.shutdown()

    def _after_shutdown(self) -> None:
        self._async_runner.stop()

    async def _stop_pulling(self) -> None:
        tasks = list(self._pull_tasks.values())
        for extra in (self._lock_task, self._expiry_task):
            if extra is not None:
                tasks.append(extra)
        self._lock_task = self._expiry_task = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._pull_tasks.clear()

    def _offset_queues(self) -> set[MessageQueue]:
        return set(self._rebalancer.process_queues)

    async def _persist_and_unregister(self) -> None:
        await self.offset_store.persist_all(self._offset_queues(), oneway=False)
        mqs = self._rebalancer.drop_all()
        locker = self._queue_locks()
        if locker is not None:
            await locker.unlock_batch(set(mqs))
        await self.instance.unregister(consumer_group=self.group)

    # -------------------------------------------------------------- ConsumerInner (loop side)

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, ConsumeType.CONSUME_PASSIVELY, self.config.message_model,
                            self.config.consume_from_where, list(self._rebalancer.subscriptions.values()))

    def subscribed_topics(self) -> list[str]:
        return list(self._rebalancer.subscriptions)

    def update_topic_subscribe_info(self, topic: str, mqs: list[MessageQueue]) -> None:
        self._rebalancer.topic_queues[topic] = mqs

    def consumer_running_info(self) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO answer (settings, subscriptions, owned queues, per-topic
        pull/consume statistics as ``statusTable``)."""
        return build_running_info(self.config, orderly=self.orderly, start_timestamp_ms=self.start_timestamp_ms,
                                  subscriptions=list(self._rebalancer.subscriptions.values()),
                                  queues=self.process_queues(), offset_store=self._offset_store, stats=self._stats)

    async def do_rebalance(self) -> None:
        if self.pop is not None:
            if self.running:
                await self.pop.refresh()
        elif self.running:
            await self._rebalancer.do_rebalance()

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """Broker request RESET_CONSUMER_CLIENT_OFFSET (220): restart ``topic``'s queues
        from ``offsets`` (see ``Rebalancer.reset_offsets``)."""
        if self.running:
            await self._rebalancer.reset_offsets(topic, offsets)

    # -------------------------------------------------------------- used by the rebalancer

    def _start_pulling(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        """Start the pull loop of a newly owned queue (on the loop)."""
        old = self._pull_tasks.pop(mq, None)
        if old is not None:
            old.cancel()
        assert self._consume_service is not None and self._context is not None
        task = asyncio.get_running_loop().create_task(
            pull_loop(self._context, self._rebalancer, self._consume_service, self._pull_nodes, mq, pq, offset))
        self._pull_tasks[mq] = task
        task.add_done_callback(partial(self._pull_done, mq))

    def _pull_done(self, mq: MessageQueue, task: asyncio.Task) -> None:
        if self._pull_tasks.get(mq) is task:
            del self._pull_tasks[mq]
        if not task.cancelled() and task.exception() is not None:
            log.error("pull loop of %s crashed", mq, exc_info=task.exception())

    # -------------------------------------------------------------- used by the consume service

    async def send_message_back(self, msg: MessageExt, delay_level: int, mq: MessageQueue) -> None:
        """CONSUMER_SEND_MSG_BACK to the master of the queue's broker (on the client's loop; see
        ``ConsumeContext.send_message_back``).

        Raises:
            ClientStateError: not started; MQBrokerError, RemotingError.
        """
        if self._context is None:
            raise ClientStateError(f"consumer {self.group} is not started")
        await self._context.send_message_back(msg, delay_level, mq)

    def consume_message_directly(self, msg: MessageExt, broker_name: str | None) -> ConsumeMessageDirectlyResult:
        """Broker request CONSUME_MESSAGE_DIRECTLY (309): run the listener on ``msg`` and say
        how it went (blocking; see ``direct_consume``)."""
        return consume_directly(self._listener, msg, broker_name, group=self.group, retry_topic=self.retry_topic,
                                orderly=self.orderly)

    def lag_report(self, topic: str | None = None) -> list[QueueLag]:
        """Per-queue backlog of the queues this consumer owns (``%RETRY%`` included), sorted:
        the broker's max offset, the committed offset, messages in flight, and the lag.

        Raises:
            ClientStateError: not started.
        """
        queues = [(mq, pq) for mq, pq in self.process_queues().items()
                  if not pq.dropped and (topic is None or mq.topic == topic)]
        return self.instance.run(collect_lags(self.instance, self.offset_store, queues), self._timeout_s() * 2)

    def __repr__(self) -> str:
        return f"PushConsumer(group={self.group!r}, state={self.state.name})"
