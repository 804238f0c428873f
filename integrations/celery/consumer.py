"""One kombu queue's consumer: a RocketMQ ``LitePullConsumer`` of the queue's group plus the
acknowledgement bookkeeping that decides which offsets may be committed.

The lite-pull consumer pulls the queue's topics (one per priority step, plus the topic of each
fanout exchange the queue is bound to) in the background, with the group's rebalance sharing the
message queues among every consumer of the kombu queue (competing consumers across worker
processes). Each pulled batch moves into per-priority buffers on the SDK's I/O thread (its
arrival listener, no thread of ours: one thread hand-off less per batch), or, while the buffers
are full, as the channel takes from them; the channel takes from the highest-priority buffer
first. Auto-commit is off: after every settlement the
group's offset of that message queue is set to :meth:`OffsetTracker.committable` (the lowest
unsettled offset), and the client instance persists it every ``commit_interval`` ms.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from rocketmq_sdk.consumer import LitePullConsumer
from rocketmq_sdk.exceptions import ClientStateError, MQError
from rocketmq_sdk.protocol.message import MessageExt, MessageQueue

from .offsets import OffsetTracker

__all__ = ["QueueConsumer"]

log = logging.getLogger("rocketmq_sdk.integrations.celery")

class QueueConsumer:
    """Consumer of one kombu queue in one connection.

    Args:
        queue: kombu queue name.
        group: its consumer group.
        topics: ``{topic: priority step}`` to read (fanout topics with step 0).
        on_arrival: called (no arguments) after new messages were buffered; more listeners
            with :meth:`add_listener` (every connection of the process sharing the consumer).
        buffer_limit: leave pulled batches in the lite-pull consumer while this many messages
            wait in the buffers (its ``pull_threshold_for_queue``/``_all`` then stop the pulls).
        **consumer_kwargs: :class:`~rocketmq_sdk.config.LitePullConsumerConfig` settings.
    """

    def __init__(self, queue: str, group: str, topics: dict[str, int], on_arrival: Callable[[], None], *,
                 buffer_limit: int = 64, **consumer_kwargs: Any) -> None:
        self.queue = queue
        self.group = group
        self.topics = dict(topics)
        self._listeners: list[Callable[[], None]] = [on_arrival]
        self.buffer_limit = buffer_limit
        self.tracker = OffsetTracker()
        self._lock = threading.Condition()
        # per priority step, a heap in store order (store time, then commit-log offset): one
        # step's messages come from several message queues but leave in the order they were stored
        self._buffers: dict[int, list[tuple[int, int, int, MessageQueue, MessageExt]]] = {}
        self._seq = itertools.count()
        self._buffered = 0
        self._closed = False
        self.lite = LitePullConsumer(group, auto_commit=False, **consumer_kwargs)
        # a purge by another process (another worker, ``celery purge``) resets the group's
        # offsets through the broker, which tells this consumer (see Channel._purge)
        self.lite.set_offset_reset_listener(self._on_offset_reset)
        for topic in self.topics:
            self.lite.subscribe(topic, "*")
        self.lite.set_arrival_listener(self._on_pulled)
        self.lite.start()

    def add_listener(self, listener: Callable[[], None]) -> None:
        if listener not in self._listeners:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ topics

    def add_topic(self, topic: str, step: int = 0) -> None:
        """Also read ``topic`` (a fanout exchange bound later, a new priority step)."""
        if topic in self.topics:
            return
        self.topics[topic] = step
        self.lite.subscribe(topic, "*")

    # ------------------------------------------------------------------ pulling

    def _on_pulled(self) -> None:
        """The SDK's arrival listener (on its I/O thread): buffer what was pulled, then tell the
        connections (no thread of ours in between)."""
        with self._lock:
            added = self._fill()
        if added:
            for listener in list(self._listeners):
                listener()

    def _fill(self) -> int:
        """(Lock held.) Move pulled batches from the lite-pull consumer into the buffers while
        they hold fewer than ``buffer_limit`` messages (what stays there is taken as the
        buffers drain, see :meth:`take`); the number of messages moved."""
        added = 0
        while self._buffered < self.buffer_limit and not self._closed:
            try:
                msgs = self.lite.poll(0)
            except ClientStateError:
                break
            if not msgs:
                break
            for m in msgs:
                mq = MessageQueue(m.topic, m.broker_name, m.queue_id)
                self.tracker.taken(mq, m.queue_offset)
                step = self.topics.get(m.topic, 0)
                heapq.heappush(self._buffers.setdefault(step, []),
                               (m.store_timestamp, m.commit_log_offset, next(self._seq), mq, m))
            self._buffered += len(msgs)
            added += len(msgs)
        if added:
            self._lock.notify_all()
        return added

    def take(self) -> tuple[MessageQueue, MessageExt] | None:
        """The next buffered message, highest priority step first (lowest step number), in
        store order within a step; None
        when nothing is buffered. Messages of queues this consumer no longer owns are skipped
        (their new owner reads them from the committed offset)."""
        with self._lock:
            if self._buffered < self.buffer_limit:
                self._fill()
            if not self._buffered:
                return None
            owns = self.lite.owns
            for step in sorted(self._buffers):
                buf = self._buffers[step]
                while buf:
                    _, _, _, mq, m = heapq.heappop(buf)
                    self._buffered -= 1
                    if owns(mq):
                        return mq, m
            return None

    @property
    def buffered(self) -> int:
        return self._buffered

    # ------------------------------------------------------------------ acks

    def settle(self, mq: MessageQueue, offset: int) -> None:
        """The message at ``offset`` of ``mq`` is done with: commit what may be committed."""
        self.tracker.settled(mq, offset)
        committable = self.tracker.committable(mq)
        if committable < 0 or self._closed:
            return
        store = self.lite.offset_store
        if store is not None and self.lite.owns(mq):
            store.update_offset(mq, committable, increase_only=True)

    def commit_now(self) -> None:
        """Persist the committable offsets now (waits for the brokers)."""
        if self._closed or not self.lite.running:
            return
        store = self.lite.offset_store
        assigned = self.lite.assignment()
        for mq in self.tracker.queues():
            off = self.tracker.committable(mq)
            if off >= 0 and mq in assigned:
                store.update_offset(mq, off, increase_only=True)
        self.lite.instance.run(store.persist_all(assigned, oneway=False), 10.0)

    # ------------------------------------------------------------------ catching up

    def wait_caught_up(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until every message stored in the owned message queues
        when called has been pulled into the buffers: a ``basic_get`` or the first delivery
        after ``basic_consume`` then sees the whole backlog in priority order."""
        deadline = time.monotonic() + timeout_s
        need: dict[MessageQueue, int] = {}
        try:
            for mq in self.lite.assignment():
                hi = self.lite.max_offset(mq)
                have = self.tracker.high(mq)
                if have < 0:
                    have = self.lite.committed(mq)
                    if have < 0:
                        have = self.lite.min_offset(mq)
                if hi > have:
                    need[mq] = hi
        except MQError as exc:
            log.debug("catch-up check of %s failed: %s", self.queue, exc)
            return
        with self._lock:
            while need:
                self._fill()
                need = {mq: hi for mq, hi in need.items() if self.tracker.high(mq) < hi}
                remaining = deadline - time.monotonic()
                if not need or remaining <= 0 or self._buffered >= self.buffer_limit:
                    return
                self._lock.wait(min(remaining, 0.05))

    # ------------------------------------------------------------------ purge / close

    def purge_local(self) -> int:
        """Drop the buffered messages and move every owned message queue to its end; returns
        the number of buffered messages dropped."""
        with self._lock:
            dropped = self._buffered
            self._buffers.clear()
            self._buffered = 0
        for mq in self.lite.assignment():
            try:
                self.lite.seek_to_end(mq)
            except MQError as exc:
                log.warning("purge of %s: seek of %s failed: %s", self.queue, mq, exc)
            self.tracker.forget(mq)
        try:
            store = self.lite.offset_store
            for mq in self.lite.assignment():
                store.update_offset(mq, self.lite.max_offset(mq), increase_only=False)
        except MQError as exc:
            log.warning("purge of %s: offset update failed: %s", self.queue, exc)
        return dropped

    def _on_offset_reset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """The broker moved the group's offsets (a purge elsewhere): drop the messages of those
        message queues stored before the new offsets and not delivered yet, and read on from
        there; the messages already delivered stay with their deliveries (their acks no longer
        hold the committed offset back). Messages at or after a new offset (stored after the
        purge and pulled before this reset arrived) are kept."""
        assigned = self.lite.assignment()
        mqs = {mq: off for mq, off in offsets.items() if mq in assigned}
        if not mqs or self._closed:
            return
        for mq, off in mqs.items():
            if self.tracker.high(mq) <= off:   # nothing at or after off taken yet: pull from off
                try:
                    self.lite.seek(mq, off)    # the SDK's own buffer and the pulls in flight
                except MQError as exc:
                    log.warning("offset reset of %s: seek of %s to %d failed: %s", self.queue, mq, off, exc)
        with self._lock:
            for step, buf in list(self._buffers.items()):
                kept = [e for e in buf if e[3] not in mqs or e[4].queue_offset >= mqs[e[3]]]
                self._buffered -= len(buf) - len(kept)
                heapq.heapify(kept)
                self._buffers[step] = kept
            for mq, off in mqs.items():
                self.tracker.skip_to(mq, off)
            self._lock.notify_all()
        log.info("queue %s: the group's offsets of %s were reset (a purge): buffered messages before them dropped",
                 self.queue, topic)

    def close(self) -> None:
        """Persist the committable offsets and leave the group (idempotent)."""
        if self._closed:
            return
        try:
            self.commit_now()
        except MQError as exc:
            log.warning("final commit of %s failed: %s", self.queue, exc)
        self._closed = True
        self.lite.set_arrival_listener(None)
        with self._lock:
            self._lock.notify_all()
        self.lite.shutdown()
