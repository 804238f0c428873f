"""``EventLoopThread``: an asyncio event loop running in a background daemon thread.

The SDK's sync facade submits coroutines here and waits on ``concurrent.futures.Future`` objects
with a timeout; asyncio users await the same coroutines. Instances created before ``fork()`` are
unusable in the child (the thread does not survive the fork) and say so with ``ClientStateError``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from rocketmq_sdk.exceptions import ClientStateError, RemotingTimeoutError

__all__ = ["EventLoopThread"]

log = logging.getLogger("rocketmq_sdk.remoting.loop")

T = TypeVar("T")

_instances: weakref.WeakSet[EventLoopThread] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for inst in list(_instances):
        inst._forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class EventLoopThread:
    """An asyncio loop in a named daemon thread, started by the constructor.

    Args:
        name: thread name (default ``"rocketmq-io"``).
    """

    def __init__(self, name: str = "rocketmq-io") -> None:
        self.name = name
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._stopped = False
        self._forked = False
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        _instances.add(self)

    def _run(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for task in tasks:
                    task.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            except Exception:
                log.debug("error while shutting down event loop %s", self.name, exc_info=True)
            finally:
                loop.close()

    # ------------------------------------------------------------------ state

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The asyncio loop (touch it only from its thread, or through threadsafe calls)."""
        return self._loop

    @property
    def is_running(self) -> bool:
        """True until ``stop()`` is called (and never in a forked child)."""
        return not self._stopped and not self._forked and self._thread.is_alive()

    @property
    def in_loop_thread(self) -> bool:
        """True when read from the loop's own thread."""
        return threading.current_thread() is self._thread

    def _check(self) -> None:
        if self._forked or os.getpid() != self._pid:
            raise ClientStateError(
                f"event loop thread {self.name!r} was created in process {self._pid} before fork(); "
                "create a new client in the child process"
            )
        if self._stopped:
            raise ClientStateError(f"event loop thread {self.name!r} is stopped (client shut down)")

    # ------------------------------------------------------------------ use

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop and return a ``concurrent.futures.Future`` of its result.

        Raises:
            ClientStateError: the loop is stopped or was inherited through ``fork()``.
        """
        try:
            self._check()
        except ClientStateError:
            coro.close()
            raise
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and block until its result.

        Args:
            coro: the coroutine.
            timeout_s: seconds to wait, None for no limit.

        Raises:
            RemotingTimeoutError: no result within ``timeout_s`` (the coroutine is cancelled).
            ClientStateError: the loop is stopped, was inherited through ``fork()``, or this is
                called from the loop thread itself (it would deadlock; await instead).
            Exception: whatever the coroutine raised.
        """
        if self.in_loop_thread:
            coro.close()
            raise ClientStateError("blocking call made from the client's own I/O thread; await instead")
        fut = self.submit(coro)
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError:
            if fut.done():  # the coroutine itself raised TimeoutError
                raise
            fut.cancel()
            raise RemotingTimeoutError(f"event loop {self.name}", (timeout_s or 0) * 1000.0,
                                       "call") from None

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Schedule ``callback(*args)`` on the loop from any thread.

        Raises:
            ClientStateError: the loop is stopped or was inherited through ``fork()``.
        """
        self._check()
        self._loop.call_soon_threadsafe(callback, *args)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the loop (pending tasks are cancelled) and join the thread. Idempotent.

        Args:
            timeout_s: how long to wait for the thread to finish, in seconds.

        In a forked child it only marks the instance stopped (the thread did not survive fork).
        """
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self._forked or os.getpid() != self._pid:
            return
        try:
            self._loop.call_soon_threadsafe(self._loop.stop)
        except RuntimeError:  # loop already closed
            return
        if not self.in_loop_thread:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("event loop thread %s did not stop within %.1f s", self.name, timeout_s)
