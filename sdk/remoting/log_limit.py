"""A rate limit for log lines a peer can provoke (bad requests, malformed frames).

A server fed garbage must not fill its disk with logs: :class:`RateLimitedLog` lets at most
``burst`` lines through per ``interval_s`` window, counts the rest, and reports the count in one
line when the next window opens. Tracebacks go to DEBUG only.
"""

from __future__ import annotations

import logging
import threading
import time


class RateLimitedLog:
    """WARNING lines of ``logger``, at most ``burst`` per ``interval_s`` seconds.

    Args:
        logger: where the lines go.
        burst: lines let through per window (default 20).
        interval_s: window length in seconds (default 10.0).
    """

    def __init__(self, logger: logging.Logger, burst: int = 20, interval_s: float = 10.0) -> None:
        self.logger = logger
        self.burst = burst
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._window_start = time.monotonic()
        self._count = 0
        self.suppressed = 0  # lines dropped in the current window
        self.total_suppressed = 0

    def _admit(self) -> bool:
        now = time.monotonic()
        with self._lock:
            if now - self._window_start >= self.interval_s:
                dropped, self.suppressed = self.suppressed, 0
                self._window_start = now
                self._count = 0
                if dropped:
                    self.logger.warning("%d similar log lines suppressed in the last %.0f s", dropped,
                                        self.interval_s)
            if self._count < self.burst:
                self._count += 1
                return True
            self.suppressed += 1
            self.total_suppressed += 1
            return False

    def warning(self, msg: str, *args: object, exc: BaseException | None = None) -> bool:
        """Log ``msg % args`` at WARNING (and ``exc``'s traceback at DEBUG) unless the window's
        budget is spent; returns whether the line was written."""
        if not self._admit():
            return False
        self.logger.warning(msg, *args)
        if exc is not None and self.logger.isEnabledFor(logging.DEBUG):
            self.logger.debug("traceback of the above", exc_info=exc)
        return True
