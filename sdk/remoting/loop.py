"""``EventLoopThread``: an asyncio event loop running in a background daemon thread.

The SDK's sync facade submits coroutines here and waits on ``concurrent.futures.Future`` objects
with a timeout; asyncio users await the same coroutines. Instances created before ``fork()`` are
unusable in the child (the thread does not survive the fork) and say so with ``ClientStateError``.

The loop implementation is chosen with :func:`new_event_loop`: ``"auto"`` (uvloop when it is
importable, else asyncio's own loop), ``"asyncio"`` or ``"uvloop"``; the environment variable
``ROCKETMQ_EVENT_LOOP`` overrides the choice made in code (operators can switch without a code
change). The reference broker uses the same functions.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import sys
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from rocketmq_sdk.exceptions import ClientStateError, IllegalArgumentError, MQError, RemotingTimeoutError

__all__ = [
    "EVENT_LOOP_CHOICES",
    "EVENT_LOOP_ENV",
    "EventLoopThread",
    "event_loop_kind",
    "new_event_loop",
    "resolve_event_loop",
]

log = logging.getLogger("rocketmq_sdk.remoting.loop")

T = TypeVar("T")

#: accepted values of ``event_loop`` settings and of ``$ROCKETMQ_EVENT_LOOP``
EVENT_LOOP_CHOICES = ("auto", "asyncio", "uvloop")
#: environment variable overriding every ``event_loop`` choice made in code
EVENT_LOOP_ENV = "ROCKETMQ_EVENT_LOOP"


def _import_uvloop() -> Any:
    """The ``uvloop`` module, or None when it is not installed (or not importable here)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop


def resolve_event_loop(choice: str | None = "auto") -> str:
    """The loop implementation ``choice`` stands for: ``"asyncio"`` or ``"uvloop"``.

    Args:
        choice: ``"auto"`` (None means the same), ``"asyncio"`` or ``"uvloop"``; a non-empty
            ``$ROCKETMQ_EVENT_LOOP`` replaces it.

    Raises:
        IllegalArgumentError: an unknown choice, or ``"uvloop"`` when uvloop is not installed
            (``pip install uvloop``, or the ``fast`` extra of rocketmq-python-sdk).
    """
    env = os.environ.get(EVENT_LOOP_ENV, "").strip().lower()
    source = f"${EVENT_LOOP_ENV}" if env else "event_loop"
    kind = env or (choice or "auto").strip().lower()
    if kind not in EVENT_LOOP_CHOICES:
        raise IllegalArgumentError(
            f"{source}={kind!r}: expected one of {', '.join(EVENT_LOOP_CHOICES)}")
    if kind == "asyncio":
        return kind
    if _import_uvloop() is None:
        if kind == "uvloop":
            raise IllegalArgumentError(
                f"{source}='uvloop' but uvloop is not installed: pip install uvloop "
                "(or rocketmq-python-sdk[fast]), or choose 'auto' / 'asyncio'")
        return "asyncio"
    return "uvloop"


def new_event_loop(choice: str | None = "auto") -> asyncio.AbstractEventLoop:
    """A new, not running event loop of the implementation :func:`resolve_event_loop` picks.

    ``"asyncio"`` is the standard library's loop even when an event loop policy is installed;
    ``"auto"`` without uvloop is ``asyncio.new_event_loop()`` (the installed policy's loop, as
    before this option existed).

    Raises:
        IllegalArgumentError: see :func:`resolve_event_loop`.
    """
    kind = resolve_event_loop(choice)
    if kind == "uvloop":
        return _import_uvloop().new_event_loop()
    if (choice or "auto").strip().lower() == "auto" and not os.environ.get(EVENT_LOOP_ENV, "").strip():
        return asyncio.new_event_loop()
    factory = getattr(asyncio, "EventLoop", None)  # Python 3.13+: the platform's default loop class
    if factory is None:
        if sys.platform == "win32":
            factory = asyncio.ProactorEventLoop
        else:
            factory = asyncio.SelectorEventLoop
    return factory()


def event_loop_kind(loop: asyncio.AbstractEventLoop) -> str:
    """Which implementation ``loop`` is, for logs and benchmarks: ``"asyncio"``, ``"uvloop"``, or
    the top-level module of another loop class."""
    return type(loop).__module__.split(".", 1)[0]


_instances: weakref.WeakSet[EventLoopThread] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for inst in list(_instances):
        inst._forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _BlockingCall:
    """One ``EventLoopThread.run``: the task's outcome handed to a waiting thread through a lock."""

    __slots__ = ("coro", "done", "task", "result", "error", "gave_up", "_state_lock")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.done = threading.Lock()
        self.done.acquire()
        self.task: asyncio.Task | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.gave_up = False
        self._state_lock = threading.Lock()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:  # on the loop thread
        with self._state_lock:
            if self.gave_up:
                self.coro.close()
                return
            try:
                self.task = loop.create_task(self.coro)
            except BaseException as exc:  # pragma: no cover - loop closing
                self.error = exc
                self.done.release()
                return
        self.task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task) -> None:  # on the loop thread
        if task.cancelled():
            self.error = concurrent.futures.CancelledError()
        else:
            self.error = task.exception()
            if self.error is None:
                self.result = task.result()
        self.done.release()

    def cancel(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Called by the waiter after its timeout: True if the call was abandoned (cancelled)."""
        with self._state_lock:
            if self.done.locked() is False:
                return False
            self.gave_up = True
            task = self.task
        if task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # loop closed
                pass
        return True

    def outcome(self) -> Any:
        error = self.error
        if error is not None:
            self.error = None  # no reference cycle through the traceback
            if isinstance(error, MQError):
                # the SDK's own errors say what failed; the I/O loop's frames and the chained
                # OSError would only bury that under asyncio internals (kept at DEBUG)
                log.debug("%s raised on the I/O loop", type(error).__name__, exc_info=error)
                raise error.with_traceback(None) from None
            raise error
        return self.result


class EventLoopThread:
    """An asyncio loop in a named daemon thread, started by the constructor.

    Args:
        name: thread name (default ``"rocketmq-io"``).
        event_loop: loop implementation, ``"auto"`` / ``"asyncio"`` / ``"uvloop"`` (see
            :func:`new_event_loop`; ``$ROCKETMQ_EVENT_LOOP`` overrides it).

    Raises:
        IllegalArgumentError: an unknown ``event_loop``, or ``"uvloop"`` without uvloop.
    """

    def __init__(self, name: str = "rocketmq-io", event_loop: str | None = "auto") -> None:
        self.name = name
        self._loop = new_event_loop(event_loop)
        #: the implementation in use, ``"asyncio"`` or ``"uvloop"``
        self.kind = event_loop_kind(self._loop)
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

    def _check(self, coro: Coroutine[Any, Any, Any] | None = None) -> None:
        """Raise ClientStateError when the loop takes no more work, closing ``coro`` first (a
        coroutine that never runs is closed, not reported as never awaited)."""
        if self._forked or os.getpid() != self._pid:
            error = ClientStateError(f"event loop thread {self.name!r} was created in process {self._pid} before "
                                     "fork(); create a new client in the child process")
        elif self._stopped:
            error = ClientStateError(f"event loop thread {self.name!r} is stopped (client shut down)")
        else:
            return
        if coro is not None:
            coro.close()
        raise error

    # ------------------------------------------------------------------ use

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop and return a ``concurrent.futures.Future`` of its result.

        Raises:
            ClientStateError: the loop is stopped or was inherited through ``fork()``.
        """
        self._check(coro)
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
        self._check(coro)
        # A lighter path than run_coroutine_threadsafe + Future.result (every sync send goes
        # through here): one plain lock as the waiter instead of a Condition-based
        # concurrent.futures.Future chained to the task with cross-loop callbacks.
        call = _BlockingCall(coro)
        self._loop.call_soon_threadsafe(call.start, self._loop)
        if not call.done.acquire(timeout=-1 if timeout_s is None else max(0.0, timeout_s)):
            if call.cancel(self._loop):
                raise RemotingTimeoutError(f"event loop {self.name}", (timeout_s or 0) * 1000.0,
                                           "call") from None
            call.done.acquire()  # it finished while we gave up: use its outcome
        return call.outcome()

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
