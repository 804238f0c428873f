"""``Rebalancer``: which queues of its subscribed topics a clustering consumer owns (Java
``RebalanceImpl`` / ``RebalancePushImpl``, docs/protocol.md §6.1).

On every rebalance (every 20 s, at start, and when the broker sends NOTIFY_CONSUMER_IDS_CHANGED)
each topic's read queues and the group's client ids, both sorted, go through the allocation
strategy. Queues no longer owned are dropped (their offset is persisted first); new ones get a
``ProcessQueue`` and a pull loop starting at the offset of docs/protocol.md §6.5.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..exceptions import MQError
from ..protocol.bodies import SubscriptionData
from ..protocol.message import MessageQueue
from .allocate import AllocateMessageQueueStrategy
from .offset_store import OffsetStore
from .process_queue import ProcessQueue
from .queue_lock import QueueLocker
from .start_offset import compute_start_offset

if TYPE_CHECKING:
    from ..client.instance import MQClientInstance
    from ..config import ConsumerConfig

__all__ = ["RebalanceOwner", "Rebalancer"]

log = logging.getLogger("rocketmq_sdk.consumer.rebalance")


class RebalanceOwner(Protocol):
    """What a :class:`Rebalancer` reads from the consumer it serves (``PushConsumer``,
    ``LitePullConsumer`` in subscribe mode): who it is and where its offsets live."""

    @property
    def group(self) -> str: ...

    @property
    def config(self) -> ConsumerConfig: ...  # consume_from_where, consume_timestamp

    @property
    def clustering(self) -> bool: ...

    @property
    def instance(self) -> MQClientInstance: ...

    @property
    def offset_store(self) -> OffsetStore: ...


#: ``start_pulling(mq, pq, offset)``: begin pulling a newly owned queue at ``offset`` (on the loop).
StartPulling = Callable[[MessageQueue, ProcessQueue, int], None]


def _no_locks() -> QueueLocker | None:
    return None


class Rebalancer:
    """Queue ownership of one consumer. Runs on the client instance's loop.

    Args:
        owner: the consumer (see :class:`RebalanceOwner`).
        strategy: the allocation strategy.
        start_pulling: called with each newly owned queue, its new ``ProcessQueue`` and its start
            offset.
        queue_locker: returns the broker locks to take before owning a queue and release after
            dropping it (orderly CLUSTERING consumers, Java ``RebalancePushImpl``), or None.

    Attributes:
        subscriptions: topic → subscription (the retry topic included).
        topic_queues: topic → its read queues (from the routes).
        process_queues: owned queue → its ``ProcessQueue``.
    """

    def __init__(self, owner: RebalanceOwner, strategy: AllocateMessageQueueStrategy, *,
                 start_pulling: StartPulling, queue_locker: Callable[[], QueueLocker | None] = _no_locks) -> None:
        self.consumer = owner
        self.strategy = strategy
        self._start_pulling = start_pulling
        self._queue_locker = queue_locker
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.topic_queues: dict[str, list[MessageQueue]] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self._lock: asyncio.Lock | None = None
        #: topic -> its queues at the first rebalance after start (empty: the topic did not exist)
        self._queues_at_start: dict[str, frozenset[MessageQueue]] = {}

    async def start_offset(self, mq: MessageQueue) -> int:
        """Where the owner starts ``mq`` (:func:`~rocketmq_sdk.consumer.start_offset.compute_start_offset`);
        -1: not now. A broadcasting owner reads a queue that appeared after it started from 0."""
        c = self.consumer
        at_start = self._queues_at_start.get(mq.topic)
        created_after_start = not c.clustering and at_start is not None and mq not in at_start
        return await compute_start_offset(mq, c.offset_store, c.instance,
                                          consume_from_where=c.config.consume_from_where,
                                          consume_timestamp=c.config.consume_timestamp, group=c.group,
                                          created_after_start=created_after_start)

    async def do_rebalance(self) -> None:
        """Rebalance every subscribed topic; concurrent calls (timer, broker notification,
        start) run one after the other."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            await self._do_rebalance()

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (220, Java ``resetOffset``): drop the owned queues of
        ``topic`` (in-flight results are discarded, orderly locks released), store ``offsets``
        (persisted at once), then rebalance so the queues restart from them."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            owned = [mq for mq in self.process_queues if mq.topic == topic]
            for mq in owned:
                await self.drop(mq)
            store = self.consumer.offset_store
            for mq, offset in offsets.items():
                if mq.topic == topic:
                    store.update_offset(mq, offset, increase_only=False)
                    await store.persist(mq, oneway=False)
            await store.persist_all(set(self.process_queues) | {mq for mq in offsets if mq.topic == topic},
                                    oneway=False)
            log.info("group %s: offsets of %s reset for %d queues", self.consumer.group, topic, len(offsets))
            await self._do_rebalance()

    async def _do_rebalance(self) -> None:
        for topic in list(self.subscriptions):
            try:
                await self._rebalance_topic(topic)
            except MQError as exc:
                log.warning("rebalance of %s for group %s failed: %s", topic, self.consumer.group, exc)
        for mq in [m for m, pq in self.process_queues.items() if m.topic not in self.subscriptions or pq.dropped]:
            await self.drop(mq)

    async def _find_consumer_ids(self, topic: str) -> list[str]:
        inst = self.consumer.instance
        route = inst.routes.get(topic)
        brokers = [b for b in (route.broker_datas if route else []) if b.broker_addrs]
        if not brokers:
            return []
        broker = random.choice(brokers)
        addr = broker.master_addr() or next(iter(broker.broker_addrs.values()))
        return await inst.api.get_consumer_id_list(addr, self.consumer.group)

    async def _rebalance_topic(self, topic: str) -> None:
        inst = self.consumer.instance
        mqs = self.topic_queues.get(topic)
        if not mqs:  # e.g. the retry topic, created by the broker on our first heartbeat
            await inst.update_topic_route(topic)
            mqs = self.topic_queues.get(topic)
            if not mqs:
                self._queues_at_start.setdefault(topic, frozenset())
                log.debug("group %s: no queues of topic %s yet", self.consumer.group, topic)
                return
        self._queues_at_start.setdefault(topic, frozenset(mqs))
        if not self.consumer.clustering:  # broadcasting: every instance owns every queue
            await self._update_process_queues(topic, set(mqs))
            return
        cids = await self._find_consumer_ids(topic)
        if not cids:
            log.warning("group %s: no consumer ids for topic %s", self.consumer.group, topic)
            return
        allocated = self.strategy.allocate(self.consumer.group, inst.client_id, sorted(mqs), sorted(cids))
        await self._update_process_queues(topic, set(allocated))

    async def _update_process_queues(self, topic: str, allocated: set[MessageQueue]) -> None:
        for mq in [m for m in self.process_queues if m.topic == topic and m not in allocated]:
            await self.drop(mq)
        new = sorted(allocated - self.process_queues.keys())
        locker = self._queue_locker()
        if new and locker is not None:
            granted = await locker.lock_batch(new)
            for mq in [m for m in new if m not in granted]:
                log.info("group %s: %s is locked by another client; retrying at the next rebalance",
                         self.consumer.group, mq)
            new = [m for m in new if m in granted]
        for mq in new:
            offset = await self.start_offset(mq)
            if offset < 0:
                log.warning("group %s: no start offset for %s; retrying at the next rebalance",
                            self.consumer.group, mq)
                continue
            pq = ProcessQueue()
            pq.locked = locker is not None
            self.process_queues[mq] = pq
            log.info("group %s now consumes %s from offset %d", self.consumer.group, mq, offset)
            self._start_pulling(mq, pq, offset)

    def owned_count(self, topic: str) -> int:
        """How many queues of ``topic`` this consumer owns now (dropped ones not yet forgotten
        included)."""
        return sum(1 for m in self.process_queues if m.topic == topic)

    def drop_all(self) -> list[MessageQueue]:
        """Shutdown: mark every owned queue dropped (pull loops and listeners stop settling
        them) and forget them all; returns them. Offsets and locks are the caller's business."""
        mqs = list(self.process_queues)
        for pq in self.process_queues.values():
            pq.dropped = True
        self.process_queues.clear()
        return mqs

    async def drop(self, mq: MessageQueue, *, reset_offset: int | None = None) -> None:
        """Stop consuming ``mq``: its pull loop ends, its offset is persisted and forgotten.

        With ``reset_offset`` (a pull answered OFFSET_ILLEGAL: the broker's next offset) the
        queue's offset is set to it first, so the next owner starts there (Java
        ``DefaultMQPushConsumerImpl.pullMessage``'s OFFSET_ILLEGAL task).

        Orderly clustering consumers first wait (up to 1 s, off the loop) for the listener
        running on the queue to finish, then release the broker lock after the offset is
        persisted; if the listener is still busy the queue stays (dropped) and the next
        rebalance tries again (Java ``removeUnnecessaryMessageQueue``)."""
        pq = self.process_queues.get(mq)
        if pq is None:
            return
        pq.dropped = True
        store = self.consumer.offset_store
        if reset_offset is not None:
            store.update_offset(mq, reset_offset, increase_only=False)
        locker = self._queue_locker()
        if locker is not None and not await asyncio.to_thread(pq.consume_lock.acquire, True, 1.0):
            log.info("group %s: %s is still being consumed; dropping it later", self.consumer.group, mq)
            return
        try:
            if self.process_queues.get(mq) is not pq:  # dropped meanwhile (and owned again?)
                return
            del self.process_queues[mq]
            await store.persist(mq, oneway=False)
            store.remove_offset(mq)
            if locker is not None:
                await locker.unlock_batch([mq])
        finally:
            if locker is not None:
                pq.consume_lock.release()
        log.info("group %s dropped %s", self.consumer.group, mq)
