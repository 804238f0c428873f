"""Group dynamics against the reference broker: consumers join and leave under load (at least
once, duplicates bounded by what was in flight), RECONSUME_LATER redelivery with growing delays
ending in the DLQ, and orderly lock renewal."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from rocketmq_sdk import Message, Producer, PushConsumer
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus

from .helpers import FAST, owned, pull_queue, unique, wait_until

embedded = pytest.importorskip("rocketmq_broker.embedded")
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


class Tally:
    def __init__(self, delay_s: float = 0.0) -> None:
        self.lock = threading.Lock()
        self.ids: Counter[str] = Counter()
        self.delay_s = delay_s

    def __call__(self, msgs, ctx):
        if self.delay_s:
            time.sleep(self.delay_s)
        with self.lock:
            self.ids.update(m.msg_id for m in msgs)
        return OK

    def snapshot(self) -> Counter[str]:
        with self.lock:
            return Counter(self.ids)


def test_consumers_joining_and_leaving_under_load_lose_nothing(cluster, producer):
    topic, group = unique("TopicChurn"), unique("cg")
    producer.send(Message(topic, b"create"))
    tally = Tally(delay_s=0.001)
    window = 32  # pull_batch_size: at most one unacknowledged batch per queue is replayed
    cfg = {**FAST, "pull_batch_size": window, "consume_thread_min": 2, "consume_thread_max": 2}

    def start(name):
        c = PushConsumer(group, cluster.namesrv_addr, instance_name=name, **cfg)
        c.subscribe(topic)
        c.register_message_listener(tally)
        c.start()
        return c

    sent: list[str] = []
    stop = threading.Event()

    def produce():
        i = 0
        while not stop.is_set() and i < 600:
            sent.append(producer.send(Message(topic, f"load-{i}")).msg_id)
            i += 1

    c1 = start("churn1")
    t = threading.Thread(target=produce)
    t.start()
    c2 = c3 = None
    try:
        wait_until(lambda: len(tally.snapshot()) >= 50, what="consumption under way")
        c2 = start("churn2")
        wait_until(lambda: len(owned(c2, topic)) == 2, what="c2 joined")
        c3 = start("churn3")
        wait_until(lambda: len(owned(c3, topic)) >= 1, what="c3 joined")
        c1.shutdown()
        c1 = None
        wait_until(lambda: len(owned(c2, topic)) + len(owned(c3, topic)) == 4, what="c1's queues taken over")
        t.join(30)
        stop.set()
        wait_until(lambda: set(sent) <= set(tally.snapshot()), timeout_s=30, what="every message consumed")
    finally:
        stop.set()
        t.join(5)
        for c in (c1, c2, c3):
            if c is not None:
                c.shutdown()
    counts = tally.snapshot()
    assert set(sent) <= set(counts)
    duplicates = sum(n - 1 for mid, n in counts.items() if mid in set(sent))
    # each of 3 queue hand-overs may replay at most what was pulled and not yet committed
    assert duplicates <= 4 * 3 * window


@pytest.fixture(scope="module")
def growing_delays():
    levels = "1s 1s 1s 1s 2s 3s " + " ".join(["1s"] * 12)  # reconsume n uses level 3 + n
    with embedded.start_dev_cluster(in_process=True, broker_config={"message_delay_level": levels}) as c:
        yield c


def test_reconsume_later_comes_back_with_growing_delay_then_lands_in_the_dlq(growing_delays):
    cl = growing_delays
    topic, group = unique("TopicRetry"), unique("cg")
    seen: list[tuple[int, float]] = []

    def listener(msgs, ctx):
        if msgs[0].body == b"create":
            return OK
        seen.extend((m.reconsume_times, time.monotonic()) for m in msgs)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    with Producer(unique("pg"), cl.namesrv_addr) as p:
        p.send(Message(topic, b"create"))
        c = PushConsumer(group, cl.namesrv_addr, instance_name="retry", max_reconsume_times=3, **FAST)
        c.subscribe(topic)
        c.register_message_listener(listener)
        c.start()
        try:
            wait_until(lambda: len(owned(c, topic)) == 4, what="queues")
            p.send(Message(topic, b"always-fails", tags="X"))
            wait_until(lambda: len(seen) >= 4, timeout_s=20, what="4 deliveries")
            dlq: list = []
            wait_until(lambda: dlq.extend(pull_queue(c, "broker-a", f"%DLQ%{group}", group=group)) or dlq,
                       what="the DLQ message")
            extra = len(seen)
        finally:
            c.shutdown()
    assert [n for n, _ in seen[:4]] == [0, 1, 2, 3] and extra == 4  # nothing after the limit
    gaps = [b - a for (_, a), (_, b) in zip(seen, seen[1:], strict=False)]
    assert 0.8 < gaps[0] < 2.5 and 0.8 < gaps[1] < 2.5 and gaps[2] > 1.7  # levels 3, 4, 5 = 1 s, 1 s, 2 s
    (m,) = dlq
    assert m.body == b"always-fails" and m.reconsume_times == 4  # the broker counts the last send-back (Java)


def test_orderly_locks_are_renewed_periodically(cluster, producer):
    topic, group = unique("TopicRenew"), unique("cg")
    producer.send(Message(topic, b"create"))
    c = PushConsumer(group, cluster.namesrv_addr, instance_name="renew", rebalance_lock_interval=100, **FAST)
    c.subscribe(topic)
    c.register_message_listener(lambda msgs, ctx: ConsumeOrderlyStatus.SUCCESS, orderly=True)
    c.start()
    try:
        wait_until(lambda: len(owned(c, topic)) == 4, what="queues")
        pqs = [pq for mq, pq in c.process_queues().items() if mq.topic == topic]
        first = {id(pq): pq.last_lock_timestamp for pq in pqs}
        wait_until(lambda: all(pq.last_lock_timestamp > first[id(pq)] for pq in pqs), what="renewed locks")
        assert all(pq.locked for pq in pqs)
        info = c.consumer_running_info()
        assert info.properties["PROP_CONSUMEORDERLY"] == "true"
    finally:
        c.shutdown()
