"""``ConsumeTpsMeter``: messages pulled per consumer group per second (ConsumeStats.consumeTps)."""

from __future__ import annotations

import time
from collections import defaultdict, deque

__all__ = ["ConsumeTpsMeter"]


class ConsumeTpsMeter:
    """Messages pulled per consumer group, per second, over a sliding window.

    Args:
        window_s: the window in seconds (Java's ``consumeTps`` is a one-minute figure).
    """

    def __init__(self, window_s: int = 60) -> None:
        self.window_s = window_s
        self._counts: dict[str, deque[list[int]]] = defaultdict(deque)

    def add(self, group: str, count: int, now: float | None = None) -> None:
        sec = int(time.monotonic() if now is None else now)
        q = self._counts[group]
        if q and q[-1][0] == sec:
            q[-1][1] += count
        else:
            q.append([sec, count])
        while q and q[0][0] <= sec - self.window_s:
            q.popleft()

    def tps(self, group: str, now: float | None = None) -> float:
        sec = int(time.monotonic() if now is None else now)
        q = self._counts.get(group)
        if not q:
            return 0.0
        return sum(c for s, c in q if s > sec - self.window_s) / float(self.window_s)
