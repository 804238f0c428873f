"""Per-topic pull and consume statistics of a push consumer (Java ``ConsumerStatsManager``),
sent as the ``statusTable`` of GET_CONSUMER_RUNNING_INFO (Java ``ConsumeStatus``).

Each topic keeps counters in one-second buckets for the last minute and one-minute buckets for
the last hour. Recording costs one uncontended lock per pull or per consumed batch (never per
message); reading sums the buckets.
"""

from __future__ import annotations

import threading
import time
from collections import deque

__all__ = ["ConsumerStats", "TopicStats"]

MINUTE_S = 60
HOUR_S = 3600

# bucket layout: [start, pull_rt_sum, pulls, pulled_msgs, consume_rt_sum, consume_batches, ok_msgs, failed_msgs]
_PULL_RT, _PULLS, _PULLED, _CONSUME_RT, _BATCHES, _OK, _FAILED = range(1, 8)


def _add(buckets: deque[list[float]], start: int, keep_after: int, values: tuple[tuple[int, float], ...]) -> None:
    """Adds each (field, value) of ``values`` to the bucket starting at ``start``; buckets
    starting at or before ``keep_after`` are dropped."""
    if buckets and buckets[-1][0] == start:
        row = buckets[-1]
    else:
        row = [start, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        buckets.append(row)
        while buckets[0][0] <= keep_after:
            buckets.popleft()
    for idx, v in values:
        row[idx] += v


class TopicStats:
    """Pull and consume counters of one topic of one consumer group (thread-safe)."""

    __slots__ = ("_hour", "_lock", "_minute")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._minute: deque[list[float]] = deque()  # one-second buckets
        self._hour: deque[list[float]] = deque()  # one-minute buckets

    def record_pull(self, rt_ms: float, found: int, now: float | None = None) -> None:
        """One pull that found ``found`` messages after ``rt_ms`` milliseconds (Java
        ``incPullRT`` + ``incPullTPS``, on FOUND)."""
        self._record(((_PULL_RT, rt_ms), (_PULLS, 1), (_PULLED, found)), now)

    def record_consume(self, rt_ms: float, ok: int, failed: int, now: float | None = None) -> None:
        """One listener call of ``rt_ms`` milliseconds that acknowledged ``ok`` messages and
        failed ``failed`` (RECONSUME_LATER / SUSPEND_CURRENT_QUEUE_A_MOMENT; Java ``incConsumeRT``
        + ``incConsumeOKTPS`` + ``incConsumeFailedTPS``)."""
        self._record(((_CONSUME_RT, rt_ms), (_BATCHES, 1), (_OK, ok), (_FAILED, failed)), now)

    def _record(self, values: tuple[tuple[int, float], ...], now: float | None) -> None:
        t = int(time.monotonic() if now is None else now)
        with self._lock:
            _add(self._minute, t, t - MINUTE_S, values)
            m = t // MINUTE_S
            _add(self._hour, m, m - HOUR_S // MINUTE_S, values)

    def _sums(self, buckets: deque[list[float]], after: int) -> list[float]:
        total = [0.0] * 8
        with self._lock:
            rows = [r for r in buckets if r[0] > after]
        for r in rows:
            for i in range(1, 8):
                total[i] += r[i]
        return total

    def consume_status(self, now: float | None = None) -> dict[str, float | int]:
        """Java ``ConsumeStatus`` as JSON fields: ``pullRT`` and ``consumeRT`` average ms per
        pull / listener call over the last minute (``consumeRT`` over the last hour when the
        minute had none), ``pullTPS``, ``consumeOKTPS`` and ``consumeFailedTPS`` messages per
        second over the last 60 s, ``consumeFailedMsgs`` failed messages in the last hour."""
        t = int(time.monotonic() if now is None else now)
        mn = self._sums(self._minute, t - MINUTE_S)
        hr = self._sums(self._hour, t // MINUTE_S - HOUR_S // MINUTE_S)
        consume_rt = (mn[_CONSUME_RT] / mn[_BATCHES] if mn[_BATCHES]
                      else hr[_CONSUME_RT] / hr[_BATCHES] if hr[_BATCHES] else 0.0)
        return {
            "pullRT": mn[_PULL_RT] / mn[_PULLS] if mn[_PULLS] else 0.0,
            "pullTPS": mn[_PULLED] / MINUTE_S,
            "consumeRT": consume_rt,
            "consumeOKTPS": mn[_OK] / MINUTE_S,
            "consumeFailedTPS": mn[_FAILED] / MINUTE_S,
            "consumeFailedMsgs": int(hr[_FAILED]),
        }


class ConsumerStats:
    """The :class:`TopicStats` of every topic a push consumer pulled or consumed (Java
    ``ConsumerStatsManager``, keyed by topic: the group is the consumer's own). Topics are the
    message queues' topics, so redeliveries count under ``%RETRY%<group>`` as in Java."""

    __slots__ = ("_topics",)

    def __init__(self) -> None:
        self._topics: dict[str, TopicStats] = {}

    def topic(self, topic: str) -> TopicStats:
        """The counters of ``topic`` (created on first use)."""
        ts = self._topics.get(topic)
        if ts is None:
            ts = self._topics.setdefault(topic, TopicStats())
        return ts

    def status_table(self, now: float | None = None) -> dict[str, dict[str, float | int]]:
        """``{topic: ConsumeStatus fields}`` (see :meth:`TopicStats.consume_status`), the
        ``statusTable`` of GET_CONSUMER_RUNNING_INFO."""
        return {topic: ts.consume_status(now) for topic, ts in list(self._topics.items())}
