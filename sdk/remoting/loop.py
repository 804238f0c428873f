"""``EventLoopThread``: an asyncio loop in a background thread behind the sync API."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..exceptions import ClientStateError, RemotingTimeoutError

T = TypeVar("T")
_ALL: weakref.WeakSet[EventLoopThread] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for t in list(_ALL):
        t._forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


class EventLoopThread:
    """Runs an event loop in a named daemon thread.

    ``run(coro, timeout_s)`` blocks the caller for the result; ``submit(coro)`` returns a
    ``concurrent.futures.Future``. After ``fork()`` the child's copy refuses to work (the thread
    does not exist there) with :class:`ClientStateError` instead of hanging.
    """

    def __init__(self, name: str = "rocketmq-io") -> None:
        self.loop = asyncio.new_event_loop()
        self._forked = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        _ALL.add(self)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def _check(self) -> None:
        if self._forked:
            raise ClientStateError("this client was created before fork(); create a new one in the child process")
        if self._stopped:
            raise ClientStateError("the client is shut down")

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        self._check()
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it.

        Raises:
            RemotingTimeoutError: not done within ``timeout_s`` (the coroutine is cancelled).
        """
        if threading.current_thread() is self._thread:
            raise ClientStateError("blocking call made from the client's own I/O thread")
        fut = self.submit(coro)
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise RemotingTimeoutError("local", (timeout_s or 0) * 1000, "operation") from None

    def call_soon(self, fn, *args) -> None:
        self._check()
        self.loop.call_soon_threadsafe(fn, *args)

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the loop and join the thread (idempotent)."""
        if self._stopped or self._forked:
            self._stopped = True
            return
        self._stopped = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)
            if not self._thread.is_alive():
                self.loop.close()
