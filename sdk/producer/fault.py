"""Latency fault tolerance of producers (Java ``MQFaultStrategy`` + ``LatencyFaultToleranceImpl``,
docs/protocol.md §6.2).

After every send attempt the producer records the broker's latency; a latency above a threshold
(or a failure, counted as 30 s) makes the broker "not available" for the matching duration, and
queue selection skips it while another broker is available.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..client.route import TopicPublishInfo
from ..protocol.message import MessageQueue

__all__ = ["DEFAULT_LATENCY_MAX", "DEFAULT_NOT_AVAILABLE_DURATION", "FaultItem", "LatencyFaultTolerance",
           "MQFaultStrategy"]

#: Latency thresholds, ms (Java ``latencyMax``).
DEFAULT_LATENCY_MAX: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
#: Not-available durations matching :data:`DEFAULT_LATENCY_MAX`, ms (Java ``notAvailableDuration``).
DEFAULT_NOT_AVAILABLE_DURATION: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)
#: Latency charged for a failed attempt (isolation), ms.
ISOLATION_LATENCY_MS = 30_000


def _now_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass(slots=True)
class FaultItem:
    """One broker's last latency (ms) and the monotonic time (ms) it becomes available again."""

    name: str
    current_latency: float
    start_timestamp: float

    @property
    def available(self) -> bool:
        return _now_ms() >= self.start_timestamp


class LatencyFaultTolerance:
    """Broker name → :class:`FaultItem`; thread-safe."""

    def __init__(self) -> None:
        self._items: dict[str, FaultItem] = {}
        self._lock = threading.Lock()
        self._worst = itertools.count(random.randrange(1 << 31))

    def update(self, name: str, latency_ms: float, not_available_ms: float) -> None:
        with self._lock:
            self._items[name] = FaultItem(name, latency_ms, _now_ms() + not_available_ms)

    def is_available(self, name: str) -> bool:
        item = self._items.get(name)
        return item is None or item.available

    def remove(self, name: str) -> None:
        with self._lock:
            self._items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """A broker among the better half (available first, then lower latency, then sooner
        available), rotating; None when nothing is recorded."""
        with self._lock:
            items = list(self._items.values())
        if not items:
            return None
        items.sort(key=lambda i: (not i.available, i.current_latency, i.start_timestamp))
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        return items[(next(self._worst) & 0x7FFFFFFF) % half].name

    def items(self) -> dict[str, FaultItem]:
        """A snapshot of the table (for tests and diagnostics)."""
        with self._lock:
            return dict(self._items)


class MQFaultStrategy:
    """Queue selection with or without latency fault tolerance.

    Args:
        enabled: ``send_latency_fault_enable`` (default False: plain round robin avoiding the
            broker that just failed).
        latency_max: thresholds, ms.
        not_available_duration: durations for each threshold, ms (same length).

    Raises:
        ValueError: tables of different lengths.
    """

    def __init__(self, enabled: bool = False, latency_max: Sequence[int] = DEFAULT_LATENCY_MAX,
                 not_available_duration: Sequence[int] = DEFAULT_NOT_AVAILABLE_DURATION) -> None:
        if len(latency_max) != len(not_available_duration):
            raise ValueError("latency_max and not_available_duration must have the same length")
        self.enabled = enabled
        self.latency_max = tuple(latency_max)
        self.not_available_duration = tuple(not_available_duration)
        self.table = LatencyFaultTolerance()

    def compute_not_available(self, latency_ms: float) -> int:
        """Duration (ms) for the largest threshold ``latency_ms`` reaches, else 0."""
        for i in range(len(self.latency_max) - 1, -1, -1):
            if latency_ms >= self.latency_max[i]:
                return self.not_available_duration[i]
        return 0

    def update_fault_item(self, broker: str, latency_ms: float, isolation: bool) -> None:
        """Record an attempt's outcome (no-op unless enabled)."""
        if not self.enabled:
            return
        latency = ISOLATION_LATENCY_MS if isolation else latency_ms
        self.table.update(broker, latency, self.compute_not_available(latency))

    def select_one_queue(self, info: TopicPublishInfo, last_broker: str | None) -> MessageQueue:
        """Pick the queue of the next attempt (docs/protocol.md §6.2).

        Raises:
            IndexError: the topic has no writable queue.
        """
        if not self.enabled:
            return info.select_one_queue(last_broker)
        queues = info.queues
        n = len(queues)
        start = next(info.send_which_queue)
        for i in range(n):
            mq = queues[((start + i) & 0x7FFFFFFF) % n]
            if self.table.is_available(mq.broker_name):
                return mq
        name = self.table.pick_one_at_least()
        if name is not None:
            own = [q for q in queues if q.broker_name == name]
            if own:
                return own[(next(info.send_which_queue) & 0x7FFFFFFF) % len(own)]
            self.table.remove(name)
        return info.select_one_queue(None)
