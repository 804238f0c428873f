"""Producer and PushConsumer end to end against the reference broker (in process).

Skipped until ``rocketmq_broker.embedded`` is importable. Every wait polls a condition with a
deadline. ``cluster`` and ``producer`` come from this folder's conftest (the broker's delay levels
are all 1 s so redeliveries come quickly).
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from rocketmq_sdk import (
    ConsumeConcurrentlyStatus,
    Message,
    PushConsumer,
    SelectMessageQueueByHash,
)
from rocketmq_sdk.producer import java_hash_code

from .helpers import Collector, unique, wait_until

embedded = pytest.importorskip("rocketmq_broker.embedded")

SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
FAST = {"suspend_timeout": 2000, "pull_timeout": 5000, "rebalance_interval": 1000,
        "persist_consumer_offset_interval": 500, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}


def start_consumer(cluster, group, topic, collector, name, expression="*", result=None, **config):
    consumer = PushConsumer(group, cluster.namesrv_addr, instance_name=name, **{**FAST, **config})
    consumer.subscribe(topic, expression)
    consumer.register_message_listener(collector.listener(name, result))
    consumer.start()
    return consumer


def owned(consumer, topic):
    return {mq for mq in consumer.process_queues() if mq.topic == topic}


def test_every_message_is_consumed_exactly_once_with_its_tags_keys_and_properties(cluster, producer):
    topic, group = unique("TopicE2E"), unique("cg")
    q0 = lambda mqs, msg, arg: mqs[0]  # noqa: E731 - everything in one queue, TagC first
    producer.send(Message(topic, b"filtered", tags="TagC"), q0)
    sent = {}
    for i in range(40):
        msg = Message(topic, f"body-{i}", tags="TagA" if i % 2 else "TagB", keys=[f"k{i}", "common"],
                      properties={"seq": str(i)})
        r = producer.send(msg, q0) if i == 39 else producer.send(msg)
        sent[r.msg_id] = i
    collector = Collector()
    consumer = start_consumer(cluster, group, topic, collector, "solo", "TagA || TagB")
    try:
        wait_until(lambda: collector.count() >= 40, what="40 messages")
        last_queue0 = max(m.queue_offset for _, m in collector.seen if m.queue_id == 0)
        # the TagC message sits before the last queue-0 message: it was skipped, not pending
        assert last_queue0 > 0
    finally:
        consumer.shutdown()
    msgs = [m for _, m in collector.seen]
    assert Counter(m.msg_id for m in msgs) == Counter({mid: 1 for mid in sent})
    for m in msgs:
        i = sent[m.msg_id]
        assert m.body == f"body-{i}".encode() and m.topic == topic
        assert m.tags == ("TagA" if i % 2 else "TagB")
        assert m.keys == [f"k{i}", "common"] and m.get_property("seq") == str(i)
        assert m.reconsume_times == 0 and m.store_timestamp > 0


def test_two_consumers_split_the_queues_and_each_message_is_consumed_once(cluster, producer):
    topic, group = unique("TopicSplit"), unique("cg")
    producer.send(Message(topic, b"create"))  # the topic exists before the consumers start
    collector = Collector()
    # no periodic rebalance during the test: c1 must react to NOTIFY_CONSUMER_IDS_CHANGED
    c1 = start_consumer(cluster, group, topic, collector, "c1", rebalance_interval=60_000)
    c2 = start_consumer(cluster, group, topic, collector, "c2", rebalance_interval=60_000)
    try:
        wait_until(lambda: len(owned(c1, topic)) == 2 and len(owned(c2, topic)) == 2
                   and not owned(c1, topic) & owned(c2, topic), what="a 2/2 split")
        wait_until(lambda: collector.count() >= 1, what="the first message")
        ids = [producer.send(Message(topic, f"m{i}")).msg_id for i in range(60)]
        wait_until(lambda: set(ids) <= {m.msg_id for _, m in list(collector.seen)}, what="60 messages")
        assert owned(c1, topic) | owned(c2, topic) == set(producer.fetch_publish_queues(topic))
        by_consumer = defaultdict(set)
        for name, m in collector.seen:
            if m.msg_id in ids:  # sent after the split
                by_consumer[name].add(m.queue_id)
        assert not by_consumer["c1"] & by_consumer["c2"]
        assert by_consumer["c1"] == {mq.queue_id for mq in owned(c1, topic)}
    finally:
        c1.shutdown()
        c2.shutdown()
    counts = Counter(m.msg_id for _, m in collector.seen)
    assert all(counts[i] == 1 for i in ids) and len(counts) == 61  # "create" may be seen twice (handover)


def test_hash_selector_keeps_per_key_order(cluster, producer):
    topic, group = unique("TopicOrder"), unique("cg")
    sel = SelectMessageQueueByHash()
    queues = {}
    for seq in range(10):
        for key in ("order-1", "order-2", "order-3", "x"):
            r = producer.send(Message(topic, f"{key}:{seq}", keys=key), sel, key)
            queues.setdefault(key, set()).add(r.message_queue.queue_id)
    for key, qs in queues.items():
        assert qs == {abs(java_hash_code(key)) % 4}
    collector = Collector()
    consumer = start_consumer(cluster, group, topic, collector, "ord")
    try:
        wait_until(lambda: collector.count() >= 40, what="40 messages")
    finally:
        consumer.shutdown()
    per_key = defaultdict(list)
    for _, m in collector.seen:
        key, seq = m.body.decode().split(":")
        per_key[key].append((m.queue_offset, int(seq)))
    for key, items in per_key.items():
        items.sort()
        assert [seq for _, seq in items] == list(range(10)), key


def test_restarted_consumer_resumes_from_the_committed_offset(cluster, producer):
    topic, group = unique("TopicResume"), unique("cg")
    first = [producer.send(Message(topic, f"a{i}")).msg_id for i in range(20)]
    collector = Collector()
    consumer = start_consumer(cluster, group, topic, collector, "r1")
    try:
        wait_until(lambda: collector.count() >= 20, what="the first 20")
    finally:
        consumer.shutdown()
    second = [producer.send(Message(topic, f"b{i}")).msg_id for i in range(20)]
    again = Collector()
    consumer = start_consumer(cluster, group, topic, again, "r2")
    try:
        wait_until(lambda: again.count() >= 20, what="the next 20")
        # and nothing else arrives: every queue's pull is past the committed offset
        wait_until(lambda: all(pq.msg_count == 0 for pq in consumer.process_queues().values()),
                   what="drained queues")
    finally:
        consumer.shutdown()
    assert sorted(m.msg_id for _, m in again.seen) == sorted(second)
    assert not set(first) & {m.msg_id for _, m in again.seen}


def test_listener_exception_leads_to_redelivery_through_send_back(cluster, producer):
    topic, group = unique("TopicRetry"), unique("cg")
    ids = [producer.send(Message(topic, f"r{i}", tags="T")).msg_id for i in range(5)]
    failed_once: set[str] = set()

    def result(m):
        if m.msg_id not in failed_once:
            failed_once.add(m.msg_id)
            raise RuntimeError("first delivery fails")
        return SUCCESS

    collector = Collector()
    consumer = start_consumer(cluster, group, topic, collector, "retry", result=result,
                              consume_thread_max=1, consume_thread_min=1)
    try:
        wait_until(lambda: collector.count() >= 10, timeout_s=30, what="10 deliveries")
    finally:
        consumer.shutdown()
    deliveries = defaultdict(list)
    for _, m in collector.seen:
        deliveries[m.msg_id].append(m)
    assert sorted(deliveries) == sorted(ids)
    for mid, ms in deliveries.items():
        assert len(ms) == 2, mid
        first, second = ms
        assert first.reconsume_times == 0 and second.reconsume_times == 1
        assert second.topic == topic and second.body == first.body and second.tags == "T"


def test_batch_messages_are_stored_contiguously_and_consumed_individually(cluster, producer):
    topic, group = unique("TopicBatch"), unique("cg")
    msgs = [Message(topic, f"b{i}", tags="TagA", keys=f"k{i}") for i in range(10)]
    result = producer.send_batch(msgs)
    assert result.msg_id.split(",") == [m.uniq_key for m in msgs]
    collector = Collector()
    consumer = start_consumer(cluster, group, topic, collector, "batch")
    try:
        wait_until(lambda: collector.count() >= 10, what="10 batched messages")
    finally:
        consumer.shutdown()
    got = sorted(((m.queue_id, m.queue_offset, m.body, m.msg_id) for _, m in collector.seen))
    assert {q for q, *_ in got} == {result.message_queue.queue_id}
    assert [o for _, o, *_ in got] == list(range(result.queue_offset, result.queue_offset + 10))
    assert [b for *_, b, _ in got] == [f"b{i}".encode() for i in range(10)]
    assert [i for *_, i in got] == [m.uniq_key for m in msgs]
