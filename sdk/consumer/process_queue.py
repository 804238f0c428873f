"""``ProcessQueue``: the messages pulled from one queue and not yet consumed (Java
``ProcessQueue``).

The committed offset of a queue is the lowest offset still in flight, or, once nothing is in
flight, the highest offset consumed + 1 (docs/protocol.md §7): committing nothing when drained would
replay the last message after a restart.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable

from ..protocol.message import MessageExt

__all__ = ["ProcessQueue"]


class ProcessQueue:
    """Thread-safe: the pull loop adds messages, consume threads remove them.

    Attributes:
        dropped: set when the queue is no longer ours (rebalance, shutdown, illegal offset); the
            pull loop stops and results of in-flight listeners no longer move the offset.
        last_pull_timestamp / last_consume_timestamp: ``time.monotonic()`` seconds.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # offsets are added in ascending order, so the first key is always the lowest
        self._msgs: OrderedDict[int, MessageExt] = OrderedDict()
        self._size = 0
        self.queue_offset_max = -1
        self.dropped = False
        self.last_pull_timestamp = time.monotonic()
        self.last_consume_timestamp = time.monotonic()
        # orderly consumption (Java consumingMsgOrderlyTreeMap, locked, consumeLock)
        self._consuming: OrderedDict[int, MessageExt] = OrderedDict()
        #: the broker granted this client the queue's lock (orderly, clustering).
        self.locked = False
        #: ``time.monotonic()`` of the last successful LOCK_BATCH_MQ.
        self.last_lock_timestamp = time.monotonic()
        #: held by the thread running the orderly listener of this queue (one at a time).
        self.consume_lock = threading.Lock()
        #: an orderly consume request of this queue is queued or running.
        self.consume_scheduled = False

    @property
    def msg_count(self) -> int:
        """Messages cached, including those an orderly listener is consuming."""
        return len(self._msgs) + len(self._consuming)

    def is_lock_expired(self, max_live_s: float = 30.0) -> bool:
        """True once ``max_live_s`` (Java client lock TTL, 30 s) passed since the last lock."""
        return time.monotonic() - self.last_lock_timestamp > max_live_s

    # -------------------------------------------------------------- orderly

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move the ``batch_size`` lowest cached messages to the consuming set (orderly)."""
        with self._lock:
            out: list[MessageExt] = []
            while self._msgs and len(out) < batch_size:
                off, m = self._msgs.popitem(last=False)
                self._consuming[off] = m
                out.append(m)
            return out

    def commit(self) -> int:
        """Forget the consuming set and return the offset after it (orderly), or -1."""
        with self._lock:
            if not self._consuming:
                return -1
            offset = next(reversed(self._consuming)) + 1
            self._size -= sum(len(m.body) for m in self._consuming.values())
            self._consuming.clear()
            self.last_consume_timestamp = time.monotonic()
            return offset

    def make_messages_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        """Put taken messages back in front of the cache (orderly, suspended batch)."""
        with self._lock:
            back = [(m.queue_offset, m) for m in msgs if self._consuming.pop(m.queue_offset, None) is not None]
            for off, m in sorted(back, reverse=True):
                self._msgs[off] = m
                self._msgs.move_to_end(off, last=False)

    def has_messages(self) -> bool:
        with self._lock:
            return bool(self._msgs)

    @property
    def msg_size(self) -> int:
        """Total body bytes of the cached messages."""
        return self._size

    def put_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Add pulled messages; offsets not above the highest seen are ignored (a duplicate
        pull), which keeps the in-flight map in ascending order. Returns the number added."""
        added = size = 0
        with self._lock:
            top, cache = self.queue_offset_max, self._msgs
            for m in msgs:
                off = m.queue_offset
                if off > top:
                    top = off
                    cache[off] = m
                    size += len(m.body)
                    added += 1
            self.queue_offset_max = top
            self._size += size
        return added

    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Remove consumed messages and return the offset to commit: the lowest offset still in
        flight, else ``queue_offset_max + 1``; -1 when nothing was in flight."""
        with self._lock:
            if not self._msgs:
                return -1
            self.last_consume_timestamp = time.monotonic()
            cache, size = self._msgs, 0
            for m in msgs:
                if cache.pop(m.queue_offset, None) is not None:
                    size += len(m.body)
            self._size -= size
            if cache:
                return next(iter(cache))
            return self.queue_offset_max + 1

    def max_span(self) -> int:
        """Highest minus lowest cached offset (0 when at most one is cached)."""
        with self._lock:
            if len(self._msgs) < 2:
                return 0
            return next(reversed(self._msgs)) - next(iter(self._msgs))

    def first_message(self) -> MessageExt | None:
        """The cached message with the lowest offset."""
        with self._lock:
            return next(iter(self._msgs.values()), None)

    def min_offset_in_flight(self) -> int | None:
        with self._lock:
            return next(iter(self._msgs), None)

    def reset(self) -> None:
        """Forget every cached message and the highest offset seen (after a seek)."""
        with self._lock:
            self._msgs.clear()
            self._consuming.clear()
            self._size = 0
            self.queue_offset_max = -1

    def clear(self) -> None:
        with self._lock:
            self._msgs.clear()
            self._consuming.clear()
            self._size = 0
