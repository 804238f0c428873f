"""One started producer per Python worker process, reused across Spark partitions.

Spark's Python workers are long-lived processes (``spark.python.worker.reuse``, the default)
that run one task after another. Starting a producer per partition would pay a name-server
route lookup and a broker connection each time, so :func:`get_producer` keeps a module-level
cache keyed by :class:`ProducerSpec`: the first partition a worker runs creates and starts the
producer, later partitions reuse it.

Fork safety: PySpark forks its workers from a daemon process. The cache is the SDK's
per-process client cache (:mod:`rocketmq_sdk.client.process_local`): an entry created in another
process is never reused (its I/O thread and sockets do not exist in the child); it is dropped
without ``shutdown()``, which would touch the parent's connections.

Shutdown: producers are shut down at interpreter exit (``atexit``). PySpark's daemon ends
its forked workers with ``os._exit`` (no ``atexit``), in which case the operating system closes
the sockets and the broker forgets the producer when its connection closes; nothing is lost
because every send is synchronous and acknowledged before the partition counts it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketmq_sdk.client.process_local import ProcessLocalCache

logger = logging.getLogger("rocketmq_sdk.integrations.spark")

DEFAULT_PRODUCER_GROUP = "spark_rocketmq_writer"


@dataclass(frozen=True)
class ProducerSpec:
    """What identifies a cached producer: name server address, group, extra config and factory.

    Args:
        namesrv_addr: ``host:port`` of the name server (``;``-separated for several).
        group: producer group (default ``spark_rocketmq_writer``).
        config: extra keyword arguments for ``rocketmq_sdk.Producer`` as sorted ``(name, value)``
            pairs; build with :meth:`create`.
        factory: ``spec -> producer`` (not started) replacing ``rocketmq_sdk.Producer``, e.g. a
            subclass with hooks; compared by ``factory_id`` (its qualified name), because each
            Spark task unpickles its own copy of it.
        factory_id: the factory's qualified name (set by :meth:`create`).
    """

    namesrv_addr: str
    group: str = DEFAULT_PRODUCER_GROUP
    config: tuple[tuple[str, Any], ...] = field(default=())
    factory: Callable[[ProducerSpec], Any] | None = field(default=None, compare=False, hash=False)
    factory_id: str = ""

    @classmethod
    def create(cls, namesrv_addr: str, group: str = DEFAULT_PRODUCER_GROUP,
               config: Mapping[str, Any] | None = None,
               factory: Callable[[ProducerSpec], Any] | None = None) -> ProducerSpec:
        """Build a spec from a config mapping (values must be hashable)."""
        factory_id = f"{factory.__module__}.{getattr(factory, '__qualname__', type(factory).__qualname__)}" \
            if factory is not None else ""
        return cls(namesrv_addr, group, tuple(sorted((config or {}).items())), factory, factory_id)


ProducerFactory = Callable[[ProducerSpec], Any]


def _default_factory(spec: ProducerSpec) -> Any:
    from rocketmq_sdk import Producer

    return Producer(spec.group, spec.namesrv_addr, **dict(spec.config))


class ProducerCache(ProcessLocalCache[ProducerSpec, Any]):
    """Started producers of this process, keyed by spec: the SDK's per-process client cache
    (:class:`rocketmq_sdk.client.process_local.ProcessLocalCache`: thread-safe, never reused
    across ``fork``, shut down at interpreter exit).

    :meth:`get` raises whatever the producer's ``start()`` raises (e.g. ``MQClientError``);
    nothing is cached then, so the next call tries again.

    Args:
        factory: ``spec -> producer`` (not yet started); default builds ``rocketmq_sdk.Producer``.
            The producer must have ``start()`` and ``shutdown()``.
    """

    def __init__(self, factory: ProducerFactory = _default_factory) -> None:
        self._new = factory
        super().__init__(self._start, name="Spark client")

    def _start(self, spec: ProducerSpec) -> Any:
        producer = (spec.factory or self._new)(spec)
        producer.start()
        logger.info("started %s group=%s namesrv=%s in pid %d", type(producer).__name__,
                    spec.group, spec.namesrv_addr, os.getpid())
        return producer

    def shutdown_all(self) -> None:
        """Shut down every producer this process started (errors are logged, not raised)."""
        self.close_all()


_cache = ProducerCache()


def get_producer(spec: ProducerSpec) -> Any:
    """The process-wide started producer for ``spec`` (see :class:`ProducerCache.get`)."""
    return _cache.get(spec)


def shutdown_producers() -> None:
    """Shut down every cached producer of this process now (also runs at interpreter exit)."""
    _cache.shutdown_all()
