"""Backlog visibility: how far each owned queue's committed offset is behind the broker's
max offset (what ``mqadmin consumerProgress`` shows as ``Diff``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..exceptions import MQError
from ..protocol.message import MessageQueue

if TYPE_CHECKING:
    from ..client.instance import MQClientInstance
    from .offset_store import OffsetTable
    from .process_queue import ProcessQueue

__all__ = ["QueueLag", "collect_lags"]

log = logging.getLogger("rocketmq_sdk.consumer.backlog")


@dataclass(frozen=True, slots=True)
class QueueLag:
    """The backlog of one queue for one group.

    Attributes:
        message_queue: the queue.
        broker_offset: the broker's max offset (next offset to be written); -1 if unknown.
        consumer_offset: the committed offset in this consumer's store (-1 if none yet).
        in_flight: messages pulled and not yet consumed by this consumer.
        lag: ``broker_offset - consumer_offset`` (messages not yet committed), or -1.
    """

    message_queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    in_flight: int
    lag: int


async def collect_lags(inst: MQClientInstance, store: OffsetTable,
                       queues: Iterable[tuple[MessageQueue, ProcessQueue | None]]) -> list[QueueLag]:
    """Ask the brokers for the max offsets of ``queues`` (concurrently, through ``inst``, on its
    loop) and compare them with the committed offsets in ``store``'s memory. Lookup failures
    give -1."""
    items = sorted(queues, key=lambda t: t[0])

    async def max_offset(mq: MessageQueue) -> int:
        try:
            addr = await inst.find_broker_master_or_refresh(mq.broker_name, mq.topic)
            return -1 if addr is None else await inst.api.get_max_offset(addr, mq)
        except MQError as exc:
            log.warning("max offset of %s unavailable: %s", mq, exc)
            return -1

    maxes = await asyncio.gather(*(max_offset(mq) for mq, _ in items))
    out = []
    for (mq, pq), broker in zip(items, maxes, strict=True):
        committed = store.read_memory(mq)
        base = max(committed, 0)
        out.append(QueueLag(mq, broker, committed, pq.msg_count if pq is not None else 0,
                            broker - base if broker >= 0 else -1))
    return out
