"""PullConsumer against the reference broker: queues, pull results and statuses, tag filter,
blocking long poll, offsets kept in the group's store."""

from __future__ import annotations

import threading
import time

from rocketmq_sdk import Message
from rocketmq_sdk.consumer.pull_consumer import PullConsumer
from rocketmq_sdk.protocol import MessageQueue
from rocketmq_sdk.protocol.message import PullStatus

from .helpers import unique


def test_pull_statuses_tags_offsets_and_search(cluster, producer):
    topic, group = unique("TopicPull"), unique("cg")
    q0 = lambda mqs, msg, arg: mqs[0]  # noqa: E731
    t0 = int(time.time() * 1000)
    for i in range(6):
        producer.send(Message(topic, f"m{i}", tags="A" if i % 2 == 0 else "B"), q0)
    with PullConsumer(group, cluster.namesrv_addr, instance_name="pull1") as pc:
        mqs = pc.fetch_subscribe_message_queues(topic)
        assert mqs == [MessageQueue(topic, "broker-a", q) for q in range(4)]
        mq = mqs[0]
        r = pc.pull(mq, "*", 0, 4)
        assert r.pull_status is PullStatus.FOUND and [m.body for m in r.msg_found_list] == [b"m0", b"m1", b"m2", b"m3"]
        assert (r.next_begin_offset, r.min_offset, r.max_offset) == (4, 0, 6)
        r = pc.pull(mq, "A", 0, 32)
        assert [m.body for m in r.msg_found_list] == [b"m0", b"m2", b"m4"] and r.next_begin_offset == 6
        assert pc.pull(mq, "*", 6, 32).pull_status is PullStatus.NO_NEW_MSG
        assert pc.pull(mq, "*", 99, 32).pull_status is PullStatus.OFFSET_ILLEGAL
        assert pc.pull(mqs[1], "*", 0, 32).pull_status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL)
        assert pc.max_offset(mq) == 6 and pc.min_offset(mq) == 0
        assert pc.search_offset(mq, t0 - 60_000) == 0
        assert pc.fetch_consume_offset(mq) in (-1, 0)
        pc.update_consume_offset(mq, 4)
        assert pc.fetch_consume_offset(mq, from_store=False) == 4
    with PullConsumer(group, cluster.namesrv_addr, instance_name="pull2") as pc:
        assert pc.fetch_consume_offset(mq) == 4  # persisted at shutdown


def test_blocking_pull_returns_when_a_message_arrives(cluster, producer):
    topic, group = unique("TopicPullBlock"), unique("cg")
    q0 = lambda mqs, msg, arg: mqs[0]  # noqa: E731
    producer.send(Message(topic, b"first"), q0)
    with PullConsumer(group, cluster.namesrv_addr, instance_name="pull3") as pc:
        mq = pc.fetch_subscribe_message_queues(topic)[0]
        results = []
        t = threading.Thread(target=lambda: results.append(pc.pull(mq, "*", 1, 8, block=True)))
        began = time.monotonic()
        t.start()
        time.sleep(0.3)  # not synchronisation: lets the pull park first (the result is the same either way)
        producer.send(Message(topic, b"second"), q0)
        t.join(10)
        assert results and results[0].pull_status is PullStatus.FOUND
        assert [m.body for m in results[0].msg_found_list] == [b"second"]
        assert time.monotonic() - began < 5  # woken by the arrival, not the 20 s hold


def test_raw_pulls_give_the_undecoded_bodies_of_pull_in_flight_together(cluster, producer):
    from rocketmq_sdk.protocol.message_codec import decode_messages

    topic, group = unique("TopicPullRaw"), unique("cg")
    q0 = lambda mqs, msg, arg: mqs[0]  # noqa: E731
    for i in range(10):
        producer.send(Message(topic, f"m{i}", tags="A" if i % 2 == 0 else "B"), q0)
    with PullConsumer(group, cluster.namesrv_addr, instance_name="pullraw") as pc:
        mq = pc.fetch_subscribe_message_queues(topic)[0]
        result, body = pc.pull_raw(mq, "*", 2, 3)
        assert result.pull_status is PullStatus.FOUND and result.msg_found_list == []
        assert (result.next_begin_offset, result.max_offset) == (5, 10)
        decoded = decode_messages(body)
        assert [(m.body, m.queue_offset) for m in decoded] == [(b"m2", 2), (b"m3", 3), (b"m4", 4)]
        assert [m.msg_id for m in decoded] == [m.msg_id for m in pc.pull(mq, "*", 2, 3).msg_found_list]
        answers = pc.pull_raw_many(mq, "*", [0, 4, 8, 10], 4)
        assert [(r.pull_status, r.next_begin_offset) for r, _ in answers] == [
            (PullStatus.FOUND, 4), (PullStatus.FOUND, 8), (PullStatus.FOUND, 10), (PullStatus.NO_NEW_MSG, 10)]
        assert [m.body for _, b in answers for m in decode_messages(b)] == [f"m{i}".encode() for i in range(10)]
        assert answers[3][1] == b""
