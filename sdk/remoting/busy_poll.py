"""``BusyPoller``: keep a server's event loop polling its sockets for a short while after each read.

A server that sleeps in ``epoll_wait`` between requests is woken by the kernel when the next one
arrives. On bare metal that costs a few µs; on a virtual machine whose idle vCPUs halt (no guest
halt polling, e.g. Firecracker) the wake-up is an inter-processor interrupt through the
hypervisor, and it costs both sides: measured on a 2-vCPU guest, a client's sync send spent
~18 µs more CPU and the round trip took ~40 % longer than when the server was already running
(benchmarks/PROFILE.md, "busy polling"). The Linux guest ``cpuidle-haltpoll`` driver and the
``net.core.busy_poll`` sysctl answer this in the kernel; this is the same idea in the event loop:
after a read the loop is kept polling (``call_soon`` of a cheap callback makes every iteration
an ``epoll_wait`` with timeout 0) for up to ``max_us``, so a request that follows within that
window finds the server awake.

The window adapts like haltpoll's: a poll that ends without a read halves it (below an eighth
of ``max_us`` it becomes 0: no polling), a read that arrives while polling, or after a sleep
shorter than ``max_us``, sets it back to ``max_us``. So request streams with gaps under
``max_us`` (one client sending synchronously, a few thousand requests/s per connection and up)
are polled for, and sparse or slower traffic costs at most a few polls before the loop sleeps
again as before.

Only for a server with an event loop (and a CPU) of its own: an event loop thread sharing the
process with busy client threads would take the GIL from them while it polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from rocketmq_sdk.exceptions import IllegalArgumentError

__all__ = ["BusyPoller"]


class BusyPoller:
    """Adaptive busy polling of one asyncio event loop (see the module docstring).

    Args:
        loop: the event loop to keep polling; :meth:`arm` and the polling run on its thread.
        max_us: longest poll after a read, in µs (> 0).
        clock: monotonic clock in seconds (tests pass a fake one).

    Attributes:
        max_s: ``max_us`` in seconds.
        window_s: the current poll window in seconds (0: the loop sleeps after reads).
        polling: True while the loop is being kept awake.
        hits: polls that saw a read before their window ended.
        misses: polls whose window ended without a read.

    Raises:
        IllegalArgumentError: ``max_us`` not positive.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, max_us: float, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not max_us > 0:
            raise IllegalArgumentError(f"busy poll window must be > 0 µs, got {max_us!r}")
        self._loop = loop
        self._clock = clock
        self.max_s = max_us / 1e6
        self.window_s = self.max_s
        self.polling = False
        self.hits = 0
        self.misses = 0
        self._until = 0.0
        self._last_read = float("-inf")
        self._closed = False

    def arm(self) -> None:
        """Note a read that just finished and keep the loop polling for the current window.
        Called by the channels on the loop's thread at the end of each read."""
        now = self._clock()
        if self.polling:
            self.hits += 1
            self.window_s = self.max_s
        elif now - self._last_read <= self.max_s:  # slept through a gap a poll would have covered
            self.window_s = self.max_s
        self._last_read = now
        if self.window_s and not self._closed:
            self._until = now + self.window_s
            if not self.polling:
                self.polling = True
                self._loop.call_soon(self._poll)

    def _poll(self) -> None:
        if self._closed:
            self.polling = False
            return
        if self._clock() < self._until:
            self._loop.call_soon(self._poll)  # a ready callback: the next epoll_wait does not block
            return
        self.polling = False
        self.misses += 1
        half = self.window_s / 2
        self.window_s = half if half >= self.max_s / 8 else 0.0

    def close(self) -> None:
        """Stop polling (the next scheduled poll returns without rescheduling). Idempotent."""
        self._closed = True
