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
        started: ``time.monotonic()`` the rate is measured from (default: now).
    """

    def __init__(self, label: str, total: int, stream: TextIO | None = None,
                 interval_s: float | None = None, started: float | None = None) -> None:
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval_s = interval_s if interval_s is not None else (0.2 if self.live else 5.0)
        self.started = time.monotonic() if started is None else started
        self._last_out = float("-inf")
        self._last_done: int | None = None
        self._shown_live = False

    def line(self, done: int, now: float | None = None, extra: str = "") -> str:
        """The text shown for ``done`` items at time ``now`` (``time.monotonic()``)."""
        elapsed = (now if now is not None else time.monotonic()) - self.started
        pct = f" ({100.0 * done / self.total:5.1f}%)" if self.total else ""
        rate = f"{done / elapsed:,.0f} msg/s" if elapsed >= 0.5 else "- msg/s"
        return f"{self.label}: {done:,}/{self.total:,}{pct} {rate} {elapsed:6.1f}s{extra}"

    def update(self, done: int, *, extra: str = "", force: bool = False) -> None:
        """Show ``done`` (and the ``extra`` text) if the interval has passed since the last
        output, or if ``force`` and ``done`` changed since the last output."""
        now = time.monotonic()
        if force:
            if done == self._last_done:
                return
        elif now - self._last_out < self.interval_s:
            return
        self._last_out = now
        self._last_done = done
        if self.live:
            self.stream.write("\r\x1b[2K" + self.line(done, now, extra))
            self._shown_live = True
        else:
            self.stream.write(self.line(done, now, extra) + "\n")
        self.stream.flush()

    def finish(self, done: int, extra: str = "") -> None:
        """Show the final count (unless just shown) and end the live line."""
        self.update(done, extra=extra, force=True)
        if self.live and self._shown_live:
            self.stream.write("\n")
            self.stream.flush()
