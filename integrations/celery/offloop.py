"""Work the worker's event loop (kombu hub) hands to a thread of its own, so that the hub never
waits for a name server or broker: :class:`SerialRunner` runs callables one at a time in the
order given; :func:`on_hub_thread` says whether the calling thread runs a hub this transport
joined (:meth:`~.transport.Transport.register_with_event_loop`)."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["SerialRunner", "hub_thread_joined", "on_hub_thread"]

log = logging.getLogger("rocketmq_sdk.integrations.celery")

# thread id -> connections registered with a hub running on it
_hub_threads: collections.Counter[int] = collections.Counter()
_hub_lock = threading.Lock()


def hub_thread_joined(old: int | None, new: int | None) -> int | None:
    """A connection's hub runs on thread ``new`` (None: it left the hub), no longer on ``old``
    (None: it was on none); returns ``new``."""
    with _hub_lock:
        if old is not None:
            _hub_threads[old] -= 1
            if _hub_threads[old] <= 0:
                del _hub_threads[old]
        if new is not None:
            _hub_threads[new] += 1
    return new


def on_hub_thread() -> bool:
    """Whether the calling thread runs a kombu hub that a rocketmq:// connection joined (every
    connection of the process used on that thread then keeps the network off it)."""
    return threading.get_ident() in _hub_threads


class SerialRunner:
    """Runs submitted callables on one daemon thread, one at a time, in submission order (the
    thread starts with the first :meth:`submit`). A callable that raises is logged at WARNING
    with ``what`` and the runner goes on."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._cond = threading.Condition()
        self._jobs: collections.deque[tuple[str, Callable[..., Any], tuple, dict]] = collections.deque()
        self._submitted = 0
        self._done = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def pending(self) -> int:
        """Callables submitted and not finished yet."""
        return self._submitted - self._done

    def submit(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run ``fn(*args, **kwargs)`` after every callable submitted before it.

        Raises:
            RuntimeError: the runner is closed.
        """
        with self._cond:
            if self._closed:
                raise RuntimeError(f"{self.name} is closed")
            self._jobs.append((what, fn, args, kwargs))
            self._submitted += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout_s: float) -> bool:
        """Wait (at most ``timeout_s`` seconds) until every callable submitted so far has run;
        whether they all did."""
        with self._cond:
            target = self._submitted
            deadline = time.monotonic() + timeout_s
            while self._done < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def close(self, timeout_s: float) -> None:
        """Run what was submitted (waiting at most ``timeout_s`` seconds), then stop."""
        self.flush(timeout_s)
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._closed:
                    self._cond.wait()
                if not self._jobs:
                    return
                what, fn, args, kwargs = self._jobs.popleft()
            try:
                fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - logged; the next job runs
                log.warning("%s failed: %s", what, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            finally:
                with self._cond:
                    self._done += 1
                    self._cond.notify_all()
