"""LitePullConsumer against the reference broker: assign/subscribe, poll, seek, pause/resume,
commits (manual and automatic) and the all-queues threshold."""

from __future__ import annotations

import time

import pytest
from rocketmq_sdk import Message
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.consumer.lite_pull_consumer import LitePullConsumer
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.protocol import MessageQueue

from .helpers import unique, wait_until

LITE_FAST = {"suspend_timeout": 1000, "pull_timeout": 4000, "rebalance_interval": 500,
             "persist_consumer_offset_interval": 300, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}


def poll_until(consumer, n: int, timeout_s: float = 10.0) -> list:
    out: list = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < deadline:
        out.extend(consumer.poll(200))
    return out


def test_assign_poll_seek_pause_and_commit(cluster, producer):
    topic, group = unique("TopicLite"), unique("cg")
    q0 = lambda mqs, msg, arg: mqs[0]  # noqa: E731
    for i in range(10):
        producer.send(Message(topic, f"m{i}"), q0)
    mq = MessageQueue(topic, "broker-a", 0)
    c = LitePullConsumer(group, cluster.namesrv_addr, instance_name="lite1", auto_commit=False, **LITE_FAST)
    c.assign([mq])
    with pytest.raises(IllegalArgumentError):
        c.subscribe(topic)
    c.start()
    try:
        got = poll_until(c, 10)
        assert [m.body for m in got] == [f"m{i}".encode() for i in range(10)]
        assert c.assignment() == {mq}
        assert c.committed(mq) in (-1, 0)  # nothing committed yet (auto_commit off)
        c.commit_sync()
        assert c.committed(mq) == 10
        c.seek(mq, 3)
        assert [m.body for m in poll_until(c, 7)] == [f"m{i}".encode() for i in range(3, 10)]
        c.seek_to_begin(mq)
        assert poll_until(c, 1)[0].body == b"m0"
        c.seek_to_end(mq)
        assert c.poll(300) == []
        c.pause([mq])
        producer.send(Message(topic, b"while-paused"), q0)
        assert c.poll(600) == []
        c.resume([mq])
        assert [m.body for m in poll_until(c, 1)] == [b"while-paused"]
        with pytest.raises(IllegalArgumentError):
            c.seek(mq, 999)
        with pytest.raises(IllegalArgumentError):
            c.seek(MessageQueue(topic, "broker-a", 3), 0)
        assert c.offset_for_timestamp(mq, 0) == 0
    finally:
        c.shutdown()


def test_subscribe_splits_the_group_and_auto_commit_resumes(cluster, producer):
    topic, group = unique("TopicLiteSub"), unique("cg")
    bodies = {f"s{i}".encode() for i in range(40)}
    for b in sorted(bodies):
        producer.send(Message(topic, b))
    c1 = LitePullConsumer(group, cluster.namesrv_addr, instance_name="ls1", auto_commit_interval=100,
                          pull_threshold_for_all=8, **LITE_FAST)
    c2 = LitePullConsumer(group, cluster.namesrv_addr, instance_name="ls2", auto_commit_interval=100, **LITE_FAST)
    for c in (c1, c2):
        c.subscribe(topic)
        c.start()
    try:
        wait_until(lambda: len(c1.assignment()) == 2 and len(c2.assignment()) == 2
                   and not c1.assignment() & c2.assignment(), what="a 2/2 split")
        cached = sum(lag.in_flight for lag in c1.lag_report())
        assert cached <= 8 + c1.config.pull_batch_size  # bounded by pull_threshold_for_all
        got: list = []
        deadline = time.monotonic() + 15
        while {m.body for m in got} != bodies and time.monotonic() < deadline:
            got.extend(c1.poll(100))
            got.extend(c2.poll(100))
        assert {m.body for m in got} == bodies
        c1.poll(150)
        c2.poll(150)  # auto-commit due (100 ms)
    finally:
        c1.shutdown()
        c2.shutdown()
    producer.send(Message(topic, b"after"))
    c3 = LitePullConsumer(group, cluster.namesrv_addr, instance_name="ls3", **LITE_FAST)
    c3.subscribe(topic)
    c3.start()
    try:
        again = poll_until(c3, 1)
        again.extend(c3.poll(500))
    finally:
        c3.shutdown()
    assert [m.body for m in again] == [b"after"]


def test_arrival_listener_runs_on_the_io_thread_and_poll_zero_takes_the_batch(cluster, producer):
    """``set_arrival_listener``: called once per buffered batch on the client's I/O thread (not
    the caller's), after the batch is ready for ``poll(0)``; a failing listener is logged and the
    pulls go on; None removes it."""
    import threading

    topic, group = unique("TopicLiteListen"), unique("cg")
    mq = MessageQueue(topic, "broker-a", 0)
    q0 = lambda mqs, msg, arg: mqs[0]  # noqa: E731
    producer.send(Message(topic, b"first"), q0)
    c = LitePullConsumer(group, cluster.namesrv_addr, instance_name="listen1", auto_commit=False, **LITE_FAST)
    c.assign([mq])
    calls: list[tuple[str, list]] = []
    arrived = threading.Event()

    def listener() -> None:
        calls.append((threading.current_thread().name, c.poll(0)))
        arrived.set()
        if len(calls) == 2:
            raise RuntimeError("listener failure must not stop the pulls")

    c.set_arrival_listener(listener)
    c.start()
    try:
        assert arrived.wait(10)
        assert [m.body for m in calls[0][1]] == [b"first"]
        assert calls[0][0] != threading.current_thread().name
        for body in (b"second", b"third"):
            arrived.clear()
            producer.send(Message(topic, body), q0)
            assert arrived.wait(10)
        assert [m.body for _, got in calls for m in got] == [b"first", b"second", b"third"]
        c.set_arrival_listener(None)
        producer.send(Message(topic, b"unheard"), q0)
        assert [m.body for m in poll_until(c, 1)] == [b"unheard"]
        assert len(calls) == 3
    finally:
        c.shutdown()


def test_a_broker_offset_reset_reaches_the_listener_which_may_seek(cluster, producer):
    """An admin's offset reset (INVOKE_BROKER_TO_RESET_OFFSET, pushed as 220) reaches the
    listener of :meth:`set_offset_reset_listener` off the I/O loop (it seeks: blocking calls);
    without a listener the consumer keeps its position (Java's lite pull consumer)."""
    topic, group = unique("TopicLiteReset"), unique("cg")
    q0 = lambda mqs, msg, arg: mqs[0]  # noqa: E731
    for i in range(5):
        producer.send(Message(topic, f"r{i}"), q0)
    c = LitePullConsumer(group, cluster.namesrv_addr, instance_name="lreset", auto_commit=False, **LITE_FAST)
    c.subscribe(topic)
    c.start()
    resets: list = []

    def on_reset(reset_topic, offsets):
        for mq, off in offsets.items():
            c.seek(mq, off)
        resets.append((reset_topic, offsets))

    try:
        assert len(poll_until(c, 5)) == 5
        c.commit_sync()
        with AdminClient(cluster.namesrv_addr) as admin:
            admin.reset_offset_by_time(group, topic, 0)   # no listener: ignored, position kept
            producer.send(Message(topic, "r5"), q0)
            assert [m.body for m in poll_until(c, 1)] == [b"r5"]
            c.set_offset_reset_listener(on_reset)
            admin.reset_offset_by_time(group, topic, 0)   # back to the first message
            wait_until(lambda: resets, what="the reset handed to the listener")
        assert resets[0][0] == topic and resets[0][1][MessageQueue(topic, "broker-a", 0)] == 0
        assert [m.body for m in poll_until(c, 6)] == [f"r{i}".encode() for i in range(6)]
    finally:
        c.shutdown()
