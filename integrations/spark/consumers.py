"""Pull consumers of the ``rocketmq`` source: one per Python worker process, and offset commits.

The executors' read tasks pull with a ``rocketmq_sdk.PullConsumer`` kept in the same kind of
per-process cache as the writer's producers (:class:`.producers.ProducerCache`: created on the
first task a worker runs, reused by later ones, never reused across ``fork``). Pulls name the
source's reader group but never commit (PULL_MESSAGE with the commit flag off), so no group's
offsets move; :func:`commit_offsets` is the only place that writes a group's offsets.
"""

from __future__ import annotations

import atexit
import logging
import os
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
atexit.register(_cache.shutdown_all)
os.register_at_fork(after_in_child=_cache._after_fork_in_child)


def get_pull_consumer(name_server: str, group: str) -> Any:
    """This process's started ``PullConsumer`` of ``group`` on ``name_server``."""
    return _cache.get(ProducerSpec.create(name_server, group))


def start_commit_consumer(name_server: str, group: str, topics: Iterable[str], **config: Any) -> Any:
    """A started ``PullConsumer`` of ``group`` that announces ``topics`` in its heartbeats (Java
    ``DefaultMQPullConsumer.setRegisterTopics``): the brokers then list the group as a
    clustering consumer of them and create its retry topic, whose route is how
    ``consumerProgress`` finds the group.

    Args:
        config: more ``ConsumerConfig`` settings (e.g. ``persist_consumer_offset_interval``).
    """
    from rocketmq_sdk import PullConsumer
    from rocketmq_sdk.protocol.bodies import SubscriptionData

    consumer = PullConsumer(group, name_server, **config)
    for topic in sorted(set(topics)):
        consumer.subscriptions.setdefault(topic, SubscriptionData.build(topic, "*", 0))
    consumer.start()
    return consumer


def commit_offsets(name_server: str, group: str, offsets: Mapping[MessageQueue, int],
                   consumer: Any = None) -> None:
    """Store ``offsets`` (the next offset to consume, per queue) as ``group``'s consumer offsets
    on the brokers (UPDATE_CONSUMER_OFFSET), so ``rocketmq-admin consumerProgress`` shows them.

    With ``consumer`` (a started ``PullConsumer`` of ``group``) the offsets go to its offset
    store, persisted every ``persist_consumer_offset_interval`` ms and at its shutdown; without,
    a consumer is started, given the offsets and shut down, which persists them before
    returning.

    Raises:
        MQClientError / RemotingError: the consumer could not start (no name server).
    """
    if not offsets:
        return
    own = consumer is None
    if own:
        consumer = start_commit_consumer(name_server, group, {mq.topic for mq in offsets})
    try:
        for mq, offset in offsets.items():
            consumer.update_consume_offset(mq, offset)
    finally:
        if own:
            consumer.shutdown()
    logger.info("committed offsets of %d queues to consumer group %s", len(offsets), group)
