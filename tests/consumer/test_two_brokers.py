"""Consumers over a topic spread on two brokers: queues of both brokers are split in the group,
orderly locks are taken on each queue's own broker, and per-key order is kept."""

from __future__ import annotations

from collections import defaultdict

import pytest
from rocketmq_sdk import Message, Producer, PushConsumer, SelectMessageQueueByHash

from .helpers import FAST, owned, unique, wait_until
from .test_orderly import OrderRecorder

two_brokers = pytest.importorskip("tests.producer.two_brokers")


@pytest.fixture(scope="module")
def brokers():
    with two_brokers.TwoBrokers() as b:
        yield b


def test_orderly_group_over_two_brokers(brokers):
    topic, group = unique("TopicTwoB"), unique("cg")
    keys = [f"key-{i}" for i in range(12)]
    with Producer(unique("pg"), brokers.namesrv_addr) as p:
        # 8 sends over the TBW102 route (4 queues per broker, round robin) create it on both
        assert len({p.send(Message(topic, b"create")).message_queue.broker_name for _ in range(8)}) == 2
        rec = OrderRecorder()
        consumers = []
        try:
            for name in ("tb1", "tb2", "tb3"):
                c = PushConsumer(group, brokers.namesrv_addr, instance_name=name, **FAST)
                c.subscribe(topic)
                c.register_message_listener(rec.listener(name), orderly=True)
                c.start()
                consumers.append(c)
            wait_until(lambda: sorted(len(owned(c, topic)) for c in consumers) == [2, 3, 3], timeout_s=20,
                       what="8 queues split 3/3/2")
            sel = SelectMessageQueueByHash()
            for seq in range(15):
                for key in keys:
                    p.send(Message(topic, f"{key}:{seq}", keys=key), sel, key)
            wait_until(lambda: sum(1 for _, k, _, _ in rec.seen if k in keys) >= 15 * 12, timeout_s=20,
                       what="all keyed messages")
            shares = [owned(c, topic) for c in consumers]
            assert all(pq.locked for c in consumers for mq, pq in c.process_queues().items()
                       if mq.topic == topic)
        finally:
            for c in consumers:
                c.shutdown()
    all_mqs = set().union(*shares)
    assert len(all_mqs) == 8 and {mq.broker_name for mq in all_mqs} == {"broker-a", "broker-b"}
    assert sum(len(s) for s in shares) == 8  # disjoint
    per_key = defaultdict(list)
    for _, key, seq, _ in rec.seen:
        if key in keys:
            per_key[key].append(seq)
    assert all(per_key[k] == list(range(15)) for k in keys)
    assert rec.max_active == 1
