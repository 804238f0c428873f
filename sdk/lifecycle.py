"""The lifecycle every client shares: Java's ``ServiceState`` and a small state holder.

Producers, the three consumers and the admin client move through the same states, as the Java
client's ``DefaultMQProducerImpl``/``DefaultMQPushConsumerImpl`` do::

    CREATE_JUST --start()--> RUNNING --shutdown()--> SHUTTING_DOWN --> SHUTDOWN_ALREADY
         ^            |
         +-- failed --+   (a start that raised leaves the client startable again)

``SHUTTING_DOWN`` is ours: a producer refuses new sends while in-flight ones finish. Java marks a
failed start ``START_FAILED`` and refuses a second ``start()``; we return to ``CREATE_JUST`` so a
start that failed because the name server was not up yet can simply be retried. ``START_FAILED``
exists for callers that compare against Java's names.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .exceptions import ClientStateError

__all__ = ["Lifecycle", "ServiceState"]


class ServiceState(enum.Enum):
    """Java's ``org.apache.rocketmq.common.ServiceState`` (plus ``SHUTTING_DOWN``)."""

    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    SHUTTING_DOWN = "SHUTTING_DOWN"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"
    START_FAILED = "START_FAILED"


class Lifecycle:
    """One client's :class:`ServiceState` behind a lock, with the transitions every client makes.

    Args:
        what: how errors name the client, e.g. ``"producer my-group"``.

    Usage::

        with self._lifecycle.starting():      # ClientStateError unless CREATE_JUST
            ...connect...                     # raising here returns to CREATE_JUST
        if self._lifecycle.begin_shutdown():  # False when not RUNNING (idempotent shutdown)
            ...flush, unregister...
            self._lifecycle.shutdown_done()
    """

    __slots__ = ("what", "lock", "_state")

    def __init__(self, what: str) -> None:
        self.what = what
        #: held for the whole of ``starting()`` and of each transition; re-entrant so a client's
        #: start code may call its own state-checking methods.
        self.lock = threading.RLock()
        self._state = ServiceState.CREATE_JUST

    @property
    def state(self) -> ServiceState:
        return self._state

    @property
    def running(self) -> bool:
        return self._state is ServiceState.RUNNING

    def check_running(self) -> None:
        """Raise :class:`ClientStateError` unless RUNNING (the message says what to call)."""
        if self._state is not ServiceState.RUNNING:
            raise ClientStateError(f"{self.what} is not running ({self._state.name}); call start()")

    @contextmanager
    def starting(self) -> Iterator[None]:
        """The start transition: CREATE_JUST → RUNNING when the block returns.

        The body may call :meth:`set_running` early (code that needs ``running`` true while it
        finishes starting); if the body raises, the state returns to CREATE_JUST.

        Raises:
            ClientStateError: the client is not CREATE_JUST (already started or shut down).
        """
        with self.lock:
            if self._state is not ServiceState.CREATE_JUST:
                raise ClientStateError(f"{self.what} cannot start: it is {self._state.name}")
            try:
                yield
            except BaseException:
                self._state = ServiceState.CREATE_JUST
                raise
            self._state = ServiceState.RUNNING

    def set_running(self) -> None:
        """Mark RUNNING inside :meth:`starting` (before its block ends)."""
        self._state = ServiceState.RUNNING

    def begin_shutdown(self) -> bool:
        """RUNNING → SHUTTING_DOWN and True; any other state → SHUTDOWN_ALREADY and False (a
        client that never started, or a second ``shutdown()``, has nothing to release)."""
        with self.lock:
            if self._state is not ServiceState.RUNNING:
                self._state = ServiceState.SHUTDOWN_ALREADY
                return False
            self._state = ServiceState.SHUTTING_DOWN
            return True

    def shutdown_done(self) -> None:
        """SHUTTING_DOWN → SHUTDOWN_ALREADY."""
        with self.lock:
            self._state = ServiceState.SHUTDOWN_ALREADY

    def __repr__(self) -> str:
        return f"Lifecycle({self.what!r}, {self._state.name})"
