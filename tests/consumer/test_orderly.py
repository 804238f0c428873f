"""Orderly push consumer against the reference broker: broker locks, one thread per queue,
order kept across a rebalance, local suspend and the DLQ after ``max_reconsume_times``."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from rocketmq_sdk import Message, PushConsumer, SelectMessageQueueByHash
from rocketmq_sdk.consumer import ConsumeOrderlyStatus
from rocketmq_sdk.protocol.codes import MessageConst

from .helpers import FAST, owned, pull_queue, unique, wait_until

SUCCESS = ConsumeOrderlyStatus.SUCCESS
SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT


class OrderRecorder:
    """Records (consumer, key, seq) in global delivery order and the concurrency per queue."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, int, int]] = []
        self.active: dict[object, int] = defaultdict(int)  # per MessageQueue (queue ids repeat across brokers)
        self.max_active = 0
        self.delay_s = delay_s

    def listener(self, name: str):
        def fn(msgs, ctx):
            mq = ctx.message_queue
            qid = mq.queue_id
            with self.lock:
                self.active[mq] += 1
                self.max_active = max(self.max_active, self.active[mq])
            try:
                if self.delay_s:
                    time.sleep(self.delay_s)
                with self.lock:
                    for m in msgs:
                        if b":" in m.body:  # "key:seq"; other bodies (topic creation) are ignored
                            key, seq = m.body.decode().split(":")
                            self.seen.append((name, key, int(seq), qid))
            finally:
                with self.lock:
                    self.active[mq] -= 1
            return SUCCESS
        return fn

    def count(self) -> int:
        with self.lock:
            return len(self.seen)


def start_orderly(cluster, group, topic, listener, name, **config) -> PushConsumer:
    c = PushConsumer(group, cluster.namesrv_addr, instance_name=name, **{**FAST, **config})
    c.subscribe(topic, "*")
    c.register_message_listener(listener, orderly=True)
    c.start()
    return c


def send_keyed(producer, topic, keys, seqs):
    sel = SelectMessageQueueByHash()
    for seq in seqs:
        for key in keys:
            producer.send(Message(topic, f"{key}:{seq}", keys=key), sel, key)


def test_order_is_kept_across_a_rebalance_and_locks_move_with_the_queues(cluster, producer):
    topic, group = unique("TopicOrderly"), unique("cg")
    keys = [f"order-{i}" for i in range(8)]
    send_keyed(producer, topic, keys, range(30))
    rec = OrderRecorder(delay_s=0.002)
    c1 = start_orderly(cluster, group, topic, rec.listener("c1"), "o1", consume_thread_min=4, consume_thread_max=4)
    c2 = c3 = None
    try:
        wait_until(lambda: rec.count() >= 40, what="c1 consuming")
        assert all(pq.locked for pq in c1.process_queues().values())
        c2 = start_orderly(cluster, group, topic, rec.listener("c2"), "o2", consume_thread_min=4, consume_thread_max=4)
        send_keyed(producer, topic, keys, range(30, 60))  # while the queues change hands
        wait_until(lambda: len(owned(c1, topic)) == 2 and len(owned(c2, topic)) == 2
                   and not owned(c1, topic) & owned(c2, topic), what="a 2/2 split")
        send_keyed(producer, topic, keys, range(60, 80))
        wait_until(lambda: rec.count() >= 8 * 80, timeout_s=30, what="all 640 messages")
        # c1 leaves: its unlock at shutdown lets c2 take the queues at once (no 60 s expiry)
        c1.shutdown()
        c1 = None
        wait_until(lambda: len(owned(c2, topic)) == 4, what="c2 owning all queues")
        send_keyed(producer, topic, keys, range(80, 90))
        wait_until(lambda: rec.count() >= 8 * 90, what="the last 80")
    finally:
        for c in (c1, c2, c3):
            if c is not None:
                c.shutdown()
    with rec.lock:
        seen = list(rec.seen)
    per_key = defaultdict(list)
    for _, key, seq, _ in seen:
        per_key[key].append(seq)
    for key in keys:
        assert per_key[key] == list(range(90)), key  # in order, none lost, none repeated
    assert rec.max_active == 1  # never two listener calls on one queue at once
    consumers_of_queue = defaultdict(set)
    for name, _, seq, qid in seen:
        if 60 <= seq < 80:
            consumers_of_queue[qid].add(name)
    assert all(len(names) == 1 for names in consumers_of_queue.values())  # after the split, one owner


def test_suspend_is_retried_locally_then_the_message_goes_to_the_dlq(cluster, producer):
    topic, group = unique("TopicSuspend"), unique("cg")
    q0 = lambda mqs, msg, arg: mqs[0]  # noqa: E731 - all in one queue
    for body in (b"first", b"poison", b"after-1", b"after-2"):
        producer.send(Message(topic, body, tags="T"), q0)
    lock = threading.Lock()
    calls: list[tuple[bytes, int, float]] = []

    def listener(msgs, ctx):
        with lock:
            calls.extend((m.body, m.reconsume_times, time.monotonic()) for m in msgs)
        if msgs[0].body == b"poison":
            ctx.suspend_current_queue_time_millis = 100
            return SUSPEND
        return SUCCESS

    c = start_orderly(cluster, group, topic, listener, "s1", max_reconsume_times=2)
    dlq_seen: list = []
    try:
        wait_until(lambda: any(b == b"after-2" for b, _, _ in calls), what="the queue to move past the poison")
        with lock:
            order = [(b, t) for b, t, _ in calls]
            poison_times = [ts for b, _, ts in calls if b == b"poison"]
        # first, poison consumed 3 times (reconsume 0, 1, 2: the limit), then the rest in order
        assert order == [(b"first", 0), (b"poison", 0), (b"poison", 1), (b"poison", 2), (b"after-1", 0),
                         (b"after-2", 0)]
        assert all(b - a >= 0.09 for a, b in zip(poison_times, poison_times[1:], strict=False))
        # the broker stores it in %DLQ%group (pulled directly: the name server learns of the new
        # DLQ topic only at the broker's next registration)
        wait_until(lambda: dlq_seen.extend(pull_queue(c, "broker-a", f"%DLQ%{group}", group=group)) or dlq_seen,
                   what="the poison message in the DLQ")
    finally:
        c.shutdown()
    (m,) = dlq_seen
    assert m.body == b"poison" and m.tags == "T" and m.reconsume_times == 2
    assert m.get_property(MessageConst.RETRY_TOPIC) == topic
    assert m.get_property(MessageConst.ORIGIN_MESSAGE_ID)


def test_broadcasting_orderly_needs_no_locks_and_keeps_order(cluster, producer, tmp_path):
    topic, group = unique("TopicOrderlyBcast"), unique("cg")
    keys = ["k0", "k1", "k2"]
    send_keyed(producer, topic, keys, range(20))
    recs = [OrderRecorder(), OrderRecorder()]
    consumers = []
    try:
        for i, rec in enumerate(recs):
            c = PushConsumer(group, cluster.namesrv_addr, instance_name=f"ob{i}", message_model="BROADCASTING",
                             local_offset_store_dir=str(tmp_path), **FAST)
            c.subscribe(topic)

            @c.listener(orderly=True)
            async def handle(msgs, ctx, rec=rec):  # a coroutine orderly listener
                return rec.listener("b")(msgs, ctx)

            c.start()
            consumers.append(c)
        wait_until(lambda: all(r.count() >= 60 for r in recs), what="60 messages at each instance")
        assert not any(pq.locked for c in consumers for pq in c.process_queues().values())
    finally:
        for c in consumers:
            c.shutdown()
    for rec in recs:
        per_key = defaultdict(list)
        for _, key, seq, _ in rec.seen:
            per_key[key].append(seq)
        assert all(per_key[k] == list(range(20)) for k in keys)
