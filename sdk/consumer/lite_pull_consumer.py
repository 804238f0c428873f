"""``LitePullConsumer``: background pulling, the application polls (Java
``DefaultLitePullConsumer``).

Queues come from :meth:`~LitePullConsumer.subscribe` (the group's rebalance, as push
consumers) or :meth:`~LitePullConsumer.assign` (fixed). One long-polling task per queue pulls on
the client's I/O loop into a shared buffer; pulling of a queue pauses while
``pull_threshold_for_queue`` messages of it, or ``pull_threshold_for_all`` of all queues, wait
to be polled, and while the queue is paused. :meth:`~LitePullConsumer.poll` returns the oldest
pulled batch (up to ``pull_batch_size`` messages of one queue) and advances that queue's
consumed position; :meth:`~LitePullConsumer.commit_sync` (or auto-commit, every
``auto_commit_interval`` ms, checked at each poll) stores the positions in the group's offset
store and persists them. Each queue's next pull goes to the broker its previous answer
suggested (``suggestWhichBrokerId``, slave reads; see :mod:`~rocketmq_sdk.consumer.pull_node`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Unpack

from ..config import LitePullConsumerConfig
from ..config_types import LitePullConsumerSettings
from ..exceptions import IllegalArgumentError, MQError
from ..protocol.bodies import SubscriptionData
from ..protocol.codes import PullSysFlag, check_name
from ..protocol.message import MessageExt, MessageQueue, PullStatus
from .allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from .backlog import QueueLag, collect_lags
from .offset_store import ReadOffsetType
from .process_queue import ProcessQueue
from .pull_consumer import ActiveConsumerBase
from .pull_result import QueuePuller, process_pull_result, pull_header
from .rebalance import Rebalancer
from .selector import MessageSelector, resolve_selector

__all__ = ["LitePullConsumer"]

log = logging.getLogger("rocketmq_sdk.consumer.lite")

_PAUSE_S = 0.05


def _set_done(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@dataclass
class _QueueState:
    """One pulled queue: where the pull is, what was polled, and a generation bumped by seek
    (results of pulls begun before a seek are dropped)."""

    pq: ProcessQueue
    pull_offset: int
    consume_offset: int
    paused: bool = False
    generation: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    task: asyncio.Task | None = None


class LitePullConsumer(ActiveConsumerBase):
    """Poll-style consumer (Java ``DefaultLitePullConsumer``): messages are pulled in the
    background, the application takes them with :meth:`poll` and commits its position.

    Typical use::

        consumer = LitePullConsumer("my-group", "127.0.0.1:9876")
        consumer.subscribe("orders", "TagA || TagB")
        consumer.start()
        try:
            while running:
                for msg in consumer.poll(1000):      # [] after 1000 ms without messages
                    handle(msg)
                # auto_commit (default) stores the polled position every auto_commit_interval ms
        finally:
            consumer.shutdown()                     # commits, persists, unregisters

    Queues come either from :meth:`subscribe` (the group's rebalance shares each topic's queues
    among its consumers, as for push consumers; in BROADCASTING every consumer gets every queue)
    or from :meth:`assign` (exactly the given queues, no rebalance); the two modes exclude each
    other. A new queue starts at the group's stored offset, else where ``consume_from_where``
    says (:mod:`~rocketmq_sdk.consumer.start_offset`).

    Threads: one long-polling task per queue runs on the client's I/O loop thread and fills a
    buffer shared by the queues; pulling of a queue pauses while ``pull_threshold_for_queue``
    (1000) messages of it, or ``pull_threshold_for_all`` (10000) of all queues, wait to be
    polled, and while the queue is paused (:meth:`pause`). The application's threads call :meth:`poll`,
    :meth:`seek`, :meth:`commit_sync`... (thread-safe; :meth:`apoll` / :meth:`acommit` from
    asyncio code). Delivery is at least once: messages polled after the last commit come again
    after a restart or a rebalance.

    Args:
        group: consumer group (``^[%|a-zA-Z0-9_-]+$``, ≤ 255 characters).
        namesrv_addr: name server list ``"host:port;host:port"`` (or the ``namesrv_addr``
            setting / ``NAMESRV_ADDR`` environment variable).
        allocate_strategy: queue allocation in subscribe mode (default
            :class:`~rocketmq_sdk.consumer.allocate.AllocateMessageQueueAveragely`).
        **config: :class:`~rocketmq_sdk.config.LitePullConsumerConfig` settings:
            ``pull_batch_size`` (10), ``auto_commit`` (True), ``auto_commit_interval`` (5000 ms),
            ``poll_timeout_millis`` (5000 ms), ``message_model``, ``consume_from_where``,
            ``instance_name``...

    Raises:
        IllegalArgumentError: illegal group name or unknown setting.
    """

    config: LitePullConsumerConfig

    def __init__(self, group: str, namesrv_addr: str | None = None, *,
                 allocate_strategy: AllocateMessageQueueStrategy | None = None,
                 **config: Unpack[LitePullConsumerSettings]) -> None:
        super().__init__(group, LitePullConsumerConfig.from_kwargs(namesrv_addr=namesrv_addr, **config))
        self._rebalancer = Rebalancer(self, allocate_strategy or AllocateMessageQueueAveragely(),
                                      start_pulling=self._start_pulling)
        self.subscriptions = self._rebalancer.subscriptions
        self._mode: str | None = None  # "subscribe" or "assign"
        self._assigned: set[MessageQueue] = set()
        self._states: dict[MessageQueue, _QueueState] = {}
        self._buffer: collections.deque[tuple[MessageQueue, _QueueState, int, list[MessageExt]]] = collections.deque()
        self._cond = threading.Condition()
        #: ``apoll`` callers waiting on their own loops (woken with the condition's waiters)
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._arrival_listener: Callable[[], None] | None = None
        self._last_commit = time.monotonic()
        self.orderly = False
        self._offset_reset_listener: Callable[[str, dict[MessageQueue, int]], None] | None = None

    # -------------------------------------------------------------- queues

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*",
                  expression_type: str = "TAG") -> None:
        """Consume ``topic`` with the queues the group's rebalance gives this consumer (Java
        ``subscribe``). Before or after :meth:`start`; after it, the route, a heartbeat and a
        rebalance happen before this returns (up to ``mq_client_api_timeout`` + 1 s).

        Args:
            topic: the topic.
            expression: tag expression (``"*"``, ``"TagA || TagB"``; the pulled messages are
                filtered by exact tag), an SQL92 expression with ``expression_type="SQL92"``
                (evaluated by brokers with ``enablePropertyFilter``), or a
                :class:`~rocketmq_sdk.consumer.selector.MessageSelector`.
            expression_type: ``"TAG"`` (default) or ``"SQL92"``.

        Raises:
            IllegalArgumentError: illegal topic or expression type; :meth:`assign` was used.
        """
        check_name(topic, "topic")
        expression, expression_type = resolve_selector(expression, expression_type)
        if self._mode == "assign":
            raise IllegalArgumentError("subscribe and assign are mutually exclusive")
        self._mode = "subscribe"
        self._rebalancer.subscriptions[topic] = SubscriptionData.build(topic, expression, int(time.time() * 1000),
                                                                      expression_type)
        self._announce_subscription(topic, wait_rebalance=True)

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Consume exactly ``mqs`` (Java ``assign``): no rebalance, the queues are this
        consumer's whatever the group's other members do. A later call replaces the set: queues
        no longer listed stop (their cached messages are dropped, their offsets persisted), new
        ones start at the group's stored offset or ``consume_from_where``. Before or after
        :meth:`start` (after: applied before returning).

        Args:
            mqs: queues, e.g. from :meth:`fetch_subscribe_message_queues`.

        Raises:
            IllegalArgumentError: :meth:`subscribe` was used.
        """
        if self._mode == "subscribe":
            raise IllegalArgumentError("subscribe and assign are mutually exclusive")
        self._mode = "assign"
        self._assigned = set(mqs)
        for mq in self._assigned:
            self.subscriptions.setdefault(mq.topic, SubscriptionData.build(mq.topic, "*", 0))
        if self.running:
            self.instance.run(self._apply_assignment(), self._timeout_s() * 2)

    async def _apply_assignment(self) -> None:
        for mq in [m for m in self._rebalancer.process_queues if m not in self._assigned]:
            await self._rebalancer.drop(mq)
        for mq in sorted(self._assigned - self._rebalancer.process_queues.keys()):
            offset = await self._rebalancer.start_offset(mq)
            if offset < 0:
                log.warning("no start offset for %s yet", mq)
                continue
            pq = ProcessQueue()
            self._rebalancer.process_queues[mq] = pq
            self._start_pulling(mq, pq, offset)

    def assignment(self) -> set[MessageQueue]:
        """The queues being consumed now (subscribe mode: this consumer's share since the last
        rebalance; assign mode: the assigned queues once started). A new set."""
        return {mq for mq, st in list(self._states.items()) if not st.pq.dropped}

    def owns(self, mq: MessageQueue) -> bool:
        """Whether ``mq`` is being consumed now (``mq in assignment()`` without building the
        set: for a per-message check)."""
        st = self._states.get(mq)
        return st is not None and not st.pq.dropped

    # -------------------------------------------------------------- lifecycle

    async def _start_async(self) -> None:
        await super()._start_async()
        if self._mode == "assign":
            await self._apply_assignment()
        else:
            await self._rebalancer.do_rebalance()

    def _stop_background(self) -> None:
        if self.config.auto_commit:
            self.commit_sync()

        async def stop() -> None:
            tasks = [st.task for st in self._states.values() if st.task is not None]
            for st in self._states.values():
                st.pq.dropped = True
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        try:
            self.instance.run(stop(), self._timeout_s())
        except MQError:
            log.warning("stopping the pull tasks of %s failed", self.group, exc_info=True)
        with self._cond:
            self._cond.notify_all()
            self._wake_async_waiters()

    def _offset_queues(self) -> set[MessageQueue]:
        return set(self._states) | set(self.offset_store.snapshot())

    # -------------------------------------------------------------- broker offset resets

    def set_offset_reset_listener(self, listener: Callable[[str, dict[MessageQueue, int]], None] | None) -> None:
        """Hand the broker's offset resets to ``listener(topic, {mq: offset})``.

        A broker pushes RESET_CONSUMER_CLIENT_OFFSET (220) to the online clients of a group when
        an admin resets its offsets (``mqadmin resetOffsetByTime``,
        :meth:`~rocketmq_sdk.admin.AdminClient.reset_offset_by_time`). Java's lite pull consumer
        ignores it (the application chooses its offsets), and so does this one without a
        listener (one WARNING). The listener runs in a worker thread, not on the client's I/O
        loop, so it may call :meth:`seek` and the other blocking methods; ``None`` removes it.
        """
        self._offset_reset_listener = listener

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        listener = self._offset_reset_listener
        if listener is None:
            await super().reset_offset(topic, offsets)
            return
        await asyncio.get_running_loop().run_in_executor(None, listener, topic, dict(offsets))

    # -------------------------------------------------------------- rebalancer hooks

    async def do_rebalance(self) -> None:
        if self.running and self._mode == "subscribe":
            await self._rebalancer.do_rebalance()

    def update_topic_subscribe_info(self, topic: str, mqs: list[MessageQueue]) -> None:
        self._rebalancer.topic_queues[topic] = mqs

    def _start_pulling(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        """Start the background pull of a newly owned queue (on the loop)."""
        old = self._states.get(mq)
        if old is not None and old.task is not None:
            old.task.cancel()
        st = _QueueState(pq, offset, offset)
        self._states[mq] = st
        st.task = asyncio.get_running_loop().create_task(self._pull_queue(mq, st))

    # -------------------------------------------------------------- background pulling (loop)

    def _cached_total(self) -> int:
        return sum(st.pq.msg_count for st in list(self._states.values()))

    async def _pull_queue(self, mq: MessageQueue, st: _QueueState) -> None:
        cfg = self.config
        inst = self.instance
        puller = QueuePuller(inst, self._pull_nodes, mq, cfg.pull_time_delay_when_exception, cfg.pull_timeout)
        while self.running and not st.pq.dropped:
            if (st.paused or st.pq.msg_count >= cfg.pull_threshold_for_queue
                    or self._cached_total() >= cfg.pull_threshold_for_all):
                await asyncio.sleep(_PAUSE_S)
                continue
            sub = await puller.subscription(self.subscriptions)
            if sub is None:
                continue
            with st.lock:
                gen, offset = st.generation, st.pull_offset
            header = pull_header(self.group, mq, sub, offset, cfg.pull_batch_size,
                                 sys_flag=PullSysFlag.build(False, True, True), suspend_timeout_ms=cfg.suspend_timeout)
            result = await puller.pull(header, lambda: st.pq.dropped or not self.running)
            if result is None:
                continue
            with st.lock:
                if gen != st.generation or st.pq.dropped:
                    continue  # a seek happened meanwhile: this result is stale
                st.pull_offset = result.next_begin_offset
            msgs = process_pull_result(result, mq, sub)
            if msgs:
                st.pq.put_messages(msgs)
                with self._cond:
                    self._buffer.append((mq, st, gen, msgs))
                    self._cond.notify_all()
                    self._wake_async_waiters()
                self._notify_arrival()
            elif result.pull_status is PullStatus.FOUND and st.pq.msg_count == 0:
                with st.lock:
                    if gen == st.generation:
                        st.consume_offset = max(st.consume_offset, result.next_begin_offset)
            elif result.pull_status is PullStatus.OFFSET_ILLEGAL:
                log.warning("offset %d of %s is illegal; moving to %d", offset, mq, result.next_begin_offset)
            if cfg.pull_interval > 0:
                await asyncio.sleep(cfg.pull_interval / 1000.0)

    # -------------------------------------------------------------- application API

    def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        """The oldest pulled batch, waiting for one up to ``timeout_ms`` (Java ``poll``).

        A batch holds up to ``pull_batch_size`` messages of one queue, in queue order; taking it
        moves that queue's consumed position past it (what :meth:`commit_sync` stores). With
        ``auto_commit``, the positions are committed first when ``auto_commit_interval`` ms
        passed since the last commit (a network round trip in this call). Any thread may call
        it; concurrent callers get different batches.

        Args:
            timeout_ms: how long to wait, ms (default ``poll_timeout_millis``, 5000; 0: don't).

        Returns:
            ``list[MessageExt]`` (each with ``topic``, ``queue_id``, ``queue_offset``,
            ``broker_name``, ``body``...); ``[]`` on timeout or when the consumer is shut down
            meanwhile.

        Raises:
            ClientStateError: not started, or shut down.
        """
        self._lifecycle.check_running()
        if self._commit_due():
            self.commit_sync()
        deadline = self._poll_deadline(timeout_ms)
        with self._cond:
            while True:
                got = self._take_or_time_left(deadline)
                if isinstance(got, list):
                    return got
                self._cond.wait(got)

    async def apoll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        """:meth:`poll` for asyncio code: waits on the caller's loop without blocking it (no
        thread is held while waiting). Cancelling it loses no message: a batch is taken only
        when the call returns it. Auto-commits first when due (:meth:`acommit`).

        Args:
            timeout_ms: how long to wait, ms (default ``poll_timeout_millis``).

        Raises:
            ClientStateError: not started, or shut down.
        """
        self._lifecycle.check_running()
        if self._commit_due():
            await self.acommit()
        deadline = self._poll_deadline(timeout_ms)
        loop = asyncio.get_running_loop()
        while True:
            with self._cond:
                got = self._take_or_time_left(deadline)
                if isinstance(got, list):
                    return got
                waiter: asyncio.Future[None] = loop.create_future()
                self._async_waiters.append((loop, waiter))
            try:  # not wait_for: on 3.11 it swallows a cancel that comes as a pull wakes us (gh-86296)
                async with asyncio.timeout(got):
                    await waiter
            except TimeoutError:
                pass
            finally:
                with self._cond:
                    if (loop, waiter) in self._async_waiters:
                        self._async_waiters.remove((loop, waiter))

    def __aiter__(self) -> AsyncIterator[MessageExt]:
        """``async for msg in consumer``: the polled messages one by one, until shutdown (polls
        with :meth:`apoll`, so auto-commit applies as to ``poll``)."""
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[MessageExt]:
        while self.running:
            for msg in await self.apoll():
                yield msg

    async def acommit(self) -> None:
        """:meth:`commit_sync` for asyncio code: the offsets are persisted on the client's I/O
        loop while the caller's loop waits without blocking.

        Raises:
            ClientStateError: not started.
        """
        inst = self.instance
        self._store_polled_offsets()
        await asyncio.wrap_future(inst.loop_thread.submit(
            self.offset_store.persist_all(self._offset_queues(), oneway=False)))

    def _commit_due(self) -> bool:
        cfg = self.config
        return cfg.auto_commit and (time.monotonic() - self._last_commit) * 1000 >= cfg.auto_commit_interval

    def _poll_deadline(self, timeout_ms: int | None) -> float:
        return time.monotonic() + (self.config.poll_timeout_millis if timeout_ms is None else timeout_ms) / 1000.0

    def _take_or_time_left(self, deadline: float) -> list[MessageExt] | float:
        """A batch; [] when ``deadline`` passed or the consumer stopped; else the seconds left to
        wait for one (call with ``self._cond`` held)."""
        msgs = self._take_batch()
        if msgs is not None:
            return msgs
        remaining = deadline - time.monotonic()
        return [] if remaining <= 0 or not self.running else remaining

    def _take_batch(self) -> list[MessageExt] | None:
        """The oldest pulled batch still valid, its queue's position moved past it; None when
        there is none (call with ``self._cond`` held)."""
        while self._buffer:
            mq, st, gen, msgs = self._buffer.popleft()
            with st.lock:
                if st.pq.dropped or gen != st.generation:
                    continue
                offset = st.pq.remove_messages(msgs)
                if offset >= 0:
                    st.consume_offset = offset
            return msgs
        return None

    def set_arrival_listener(self, listener: Callable[[], None] | None) -> None:
        """Call ``listener`` (no arguments) each time a pulled batch is buffered for :meth:`poll`,
        on the client's I/O thread, so an application can take it with ``poll(0)`` without a
        thread of its own blocked in :meth:`poll`. It must be quick and must not block (e.g. it
        signals an event loop or takes the batch with ``poll(0)``); its exceptions are logged.
        None removes it. (No Java counterpart: Java's ``poll`` is the only way.)"""
        self._arrival_listener = listener

    def _notify_arrival(self) -> None:
        listener = self._arrival_listener
        if listener is None:
            return
        try:
            listener()
        except Exception:  # noqa: BLE001 - an application callback must not stop the pull task
            log.exception("arrival listener of %s failed", self.group)

    def _wake_async_waiters(self) -> None:
        """Wake the ``apoll`` callers (call with ``self._cond`` held; any thread)."""
        waiters, self._async_waiters = self._async_waiters, []
        for loop, waiter in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_set_done, waiter)

    def _queue_state(self, mq: MessageQueue) -> _QueueState:
        st = self._states.get(mq)
        if st is None or st.pq.dropped:
            raise IllegalArgumentError(f"{mq} is not assigned to this consumer")
        return st

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Consume ``mq`` from ``offset`` next (Java ``seek``): its messages pulled and not yet
        polled are dropped, pulls in flight are ignored, and the next :meth:`poll` of the queue
        starts at ``offset``. The consumed position moves too (committed at the next commit).
        Asks the broker for the queue's min and max offsets first (two round trips).

        Args:
            mq: a queue of :meth:`assignment`.
            offset: the queue offset (``min_offset(mq)`` ≤ offset ≤ ``max_offset(mq)``).

        Raises:
            IllegalArgumentError: ``mq`` not being consumed, or ``offset`` outside [min, max].
            ClientStateError: not started. MQBrokerError, RemotingError: the offset look-ups.
        """
        st = self._queue_state(mq)
        lo, hi = self.min_offset(mq), self.max_offset(mq)
        if not lo <= offset <= hi:
            raise IllegalArgumentError(f"seek offset {offset} of {mq} is outside [{lo}, {hi}]")
        with st.lock:
            st.generation += 1
            st.pq.reset()
            st.pull_offset = st.consume_offset = offset

    def seek_to_begin(self, mq: MessageQueue) -> None:
        """:meth:`seek` to the queue's min offset (the oldest message still stored; Java
        ``seekToBegin``). Raises as :meth:`seek`."""
        self.seek(mq, self.min_offset(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        """:meth:`seek` to the queue's max offset (only messages stored from now on; Java
        ``seekToEnd``). Raises as :meth:`seek`."""
        self.seek(mq, self.max_offset(mq))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        """Stop pulling ``mqs`` (Java ``pause``) until :meth:`resume`; their messages already
        pulled can still be polled. Queues not being consumed are ignored. Takes effect within
        50 ms (a pull in flight still delivers)."""
        for mq in mqs:
            if mq in self._states:
                self._states[mq].paused = True

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        """Pull ``mqs`` again after :meth:`pause` (Java ``resume``); others are ignored."""
        for mq in mqs:
            if mq in self._states:
                self._states[mq].paused = False

    def commit_sync(self) -> None:
        """Commit: store the polled position (the offset after the last polled message) of every
        queue being consumed and persist the group's offsets now (Java ``commitSync``): to the
        brokers (UPDATE_CONSUMER_OFFSET, CLUSTERING) or the local offsets file (BROADCASTING).
        Blocks the calling thread up to 2 × (``mq_client_api_timeout`` + 1 s); a broker that
        fails is logged and gets the offset at the next periodic persist
        (``persist_consumer_offset_interval`` ms) or at shutdown.

        Raises:
            ClientStateError: not started.
        """
        self._store_polled_offsets()
        self.instance.run(self.offset_store.persist_all(self._offset_queues(), oneway=False), self._timeout_s() * 2)

    def _store_polled_offsets(self) -> None:
        self._last_commit = time.monotonic()
        store = self.offset_store
        for mq, st in list(self._states.items()):
            with st.lock:
                if not st.pq.dropped and st.consume_offset >= 0:
                    store.update_offset(mq, st.consume_offset, increase_only=False)

    def committed(self, mq: MessageQueue) -> int:
        """The group's stored offset of ``mq`` (Java ``committed``), read from the broker (or
        the offsets file in BROADCASTING): the next offset to consume; -1 when the group has
        none, -2 when the broker lookup failed.

        Raises:
            ClientStateError: not started.
        """
        return self.instance.run(self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE), self._timeout_s())

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The offset of the message stored nearest ``timestamp_ms`` (epoch ms; Java
        ``offsetForTimestamp``, SEARCH_OFFSET_BY_TIMESTAMP), e.g. for :meth:`seek`.

        Raises:
            ClientStateError: not started. MQBrokerError, RemotingError.
        """
        return self.search_offset(mq, timestamp_ms)

    def lag_report(self, topic: str | None = None) -> list[QueueLag]:
        """Per-queue backlog of the queues being consumed (see ``PushConsumer.lag_report``);
        the consumer offset is the last committed position."""
        queues = [(mq, st.pq) for mq, st in list(self._states.items())
                  if not st.pq.dropped and (topic is None or mq.topic == topic)]
        return self.instance.run(collect_lags(self.instance, self.offset_store, queues), self._timeout_s() * 2)

    def __repr__(self) -> str:
        return f"LitePullConsumer(group={self.group!r}, state={self.state.name})"
