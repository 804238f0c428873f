"""Progress display: one live-updating line on a terminal, plain periodic lines when piped."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Shows ``label: done/total (pct) rate msg/s``.

    Args:
        label: what is counted (``"sent"``, ``"consumed"``).
        total: the expected final count.
        stream: where to write (default ``sys.stderr``).
        interval_s: minimum seconds between two outputs; default 0.2 on a terminal, 5 otherwise.
    """

    def __init__(self, label: str, total: int, stream: TextIO | None = None,
                 interval_s: float | None = None) -> None:
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval_s = interval_s if interval_s is not None else (0.2 if self.live else 5.0)
        self.started = time.monotonic()
        self._last_out = float("-inf")
        self._shown_live = False

    def line(self, done: int, now: float | None = None) -> str:
        """The text shown for ``done`` items at time ``now`` (``time.monotonic()``)."""
        elapsed = (now if now is not None else time.monotonic()) - self.started
        pct = f" ({100.0 * done / self.total:5.1f}%)" if self.total else ""
        rate = done / elapsed if elapsed > 0 else 0.0
        return f"{self.label}: {done:,}/{self.total:,}{pct} {rate:,.0f} msg/s {elapsed:6.1f}s"

    def update(self, done: int, *, force: bool = False) -> None:
        """Show ``done`` if the interval has passed since the last output (or ``force``)."""
        now = time.monotonic()
        if not force and now - self._last_out < self.interval_s:
            return
        self._last_out = now
        if self.live:
            self.stream.write("\r\x1b[2K" + self.line(done, now))
            self._shown_live = True
        else:
            self.stream.write(self.line(done, now) + "\n")
        self.stream.flush()

    def finish(self, done: int) -> None:
        """Show the final count and end the live line."""
        self.update(done, force=True)
        if self.live and self._shown_live:
            self.stream.write("\n")
            self.stream.flush()
