"""The Rebalancer alone drops queues: a rebalance, a pull answered OFFSET_ILLEGAL
(``drop(mq, reset_offset=...)``: the broker's offset is stored and persisted before the queue is
forgotten, so the next owner starts there) and shutdown (``drop_all``)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from rocketmq_sdk.consumer.allocate import AllocateMessageQueueAveragely
from rocketmq_sdk.consumer.process_queue import ProcessQueue
from rocketmq_sdk.consumer.rebalance import Rebalancer
from rocketmq_sdk.protocol.message import MessageQueue

MQ = MessageQueue("T", "broker-a", 0)


class RecordingStore:
    """An offset store that records what the rebalancer does with it, in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def update_offset(self, mq, offset, increase_only):
        self.events.append(("update", mq, offset, increase_only))

    async def persist(self, mq, *, oneway=True):
        self.events.append(("persist", mq, oneway))

    def remove_offset(self, mq):
        self.events.append(("remove", mq))


def _rebalancer(store: RecordingStore) -> Rebalancer:
    owner = SimpleNamespace(group="g", offset_store=store)
    return Rebalancer(owner, AllocateMessageQueueAveragely(), start_pulling=lambda mq, pq, offset: None)


def test_an_illegal_offset_is_stored_and_persisted_before_the_queue_is_forgotten():
    store = RecordingStore()
    rebalancer = _rebalancer(store)
    pq = rebalancer.process_queues[MQ] = ProcessQueue()
    asyncio.run(rebalancer.drop(MQ, reset_offset=42))
    assert pq.dropped and MQ not in rebalancer.process_queues
    assert store.events == [("update", MQ, 42, False), ("persist", MQ, False), ("remove", MQ)]


def test_a_queue_not_owned_is_left_alone():
    store = RecordingStore()
    asyncio.run(_rebalancer(store).drop(MQ, reset_offset=42))
    assert store.events == []


def test_shutdown_drops_every_queue_at_once():
    rebalancer = _rebalancer(RecordingStore())
    other = MessageQueue("T", "broker-a", 1)
    pqs = [rebalancer.process_queues.setdefault(mq, ProcessQueue()) for mq in (MQ, other)]
    assert sorted(rebalancer.drop_all()) == [MQ, other]
    assert rebalancer.process_queues == {} and all(pq.dropped for pq in pqs)
    assert rebalancer.owned_count("T") == 0
