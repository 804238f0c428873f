"""``BusyPoller``: keep a server's event loop polling its sockets for a short while after it answers.

A server that sleeps in ``epoll_wait`` between requests is woken by the kernel when the next one
arrives. On bare metal that costs a few µs; on a virtual machine whose idle vCPUs halt (no guest
halt polling, e.g. Firecracker) the wake-up is an inter-processor interrupt through the
hypervisor, and it costs both sides: measured on a 2-vCPU guest, a client's sync send spent
~18 µs more CPU and the round trip took ~40 % longer than when the server was already running
(benchmarks/profiling/LOG.md, "busy polling"). The Linux guest ``cpuidle-haltpoll`` driver and the
``net.core.busy_poll`` sysctl answer this in the kernel; this is the same idea in the event loop:
after a read whose requests the server answered inline (in the same loop callback) the loop
is kept polling (``call_soon`` of a cheap callback makes every iteration an ``epoll_wait`` with
timeout 0) for up to ``max_us``, so the request a synchronous client sends next finds the server
awake. A read ends the poll, and answers written later (a SYNC_FLUSH put answered when the
flush thread is done, a held pull) start none: the threads involved need the GIL right then,
and a polling loop would make them fight for it (measured: SYNC_FLUSH sync sends ~8 % slower).

The window adapts like haltpoll's: a poll that ends without a read halves it (below an eighth
of ``max_us`` it becomes 0: no polling), a read that arrives while polling, or after a sleep
shorter than ``max_us`` since the last answer, sets it back to ``max_us``. While it is 0, every
``PROBE_EVERY``-th answer is followed by one probing poll of ``max_us`` anyway (a miss returns
to 0 at once): a sleeping server's gaps include the wake-ups polling would remove, so they can
look too long for a stream that polling would catch. So request streams with gaps under
``max_us`` (a client sending synchronously, a few thousand requests/s per connection and up)
are polled for, and sparse or slower traffic costs a few polls per lull and one probe per
``PROBE_EVERY`` answers.

Only for a server with an event loop (and a CPU) of its own: an event loop thread sharing the
process with busy client threads would take the GIL from them while it polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from rocketmq_sdk.exceptions import IllegalArgumentError

__all__ = ["PROBE_EVERY", "BusyPoller"]

#: with the window at 0, one answer in this many is followed by a probing poll of the full window
PROBE_EVERY = 64


class BusyPoller:
    """Adaptive busy polling of one asyncio event loop (see the module docstring).

    The server's channels call :meth:`on_read` when a read starts and :meth:`arm` when a read
    answered inline, on the loop's thread.

    Args:
        loop: the event loop to keep polling.
        max_us: longest poll after an answer, in µs (> 0).
        clock: monotonic clock in seconds (tests pass a fake one).

    Attributes:
        max_s: ``max_us`` in seconds.
        window_s: the current poll window in seconds (0: the loop sleeps after answers).
        hits: polls ended by a read.
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
        self.hits = 0
        self.misses = 0
        self._until = 0.0  # end of the current poll; 0.0 when none is running
        self._scheduled = False  # a _poll callback is queued on the loop
        self._last_answer = float("-inf")
        self._closed = False
        self._quiet = 0  # answers not polled after since the window went to 0
        self._probing = False

    @property
    def polling(self) -> bool:
        """True while the loop is being kept awake."""
        return self._until > 0.0

    def arm(self) -> None:
        """Note answers that just went out and keep the loop polling for the current window."""
        now = self._last_answer = self._clock()
        window = self.window_s
        if not window:
            self._quiet += 1
            if self._quiet < PROBE_EVERY:
                return
            self._quiet = 0
            self._probing = True
            window = self.max_s
        if not self._closed:
            self._until = now + window
            if not self._scheduled:
                self._scheduled = True
                self._loop.call_soon(self._poll)

    def on_read(self) -> None:
        """Note a read: it ends the current poll (a hit), or, when the loop slept through a gap
        since the last answer shorter than ``max_us``, brings the window back to ``max_us``."""
        if self._until:
            self.hits += 1
            self._until = 0.0
            self._probing = False
            self.window_s = self.max_s
            self._quiet = 0
        elif self._clock() - self._last_answer <= self.max_s:
            self.window_s = self.max_s
            self._quiet = 0

    def _poll(self) -> None:
        until = self._until
        if until and not self._closed and self._clock() < until:
            self._loop.call_soon(self._poll)  # a ready callback: the next epoll_wait does not block
            return
        self._scheduled = False
        if until:  # the window ran out without a read
            self._until = 0.0
            self.misses += 1
            if self._probing:
                self._probing = False
                return
            half = self.window_s / 2
            self.window_s = half if half >= self.max_s / 8 else 0.0

    def close(self) -> None:
        """Stop polling (the next scheduled poll returns without rescheduling). Idempotent."""
        self._closed = True
        self._until = 0.0
