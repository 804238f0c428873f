"""Which offset of a message queue may be committed while acknowledgements come out of order.

Every message taken from a queue is *pending* until it is settled (acked, rejected, requeued,
dropped as expired). The committable offset of a queue is its lowest pending offset, or one
past the highest offset taken when nothing is pending: the committed offset never passes a
message that is not settled, so a crash redelivers exactly the unsettled ones (and possibly
settled ones after them: at-least-once, as RocketMQ's own consumers).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Hashable

__all__ = ["OffsetTracker"]


class _Queue:
    __slots__ = ("heap", "pending", "high", "committed")

    def __init__(self) -> None:
        self.heap: list[int] = []
        self.pending: set[int] = set()
        self.high = -1          # one past the highest offset taken, -1: nothing taken yet
        self.committed = -1     # the last offset handed out by committable()


class OffsetTracker:
    """Thread-safe pending-offset bookkeeping per message queue (any hashable key)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[Hashable, _Queue] = {}

    def taken(self, mq: Hashable, offset: int) -> None:
        """``offset`` of ``mq`` was taken from the broker and is now pending."""
        with self._lock:
            q = self._queues.get(mq)
            if q is None:
                q = self._queues[mq] = _Queue()
            if offset not in q.pending:
                q.pending.add(offset)
                heapq.heappush(q.heap, offset)
            q.high = max(q.high, offset + 1)

    def settled(self, mq: Hashable, offset: int) -> None:
        """``offset`` of ``mq`` needs no redelivery any more (unknown offsets are ignored)."""
        with self._lock:
            q = self._queues.get(mq)
            if q is not None:
                q.pending.discard(offset)

    def committable(self, mq: Hashable) -> int:
        """The offset that may be committed for ``mq`` (-1: none yet)."""
        with self._lock:
            q = self._queues.get(mq)
            if q is None:
                return -1
            heap = q.heap
            while heap and heap[0] not in q.pending:
                heapq.heappop(heap)
            return heap[0] if heap else q.high

    def pending_count(self, mq: Hashable | None = None) -> int:
        """Messages taken and not settled, of ``mq`` or of all queues."""
        with self._lock:
            if mq is not None:
                q = self._queues.get(mq)
                return len(q.pending) if q else 0
            return sum(len(q.pending) for q in self._queues.values())

    def high(self, mq: Hashable) -> int:
        """One past the highest offset taken of ``mq`` (-1: nothing taken)."""
        with self._lock:
            q = self._queues.get(mq)
            return q.high if q else -1

    def skip_to(self, mq: Hashable, offset: int) -> None:
        """Offsets of ``mq`` before ``offset`` need no redelivery any more (the group's offset was
        reset past them): they stop being pending; those at or after it keep their state."""
        with self._lock:
            q = self._queues.get(mq)
            if q is None:
                q = self._queues[mq] = _Queue()
            q.pending = {o for o in q.pending if o >= offset}
            q.heap = sorted(q.pending)
            q.high = max(q.high, offset)

    def forget(self, mq: Hashable) -> None:
        """Drop ``mq``'s state (the queue went to another consumer or was purged)."""
        with self._lock:
            self._queues.pop(mq, None)

    def queues(self) -> list[Hashable]:
        with self._lock:
            return list(self._queues)
