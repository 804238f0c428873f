"""Pull consumers of the ``rocketmq`` source: one per Python worker process, and offset commits.

The executors' read tasks pull with a ``rocketmq_sdk.PullConsumer`` kept in the same kind of
per-process cache as the writer's producers (:class:`.producers.ProducerCache`: created on the
first task a worker runs, reused by later ones, never reused across ``fork``). Pulls name the
source's reader group but never commit (PULL_MESSAGE with the commit flag off), so no group's
offsets move; :func:`commit_offsets` is the only place that writes a group's offsets (each one
acknowledged by the broker before it returns, see :class:`GroupCommitter`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from rocketmq_sdk.protocol.message import MessageQueue

from .producers import ProducerCache, ProducerSpec

logger = logging.getLogger("rocketmq_sdk.integrations.spark")


def new_pull_consumer(spec: ProducerSpec) -> Any:
    """A ``PullConsumer`` (not started) for ``spec``'s name server and group."""
    from rocketmq_sdk import PullConsumer

    return PullConsumer(spec.group, spec.namesrv_addr, **dict(spec.config))


_cache = ProducerCache(new_pull_consumer)


def get_pull_consumer(name_server: str, group: str) -> Any:
    """This process's started ``PullConsumer`` of ``group`` on ``name_server``."""
    return _cache.get(ProducerSpec.create(name_server, group))


def announce_group(name_server: str, group: str, topics: Iterable[str]) -> None:
    """Make the brokers know ``group`` as a clustering consumer of ``topics``: a ``PullConsumer``
    that announces them in its heartbeat (Java ``DefaultMQPullConsumer.setRegisterTopics``) is
    started and shut down. The brokers then create the group's retry topic, whose route is how
    ``consumerProgress`` finds the group. Its offset store is empty, so its shutdown writes no
    offset.

    Raises:
        MQClientError / RemotingError: the consumer could not start (no name server).
    """
    from rocketmq_sdk import PullConsumer
    from rocketmq_sdk.protocol.bodies import SubscriptionData

    consumer = PullConsumer(group, name_server)
    for topic in sorted(set(topics)):
        consumer.subscriptions.setdefault(topic, SubscriptionData.build(topic, "*", 0))
    consumer.start()
    consumer.shutdown()


class GroupCommitter:
    """Writes one consumer group's offsets on the brokers, each acknowledged before
    :meth:`commit` returns (UPDATE_CONSUMER_OFFSET through an ``AdminClient``, as Java
    ``MQAdminExt.updateConsumeOffset``).

    Acknowledged, not buffered: Spark ends the Python process of a streaming source with
    SIGTERM when its query stops (``PythonStreamingSourceRunner.stop`` destroys the process), so
    neither the reader's ``stop()`` nor ``atexit`` runs there; a consumer's offset store, which
    persists every few seconds and at shutdown, would lose the commits made since its last
    persist. The group is announced once per topic and process (:func:`announce_group`).

    Args:
        spec: the name server (``namesrv_addr``) and the group (``group``).
    """

    def __init__(self, spec: ProducerSpec) -> None:
        self.name_server = spec.namesrv_addr
        self.group = spec.group
        self._admin: Any = None
        self._announced: set[str] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        from rocketmq_sdk.admin.client import AdminClient

        self._admin = AdminClient(self.name_server)

    def shutdown(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def commit(self, offsets: Mapping[MessageQueue, int]) -> None:
        """Store ``offsets`` (the next offset to consume, per queue) as the group's offsets.

        Raises:
            MQClientError / MQBrokerError / RemotingError: an offset was not stored (the
                offsets before it in queue order were).
        """
        with self._lock:
            topics = {mq.topic for mq in offsets} - self._announced
            if topics:
                announce_group(self.name_server, self.group, topics)
                self._announced |= topics
            for mq in sorted(offsets):
                self._admin.update_consume_offset(self.group, mq, offsets[mq])


_committers = ProducerCache(GroupCommitter)


def commit_offsets(name_server: str, group: str, offsets: Mapping[MessageQueue, int]) -> None:
    """Store ``offsets`` (the next offset to consume, per queue) as ``group``'s consumer offsets
    on the brokers, so ``rocketmq-admin consumerProgress`` shows them; every offset is
    acknowledged by its broker before this returns (:class:`GroupCommitter`, one per name
    server and group in this process).

    Raises:
        MQClientError / MQBrokerError / RemotingError: no name server, no broker of a queue, or
            the broker refused.
    """
    if not offsets:
        return
    _committers.get(ProducerSpec.create(name_server, group)).commit(offsets)
    logger.info("committed offsets to consumer group %s: %s", group,
                ", ".join(f"{mq.topic} {mq.broker_name}/{mq.queue_id}={offsets[mq]}" for mq in sorted(offsets)))
