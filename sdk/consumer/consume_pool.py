"""``ConsumePool``: the listener threads of a push consumer, fed by one queue.

A ``ThreadPoolExecutor`` would do the same work, but each ``submit`` builds a ``Future`` (with
its own condition variable), a work item, takes an idle-thread semaphore and, when done, runs
done-callbacks and releases the semaphore: about 15 µs of interpreter time per pulled list.
Here a task is a ``(function, args)`` tuple on a ``SimpleQueue`` and the pool keeps two
counters under one lock.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["ConsumePool"]

log = logging.getLogger("rocketmq_sdk.consumer.consume")

_pools: weakref.WeakSet[ConsumePool] = weakref.WeakSet()


class ConsumePool:
    """Up to ``max_workers`` threads running submitted calls in submission (FIFO) order.

    A thread is started when a call is submitted and no started thread is idle, as in
    ``ThreadPoolExecutor``; threads then live until :meth:`shutdown`. Threads are daemons, but,
    as with ``ThreadPoolExecutor``, calls already submitted still run when the interpreter exits
    without a :meth:`shutdown` (an ``atexit`` hook waits for them; Ctrl-C stops that wait).
    After a :meth:`shutdown` the exit hook does not wait again: the owner's deadline stands.

    Args:
        max_workers: most threads (≥ 1).
        thread_name_prefix: threads are named ``<prefix>_<n>``.
    """

    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.max_workers = max_workers
        self.thread_name_prefix = thread_name_prefix
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        # threads waiting for a call that no submitted call has claimed yet, and calls queued
        # that no waiting thread was there for (each lowers the other; at most one is non-zero)
        self._idle = 0
        self._unclaimed = 0
        self._stopped = False
        self._owner_shut_down = False  # shutdown() ran: the exit hook leaves this pool alone
        _pools.add(self)

    def submit(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Queue ``fn(*args)``; False (nothing queued) once the pool is shut down. An exception
        raised by ``fn`` is logged."""
        with self._lock:
            if self._stopped:
                return False
            self._queue.put((fn, args))
            if self._idle:
                self._idle -= 1
            elif len(self._threads) < self.max_workers:
                thread = threading.Thread(target=self._work, name=f"{self.thread_name_prefix}_{len(self._threads)}",
                                          daemon=True)
                self._threads.append(thread)  # it takes this call: nothing becomes unclaimed
                thread.start()
            else:
                self._unclaimed += 1
        return True

    def _work(self) -> None:
        get, lock = self._queue.get, self._lock
        while True:
            task = get()
            if task is None:
                return
            fn, args = task
            try:
                fn(*args)
            except BaseException:
                log.exception("consume task %r failed", fn)
            del task, fn, args
            with lock:
                if self._unclaimed:
                    self._unclaimed -= 1  # a queued call is there for this thread
                else:
                    self._idle += 1

    @property
    def thread_count(self) -> int:
        """Threads started so far."""
        return len(self._threads)

    @property
    def running(self) -> int:
        """Threads busy with a call now (approximately: read without stopping them)."""
        with self._lock:
            return max(0, len(self._threads) - self._idle)

    def shutdown(self, timeout_s: float | None, *, cancel_queued: bool = True) -> bool:
        """Stop taking calls, drop the queued ones (unless ``cancel_queued`` is False) and wait up
        to ``timeout_s`` seconds (None: no limit) for the running ones. Returns True when every
        thread ended; a call to this from a pool thread does not wait for that thread. A
        ``KeyboardInterrupt`` (Ctrl-C) while waiting ends the wait at once (False; logged, not
        raised): the running calls go on in their daemon threads until the process exits."""
        with self._lock:
            self._stopped = True
            self._owner_shut_down = self._owner_shut_down or cancel_queued
            threads = list(self._threads)
        if cancel_queued:
            try:
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
        for _ in threads:
            self._queue.put(None)  # after the queued calls: each thread ends when it reaches one
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        me = threading.current_thread()
        done = True
        try:
            for thread in threads:
                if thread is me:
                    done = False
                    continue
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
                done = done and not thread.is_alive()
        except KeyboardInterrupt:
            log.warning("%s: stopped waiting (Ctrl-C); %d listener call(s) still running are abandoned",
                        self.thread_name_prefix, sum(t.is_alive() for t in threads))
            return False
        return done

    def shutdown_listeners(self, group: str, timeout_s: float) -> bool:
        """A consumer's shutdown of its listener threads: announce the wait when listeners are
        busy ("waiting up to N s for M running listener(s) (Ctrl-C again to stop now)"), then
        :meth:`shutdown` with ``timeout_s`` (queued calls dropped). True if all finished."""
        running = self.running
        if running and timeout_s > 0:
            log.warning("group %s: waiting up to %.0f s for %d running listener(s) (Ctrl-C again to stop now)",
                        group, timeout_s, running)
        if self.shutdown(timeout_s):
            return True
        log.warning("group %s: listener calls still running at shutdown", group)
        return False


@atexit.register
def _finish_at_exit() -> None:
    """As ``ThreadPoolExecutor``: calls submitted before exit still run, unless the pool's owner
    already shut it down with its own deadline (a consumer's ``await_termination_timeout``)."""
    for pool in list(_pools):
        if not pool._owner_shut_down:
            pool.shutdown(None, cancel_queued=False)
