"""Backlog visibility (per-queue lag) and fork safety of consumers."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from rocketmq_sdk import Message, PushConsumer
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus
from rocketmq_sdk.exceptions import ClientStateError

from .helpers import FAST, unique, wait_until


def test_lag_report_shows_the_backlog_then_zero(cluster, producer):
    topic, group = unique("TopicLag"), unique("cg")
    q0 = lambda mqs, msg, arg: mqs[0]  # noqa: E731
    for i in range(10):
        producer.send(Message(topic, f"m{i}"), q0)
    gate = threading.Event()

    def listener(msgs, ctx):
        gate.wait(10)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer(group, cluster.namesrv_addr, instance_name="lag", consume_thread_min=1, consume_thread_max=1,
                     **FAST)
    c.subscribe(topic)
    c.register_message_listener(listener)
    c.start()
    try:
        wait_until(lambda: any(lag.in_flight == 10 for lag in c.lag_report(topic)), what="10 in flight")
        lags = {lag.message_queue.queue_id: lag for lag in c.lag_report(topic)}
        assert sorted(lags) == [0, 1, 2, 3]
        assert lags[0].broker_offset == 10 and lags[0].lag == 10 and lags[0].consumer_offset in (-1, 0)
        assert all(lags[q].lag == 0 for q in (1, 2, 3))
        gate.set()
        wait_until(lambda: {lag.lag for lag in c.lag_report(topic)} == {0}, what="no backlog")
        assert any(lag.message_queue.topic == c.retry_topic for lag in c.lag_report())
    finally:
        gate.set()
        c.shutdown()


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs fork()")
def test_a_consumer_inherited_through_fork_refuses_to_work_in_the_child(cluster, producer):
    topic, group = unique("TopicFork"), unique("cg")
    producer.send(Message(topic, b"x"))
    c = PushConsumer(group, cluster.namesrv_addr, instance_name="fork", **FAST)
    c.subscribe(topic)
    c.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    c.start()
    try:
        pid = os.fork()
        if pid == 0:  # child: every call that needs the I/O loop raises, shutdown does not hang
            code = 1
            try:
                c.lag_report()
            except ClientStateError:
                code = 0
            except BaseException:
                code = 2
            try:
                c.shutdown()
            except BaseException:
                code = 3
            os._exit(code)
        deadline = time.monotonic() + 20
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.monotonic() < deadline, "child hung"
            time.sleep(0.02)
        assert os.waitstatus_to_exitcode(status) == 0
        assert c.lag_report(topic)  # the parent's consumer still works
    finally:
        c.shutdown()
