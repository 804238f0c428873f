"""Listener ergonomics: decorators, per-topic handlers, coroutine listeners on their own loop
thread, batches with ``ack_index``, ``consume_timeout``, per-topic flow control and the
concurrent max span."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest
from rocketmq_sdk import Message, PushConsumer
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus
from rocketmq_sdk.consumer.allocate import AllocateMessageQueueAveragely
from rocketmq_sdk.consumer.process_queue import ProcessQueue
from rocketmq_sdk.consumer.pull_loop import flow_thresholds
from rocketmq_sdk.consumer.rebalance import Rebalancer
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.protocol import MessageExt, MessageQueue

from .helpers import FAST, unique, wait_until

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER


def test_on_message_routes_topics_and_runs_coroutines_on_a_dedicated_loop(cluster, producer):
    t1, t2, group = unique("TopicDecoA"), unique("TopicDecoB"), unique("cg")
    producer.send(Message(t1, b"a1", tags="keep"))
    producer.send(Message(t1, b"a2", tags="skip"))
    producer.send(Message(t2, b"b1"))
    consumer = PushConsumer(group, cluster.namesrv_addr, instance_name="deco", **FAST)
    got: dict[str, list] = {"a": [], "b": []}

    @consumer.on_message(t1, "keep")
    def on_a(msgs, ctx):
        got["a"].extend((m.body, threading.current_thread().name) for m in msgs)
        return OK

    @consumer.on_message(t2)
    async def on_b(msgs, ctx):
        await asyncio.sleep(0)
        got["b"].extend((m.body, threading.current_thread().name, asyncio.get_running_loop()) for m in msgs)
        return OK

    with pytest.raises(IllegalArgumentError):
        consumer.on_message(t2)(on_a)
    with pytest.raises(IllegalArgumentError):
        consumer.listener(on_a)
    consumer.start()
    try:
        wait_until(lambda: got["a"] and got["b"], what="both topics")
        io_loop = consumer.instance.loop_thread.loop
    finally:
        consumer.shutdown()
    assert [b for b, _ in got["a"]] == [b"a1"]  # tag filter of the on_message expression
    (body, thread_name, loop), = got["b"]
    assert body == b"b1" and thread_name == f"rocketmq-listener-{group}" and loop is not io_loop
    assert got["a"][0][1].startswith(f"rocketmq-consume-{group}")


def test_listener_decorator_batch_and_ack_index_send_back_the_rest(cluster, producer):
    topic, group = unique("TopicBatch"), unique("cg")
    q0 = lambda mqs, msg, arg: mqs[0]  # noqa: E731
    for i in range(4):
        producer.send(Message(topic, f"m{i}"), q0)
    consumer = PushConsumer(group, cluster.namesrv_addr, instance_name="batch", consume_message_batch_max_size=4,
                            **FAST)
    consumer.subscribe(topic)
    lock = threading.Lock()
    calls: list[list[tuple[bytes, int]]] = []

    @consumer.listener
    def handle(msgs, ctx):
        with lock:
            calls.append([(m.body, m.reconsume_times) for m in msgs])
        if all(m.reconsume_times == 0 for m in msgs) and len(msgs) == 4:
            ctx.ack_index = 1  # m0, m1 consumed; m2, m3 sent back
        return OK

    assert handle is not None
    consumer.start()
    try:
        wait_until(lambda: sum(len(c) for c in calls) >= 6, what="the redelivery of m2 and m3")
    finally:
        consumer.shutdown()
    assert calls[0] == [(b"m0", 0), (b"m1", 0), (b"m2", 0), (b"m3", 0)]
    assert sorted(x for c in calls[1:] for x in c) == [(b"m2", 1), (b"m3", 1)]


def test_a_message_stuck_past_consume_timeout_is_sent_back(cluster, producer):
    topic, group = unique("TopicTimeout"), unique("cg")
    producer.send(Message(topic, b"slow"))
    release = threading.Event()
    seen: list[int] = []

    def listener(msgs, ctx):
        seen.extend(m.reconsume_times for m in msgs)
        if msgs[0].reconsume_times == 0:
            release.wait(10)  # stuck well past the 0.6 s timeout
        return OK

    consumer = PushConsumer(group, cluster.namesrv_addr, instance_name="tmo", consume_timeout=0.01, **FAST)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        wait_until(lambda: 1 in seen, what="the redelivery while the first call is stuck")
        release.set()
    finally:
        release.set()
        consumer.shutdown()
    assert seen[:2] == [0, 1]


def _mq(q):
    return MessageQueue("T", "b", q)


def test_per_topic_thresholds_are_shared_among_owned_queues():
    def fake(**cfg):
        base = {"pull_threshold_for_queue": 1000, "pull_threshold_size_for_queue": 100,
                "pull_threshold_for_topic": -1, "pull_threshold_size_for_topic": -1}
        rebalancer = Rebalancer(SimpleNamespace(group="g"), AllocateMessageQueueAveragely(),
                                start_pulling=lambda mq, pq, offset: None)
        rebalancer.process_queues.update({mq: ProcessQueue() for mq in [*map(_mq, range(4)), MessageQueue("Other", "b", 0)]})
        return SimpleNamespace(**{**base, **cfg}), rebalancer

    assert flow_thresholds(*fake(), _mq(0)) == (1000, 100 * 1024 * 1024)
    assert flow_thresholds(*fake(pull_threshold_for_topic=100), _mq(0)) == (25, 100 * 1024 * 1024)
    assert flow_thresholds(*fake(pull_threshold_size_for_topic=8), _mq(0)) == (1000, 2 * 1024 * 1024)
    assert flow_thresholds(*fake(pull_threshold_for_topic=2, pull_threshold_size_for_topic=1), _mq(0)) == \
        (1, 1024 * 1024)  # at least 1


def test_max_span_of_the_cache():
    pq = ProcessQueue()
    assert pq.max_span() == 0
    pq.put_messages([MessageExt(topic="T", queue_offset=o, body=b"x") for o in (5, 6, 2500)])
    assert pq.max_span() == 2495
    pq.remove_messages([MessageExt(topic="T", queue_offset=5, body=b"x")])
    assert pq.max_span() == 2494
