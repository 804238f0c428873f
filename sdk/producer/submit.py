"""``BatchedSubmitter``: hands coroutines to an ``EventLoopThread`` from other threads, waking
the loop once per burst instead of once per coroutine (``run_coroutine_threadsafe`` writes to the
loop's self-pipe for every call, which dominates the cost of many small async sends)."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..remoting.loop import EventLoopThread

__all__ = ["BatchedSubmitter", "copy_outcome"]

log = logging.getLogger("rocketmq_sdk.producer")

T = TypeVar("T")


def _copy_outcome_to(fut: concurrent.futures.Future, task: asyncio.Task) -> None:
    copy_outcome(task, fut)


def copy_outcome(task: asyncio.Task, fut: concurrent.futures.Future) -> None:
    """Complete ``fut`` (a concurrent future) with ``task``'s outcome, unless it was cancelled."""
    if task.cancelled():
        fut.cancel()
        return
    if not fut.set_running_or_notify_cancel():  # cancelled by the caller meanwhile
        return
    if (exc := task.exception()) is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(task.result())


class BatchedSubmitter:
    """Submit coroutines to ``loop_thread``; their futures behave like
    ``run_coroutine_threadsafe``'s (cancelling the future cancels the task)."""

    def __init__(self, loop_thread: EventLoopThread) -> None:
        self.loop_thread = loop_thread
        # (coroutine, its future), (None, a plain callable), or an object to ``start()``
        self._queue: collections.deque[Any] = collections.deque()
        self._lock = threading.Lock()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Raises ClientStateError: the loop is stopped or was inherited through fork()."""
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._push((coro, fut))
        return fut

    def call(self, fn: Callable[[], Any]) -> None:
        """Run ``fn()`` on the loop, in submission order with :meth:`submit`'s coroutines (an
        exception it raises is logged).

        Raises:
            ClientStateError: the loop is stopped or was inherited through fork().
        """
        self._push((None, fn))

    def start(self, op: Any) -> None:
        """Run ``op.start()`` on the loop, like :meth:`call` (``op`` is queued itself: no tuple
        and no bound method per call, which would stay alive for the cyclic GC to count while
        many sends are queued).

        Raises:
            ClientStateError: the loop is stopped or was inherited through fork().
        """
        self._push(op)

    def _push(self, item: Any) -> None:
        with self._lock:
            self._queue.append(item)
            wake = len(self._queue) == 1
        if wake:
            try:
                self.loop_thread.call_soon(self._drain)
            except BaseException:
                with self._lock:
                    pending = list(self._queue)
                    self._queue.clear()
                for item in pending:
                    if type(item) is tuple and item[0] is not None:
                        item[0].close()
                raise

    def _drain(self) -> None:
        loop = self.loop_thread.loop
        queue = self._queue
        while queue:
            item = queue.popleft()
            if type(item) is not tuple:  # start()
                try:
                    item.start()
                except Exception:
                    log.exception("start of %r on the I/O loop failed", item)
                continue
            coro, fut = item
            if coro is None:  # a plain call
                try:
                    fut()
                except Exception:
                    log.exception("call %r on the I/O loop failed", fut)
                continue
            if fut.cancelled():
                coro.close()
                continue
            task: asyncio.Task[Any] = loop.create_task(coro)
            task.add_done_callback(functools.partial(_copy_outcome_to, fut))
            fut.add_done_callback(lambda f, t=task: f.cancelled() and loop.call_soon_threadsafe(t.cancel))
