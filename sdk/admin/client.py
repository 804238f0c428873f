"""``AdminClient``: the blocking face of :class:`~rocketmq_sdk.admin.AsyncAdminClient`.

Every public coroutine of ``AsyncAdminClient`` is offered here under the same name, with the same
arguments, result and errors, run on the client's own I/O thread (an :class:`EventLoopThread`).

Example::

    with AdminClient("127.0.0.1:9876") as admin:
        admin.create_topic("Orders", cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        print(admin.consumer_progress("order-consumers").total_lag)
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

from rocketmq_sdk.config import ClientConfig
from rocketmq_sdk.remoting.loop import EventLoopThread

from .async_client import AsyncAdminClient
from .core import MASTER_ID, parse_namesrv_addr, parse_properties

__all__ = ["MASTER_ID", "AdminClient", "parse_namesrv_addr", "parse_properties"]

T = TypeVar("T")


class AdminClient:
    """Administration of a RocketMQ 4.x cluster (topics, groups, messages, name servers, ACL),
    blocking: the methods of :class:`~rocketmq_sdk.admin.AsyncAdminClient`, each run to its end
    on the client's I/O thread. Safe to call from several threads.

    Args:
        namesrv_addr, timeout_ms, config, **settings: as :class:`AsyncAdminClient`;
            ``config.event_loop`` (or ``event_loop=``) picks the I/O thread's loop implementation.

    Raises:
        IllegalArgumentError: no name server address, an unknown setting, or both ``config`` and
            settings.

    The client connects lazily; call :meth:`close` (or use it as a context manager) to release
    its I/O thread. Each call is bounded by ten times ``timeout_ms`` plus 5 s overall (a call may
    make several requests, each with its own timeout).
    """

    def __init__(self, namesrv_addr: str | Iterable[str] | None = None, *, timeout_ms: float = 5000.0,
                 config: ClientConfig | None = None, **settings: Any) -> None:
        self._async = AsyncAdminClient(namesrv_addr, timeout_ms=timeout_ms, config=config, **settings)
        self._loop = EventLoopThread("rocketmq-admin", event_loop=self._async.config.event_loop)

    @property
    def config(self) -> ClientConfig:
        """The connection settings (a :class:`~rocketmq_sdk.config.ClientConfig`)."""
        return self._async.config

    @property
    def namesrv_addrs(self) -> list[str]:
        """The name server addresses asked."""
        return self._async.namesrv_addrs

    @property
    def timeout_ms(self) -> float:
        """Timeout of each request, ms."""
        return self._async.timeout_ms

    def close(self) -> None:
        """Close connections and stop the I/O thread (idempotent)."""
        if not self._loop.is_running:
            return
        try:
            self._loop.run(self._async.close(), 5.0)
        finally:
            self._loop.stop()

    shutdown = close

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        # generous overall bound: several requests per call, each with its own timeout
        return self._loop.run(coro, self.timeout_ms / 1000.0 * 10 + 5)

    @staticmethod
    def now_ms() -> int:
        """Milliseconds since the epoch (for ``reset_offset_by_time`` and queries by time)."""
        return int(time.time() * 1000)


def _blocking(name: str, coroutine_function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(coroutine_function)
    def method(self: AdminClient, *args: Any, **kwargs: Any) -> Any:
        return self._run(getattr(self._async, name)(*args, **kwargs))

    return method


for _name, _function in inspect.getmembers(AsyncAdminClient, inspect.iscoroutinefunction):
    if not _name.startswith("_") and _name != "close":
        setattr(AdminClient, _name, _blocking(_name, _function))
del _name, _function
