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

# row layout: [start, pull_rt_sum, pulls, pulled_msgs, consume_rt_sum, consume_batches, ok_msgs, failed_msgs]
_PULL_RT, _PULLS, _PULLED, _CONSUME_RT, _BATCHES, _OK, _FAILED = range(1, 8)
_monotonic = time.monotonic


def _new_row(start: int) -> list[float]:
    return [start, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


class TopicStats:
    """Pull and consume counters of one topic of one consumer group (thread-safe).

    Recording adds to the current second's row; when the second changes, the finished row is
    folded into its minute's row (one-minute buckets, last hour) and a new row starts (one-second
    buckets, last minute)."""

    __slots__ = ("_cur", "_hour", "_lock", "_minute")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cur = _new_row(-1)  # the current second's row (also the last of _minute)
        self._minute: deque[list[float]] = deque()  # one-second rows
        self._hour: deque[list[float]] = deque()  # one-minute rows, without _cur

    def record_pull(self, rt_ms: float, found: int, *, now: float | None = None) -> None:
        """One pull that found ``found`` messages after ``rt_ms`` milliseconds (Java
        ``incPullRT`` + ``incPullTPS``, on FOUND). ``now``: ``time.monotonic()`` (tests)."""
        t = int(_monotonic() if now is None else now)
        with self._lock:
            c = self._cur if self._cur[0] == t else self._roll(t)
            c[1] += rt_ms
            c[2] += 1
            c[3] += found

    def record_consume(self, rt_ms: float, ok: int, failed: int, *, calls: int = 1, now: float | None = None) -> None:
        """``calls`` listener calls (default 1) that took ``rt_ms`` milliseconds in all,
        acknowledged ``ok`` messages and failed ``failed`` (RECONSUME_LATER /
        SUSPEND_CURRENT_QUEUE_A_MOMENT; Java ``incConsumeRT`` per call + ``incConsumeOKTPS`` +
        ``incConsumeFailedTPS``). ``now``: ``time.monotonic()`` (tests)."""
        t = int(_monotonic() if now is None else now)
        with self._lock:
            c = self._cur if self._cur[0] == t else self._roll(t)
            c[4] += rt_ms
            c[5] += calls
            c[6] += ok
            c[7] += failed

    def _roll(self, t: int) -> list[float]:
        """(under the lock) folds the finished second into its minute, starts second ``t``."""
        done = self._cur
        if done[0] >= 0:
            m = int(done[0]) // MINUTE_S
            hour = self._hour
            if not hour or hour[-1][0] != m:
                hour.append(_new_row(m))
                while hour[0][0] <= m - HOUR_S // MINUTE_S:
                    hour.popleft()
            row = hour[-1]
            for i in range(1, 8):
                row[i] += done[i]
        self._cur = cur = _new_row(t)
        minute = self._minute
        minute.append(cur)
        while minute[0][0] <= t - MINUTE_S:
            minute.popleft()
        return cur

    def _sums(self, t: int) -> tuple[list[float], list[float]]:
        """(last minute, last hour) sums at second ``t``."""
        mn, hr = [0.0] * 8, [0.0] * 8
        m = t // MINUTE_S
        with self._lock:
            rows = [(r, mn) for r in self._minute if r[0] > t - MINUTE_S]
            rows += [(r, hr) for r in self._hour if r[0] > m - HOUR_S // MINUTE_S]
            if self._cur[0] >= 0 and self._cur[0] // MINUTE_S > m - HOUR_S // MINUTE_S:
                rows.append((list(self._cur), hr))
        for r, total in rows:
            for i in range(1, 8):
                total[i] += r[i]
        return mn, hr

    def consume_status(self, now: float | None = None) -> dict[str, float | int]:
        """Java ``ConsumeStatus`` as JSON fields: ``pullRT`` and ``consumeRT`` average ms per
        pull / listener call over the last minute (``consumeRT`` over the last hour when the
        minute had none), ``pullTPS``, ``consumeOKTPS`` and ``consumeFailedTPS`` messages per
        second over the last 60 s, ``consumeFailedMsgs`` failed messages in the last hour."""
        mn, hr = self._sums(int(time.monotonic() if now is None else now))
        consume_rt = (mn[_CONSUME_RT] / mn[_BATCHES] if mn[_BATCHES]
                      else hr[_CONSUME_RT] / hr[_BATCHES] if hr[_BATCHES] else 0.0)
        return {  # in the order Java's fastjson writes them (by name)
            "consumeFailedMsgs": int(hr[_FAILED]),
            "consumeFailedTPS": mn[_FAILED] / MINUTE_S,
            "consumeOKTPS": mn[_OK] / MINUTE_S,
            "consumeRT": consume_rt,
            "pullRT": mn[_PULL_RT] / mn[_PULLS] if mn[_PULLS] else 0.0,
            "pullTPS": mn[_PULLED] / MINUTE_S,
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
