"""Start point: CONSUME_FROM_TIMESTAMP applies only to a group without a stored offset;
RESET_CONSUMER_CLIENT_OFFSET (220) restarts the queues from the offsets the broker sends."""

from __future__ import annotations

import datetime as dt
import threading
import time

from rocketmq_sdk import Message, PushConsumer
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus
from rocketmq_sdk.protocol.bodies import ResetOffsetBody
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.protocol.headers import ResetOffsetRequestHeader
from rocketmq_sdk.remoting.command import RemotingCommand

from .helpers import FAST, owned, unique, wait_until

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


class Bodies:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[bytes] = []

    def __call__(self, msgs, ctx):
        with self.lock:
            self.items.extend(m.body for m in msgs)
        return OK

    def get(self) -> list[bytes]:
        with self.lock:
            return list(self.items)


def start(cluster, group, topic, name, seen, **config):
    c = PushConsumer(group, cluster.namesrv_addr, instance_name=name, **{**FAST, **config})
    c.subscribe(topic)
    c.register_message_listener(seen)
    c.start()
    return c


def test_consume_from_timestamp_never_overrides_a_stored_offset(cluster, producer):
    topic, group = unique("TopicTs"), unique("cg")
    old = [f"old{i}".encode() for i in range(8)]
    for b in old:
        producer.send(Message(topic, b))
    boundary = int(time.time()) + 1  # the timestamp has whole seconds: wait for the next one
    wait_until(lambda: time.time() >= boundary, timeout_s=3, what="the next second")
    stamp = dt.datetime.fromtimestamp(boundary).strftime("%Y%m%d%H%M%S")
    new = [f"new{i}".encode() for i in range(8)]
    for b in new:
        producer.send(Message(topic, b))
    seen = Bodies()
    c = start(cluster, group, topic, "ts1", seen, consume_from_where="CONSUME_FROM_TIMESTAMP", consume_timestamp=stamp)
    try:
        wait_until(lambda: len(seen.get()) >= 8, what="the 8 newer messages")
        wait_until(lambda: len(owned(c, topic)) == 4
                   and all(pq.msg_count == 0 for pq in c.process_queues().values()), what="drained")
    finally:
        c.shutdown()
    # Java parity (pitfall): for a new group the broker answers QUERY_CONSUMER_OFFSET with 0
    # while a queue's first message is still in memory, so the timestamp is not consulted and
    # everything is consumed; the docs/protocol.md §6.5 TIMESTAMP branch itself is covered with a scripted
    # broker in tests/sdk/test_start_offset.py
    assert sorted(seen.get()) == sorted(old + new)
    # the group now has offsets: a far-past timestamp is ignored, nothing is consumed again
    for b in (b"later",):
        producer.send(Message(topic, b))
    again = Bodies()
    c = start(cluster, group, topic, "ts2", again, consume_from_where="CONSUME_FROM_TIMESTAMP",
              consume_timestamp="20000101000000")
    try:
        wait_until(lambda: again.get() == [b"later"], what="only the message sent after the restart")
    finally:
        c.shutdown()


def test_reset_consumer_client_offset_restarts_queues_from_the_given_offsets(cluster, producer):
    topic, group = unique("TopicReset"), unique("cg")
    bodies = [f"r{i}".encode() for i in range(12)]
    for b in bodies:
        producer.send(Message(topic, b))
    seen = Bodies()
    c = start(cluster, group, topic, "rs", seen)
    try:
        wait_until(lambda: len(seen.get()) >= 12, what="the first pass")
        mqs = sorted(mq for mq in c.process_queues() if mq.topic == topic)
        wait_until(lambda: all(c.offset_store.read_memory(mq) > 0 for mq in mqs), what="committed offsets")
        # the broker's request (as INVOKE_BROKER_TO_RESET_OFFSET forwards it): back to 0 everywhere
        header = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=0, is_force=True)
        cmd = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, header.to_ext_fields(),
                                      ResetOffsetBody({mq: 0 for mq in mqs}).to_json(), oneway=True)
        inst = c.instance
        assert inst.run(inst._on_reset_offset(None, cmd), 10) is None
        wait_until(lambda: len(seen.get()) >= 24, what="the second pass")
    finally:
        c.shutdown()
    assert sorted(seen.get()) == sorted(bodies * 2)
