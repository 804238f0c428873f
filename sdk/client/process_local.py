"""Per-process caches of started clients that are safe across ``fork()``.

Frameworks that host a RocketMQ client in a long-lived process want one started client per
process, made on first use and reused: Django's template (gunicorn / uWSGI workers, Celery
prefork children), Spark's Python workers (forked from PySpark's daemon), Celery's queue
consumers (prefork pool processes). :class:`ProcessLocalCache` holds them, keyed by whatever
identifies a client (name server + group...); :class:`ProcessLocalClient` is the one-client form.

- **Fork**: a client made in another process is never handed out. Its I/O thread did not survive
  the fork and its sockets are shared with the parent, so the child drops it *without* closing
  it (closing would send the parent's unregister requests on the parent's connections) and
  makes its own. Two guards: ``os.register_at_fork`` (a fresh lock and an empty cache in the
  child of a Python-level ``os.fork()``, multiprocessing's ``fork``, billiard) and a pid check
  on every call (servers that fork from C, such as uWSGI, run no Python fork hooks).
- **Threads**: creation is serialised per cache (two threads asking for the same key get one
  client); a factory that raises caches nothing, so the next call tries again.
- **Exit**: every client still cached is closed at interpreter exit (``atexit``), in the
  process that made it. A process ended by ``os._exit`` (PySpark's forked workers, a
  multiprocessing child) closes nothing: the operating system closes its sockets and the
  brokers drop the client when its connections close.

The mirror of what RocketMQ's Java ``MQClientManager`` does for client instances, per process
instead of per JVM.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["ProcessLocalCache", "ProcessLocalClient"]

log = logging.getLogger("rocketmq_sdk.client")

K = TypeVar("K", bound=Hashable)
C = TypeVar("C")


def _shutdown(client: Any) -> None:
    client.shutdown()


class _Entry(Generic[C]):
    __slots__ = ("client", "users")

    def __init__(self, client: C) -> None:
        self.client = client
        self.users: set[Hashable] = set()


class ProcessLocalCache(Generic[K, C]):
    """Started clients of this process, one per key, made on first use (see the module doc).

    Args:
        factory: ``key -> client``, returning a *started* client; used by :meth:`get` and
            :meth:`acquire` when the call gives no factory of its own (default: none, so every
            call must give one). It runs under the cache's lock: it must not use the same cache.
        close: closes one client (default: its ``shutdown()``); an error it raises is logged
            at WARNING, never raised.
        usable: whether a cached client may still be handed out (default: always); one that
            is not (e.g. closed by its owner) is forgotten, without a close, and a new one made.
        name: what the clients are, for log lines (``"producer"``).
    """

    def __init__(self, factory: Callable[[K], C] | None = None, *,
                 close: Callable[[C], None] = _shutdown, usable: Callable[[C], bool] | None = None,
                 name: str = "client") -> None:
        self._factory = factory
        self._close = close
        self._usable = usable
        self.name = name
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._entries: dict[K, _Entry[C]] = {}
        _caches.add(self)

    # ------------------------------------------------------------------ lookups

    def get(self, key: K, factory: Callable[[], C] | None = None) -> C:
        """This process's client for ``key``, made by ``factory()`` (else the cache's factory)
        the first time.

        Raises:
            TypeError: neither this call nor the cache has a factory.
            whatever the factory raises (nothing is cached then).
        """
        return self._lookup(key, factory, None)

    def acquire(self, key: K, user: Hashable, factory: Callable[[], C] | None = None) -> C:
        """As :meth:`get`, and count ``user`` as one of the client's users: the client is
        closed when the last user :meth:`release`\\ s it (clients shared by several connections
        of one process, e.g. Celery's queue consumers)."""
        return self._lookup(key, factory, user)

    def release(self, key: K, user: Hashable, client: C) -> bool:
        """``user`` stops using ``client``; the last user's release removes and closes it.

        A ``client`` this cache no longer holds (made in the parent before a fork, or replaced
        after it became unusable) is left alone: it is not this process's to close.

        Returns:
            True if ``client`` was closed.
        """
        self._check_pid()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.client is not client:
                return False
            entry.users.discard(user)
            if entry.users:
                return False
            del self._entries[key]
        self._close_one(client)
        return True

    def peek(self, key: K) -> C | None:
        """This process's client for ``key`` if one was made (none is made)."""
        self._check_pid()
        entry = self._entries.get(key)
        return entry.client if entry is not None else None

    def __len__(self) -> int:
        self._check_pid()
        return len(self._entries)

    # ------------------------------------------------------------------ closing

    def close(self, key: K) -> None:
        """Remove and close this process's client for ``key`` (if any), whatever its users."""
        self._check_pid()
        with self._lock:
            entry = self._entries.pop(key, None)
        if entry is not None:
            self._close_one(entry.client)

    def close_all(self) -> None:
        """Remove and close every client this process made (also runs at interpreter exit)."""
        self._check_pid()
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            self._close_one(entry.client)

    # ------------------------------------------------------------------ internals

    def _lookup(self, key: K, factory: Callable[[], C] | None, user: Hashable | None) -> C:
        self._check_pid()
        if user is None:  # the common case, a hit, takes no lock
            entry = self._entries.get(key)
            if entry is not None and (self._usable is None or self._usable(entry.client)):
                return entry.client
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and self._usable is not None and not self._usable(entry.client):
                entry = None
            if entry is None:
                entry = _Entry(self._make(key, factory))
                self._entries[key] = entry
            if user is not None:
                entry.users.add(user)
            return entry.client

    def _make(self, key: K, factory: Callable[[], C] | None) -> C:
        if factory is not None:
            client = factory()
        elif self._factory is not None:
            client = self._factory(key)
        else:
            raise TypeError(f"no factory for the {self.name} of {key!r}")
        _at_exit_once()
        log.debug("%s for %r made in process %d", self.name, key, self._pid)
        return client

    def _close_one(self, client: C) -> None:
        try:
            self._close(client)
        except Exception:  # noqa: BLE001 - closing goes on with the other clients
            log.warning("closing the %s failed", self.name, exc_info=True)

    def _check_pid(self) -> None:
        if self._pid != os.getpid():
            with _fork_lock:
                if self._pid != os.getpid():
                    self._forget_inherited()

    def _forget_inherited(self) -> None:
        """In a forked child: drop the parent's clients (never close them) and its lock (another
        thread may have held it at the fork)."""
        self._lock = threading.Lock()
        self._entries = {}
        self._pid = os.getpid()


class ProcessLocalClient(Generic[C]):
    """One started client per process, made by ``factory()`` on first use: a
    :class:`ProcessLocalCache` of one entry (same fork, thread and exit behaviour).

    Args:
        factory: makes and starts the client (e.g. a started ``Producer``).
        close: closes it (default: its ``shutdown()``).
        name: what it is, for log lines.
    """

    def __init__(self, factory: Callable[[], C], *, close: Callable[[C], None] = _shutdown,
                 name: str = "client") -> None:
        self._cache: ProcessLocalCache[None, C] = ProcessLocalCache(lambda _: factory(), close=close, name=name)

    def get(self) -> C:
        """This process's client (made now if this process has none).

        Raises:
            whatever the factory raises (the next call tries again).
        """
        return self._cache.get(None)

    @property
    def created(self) -> bool:
        """Whether this process made its client already (:meth:`get` will not block on it)."""
        return self._cache.peek(None) is not None

    def close(self) -> None:
        """Close this process's client, if it made one (the next :meth:`get` makes a new one)."""
        self._cache.close(None)


_caches: weakref.WeakSet[ProcessLocalCache[Any, Any]] = weakref.WeakSet()
_fork_lock = threading.Lock()
_exit_hook: list[bool] = []


def _after_fork_in_child() -> None:
    global _fork_lock
    _fork_lock = threading.Lock()
    for cache in list(_caches):
        cache._forget_inherited()


def _close_at_exit() -> None:
    for cache in list(_caches):
        if cache._pid == os.getpid():
            cache.close_all()


def _at_exit_once() -> None:
    """Register the exit hook when the first client is made, so that it runs before the SDK's
    own exit hooks (registered at import; ``atexit`` runs the last registered first)."""
    if not _exit_hook:
        _exit_hook.append(True)
        atexit.register(_close_at_exit)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
