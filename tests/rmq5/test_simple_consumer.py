"""``SimpleConsumer`` (5.x POP consumption) against the reference broker answering as 5.3.3,
and its requests checked field by field against the Java 5.3.3 client's captured frames."""

from __future__ import annotations

import asyncio
import time

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import (
    IllegalArgumentError,
    Message,
    RequestCodeNotSupportedError,
    SimpleConsumer,
)
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.protocol.message_codec import decode_messages
from rocketmq_sdk.protocol.pop import ReceiptHandle, attach_handles
from rocketmq_sdk.remoting import RemotingCommand

from tests.rmq5.conftest import V4, broker_of
from tests.rmq5.frames import body_bytes, frame

TOPIC = "SimpleTopic"


def _consumer(cluster, group="simple_group", **kw):
    c = SimpleConsumer(group, cluster.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **kw)
    c.subscribe(TOPIC, "*")
    c.start()
    return c


def _receive_all(c, n, invisible=30.0, deadline_s=10.0):
    got = []
    deadline = time.monotonic() + deadline_s
    while len(got) < n:
        assert time.monotonic() < deadline, f"received {len(got)} of {n}"
        got += c.receive(32, invisible)
    return got


def test_handles_built_from_a_captured_5x_answer_equal_javas():
    resp = frame("pop", 20)
    msgs = attach_handles(decode_messages(body_bytes(resp)), resp["header"]["extFields"], "broker-a")
    # Java acked these handles (pop:21 acks offset 0 of queue 1)
    assert msgs[0].receipt_handle == frame("pop", 21)["header"]["extFields"]["extraInfo"]
    retried = frame("pop", 48)
    (m,) = attach_handles(decode_messages(body_bytes(retried)), retried["header"]["extFields"], "broker-a")
    assert m.receipt_handle == frame("pop", 49)["header"]["extFields"]["extraInfo"]
    assert ReceiptHandle.parse(m.receipt_handle).topic_for_ack("cap_pop_api_group", m.topic) == \
        frame("pop", 49)["header"]["extFields"]["topic"]
    order = frame("pop", 102)
    msgs = attach_handles(decode_messages(body_bytes(order)), order["header"]["extFields"], "broker-a")
    assert [x.reconsume_times for x in msgs] == [1, 1]
    assert msgs[0].receipt_handle == frame("pop", 103)["header"]["extFields"]["extraInfo"]


def test_receive_ack_and_nothing_is_lost_or_duplicated(v5_cluster, v5_producer):
    for i in range(20):
        v5_producer.send(Message(TOPIC, f"m{i}".encode(), tags="T"))
    c = _consumer(v5_cluster, await_duration=0.5)
    try:
        got = _receive_all(c, 20)
        assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(20))
        for m in got:
            c.ack(m)
        assert c.receive(32, 30) == []
        assert broker_of(v5_cluster).pop.service.in_flight("simple_group") == 0
        with pytest.raises(IllegalArgumentError, match="already acknowledged"):
            c.ack(got[0])
    finally:
        c.shutdown()


def test_pop_request_fields_match_the_java_client(v5_cluster, v5_producer):
    v5_producer.send(Message(TOPIC, b"x"))
    seen: list[RemotingCommand] = []
    broker = broker_of(v5_cluster)
    for code in (RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE):
        orig = broker.server._processors[code]

        def spy(ch, cmd, orig=orig):
            seen.append(cmd)
            return orig(ch, cmd)
        broker.server.register_processor(code, spy)
    c = _consumer(v5_cluster, await_duration=0.5)
    try:
        (m,) = _receive_all(c, 1)
        c.ack(m)
    finally:
        c.shutdown()
    pop, ack = seen[0], seen[-1]
    assert set(pop.ext_fields) == set(frame("pop", 19)["header"]["extFields"])
    assert set(ack.ext_fields) == set(frame("pop", 21)["header"]["extFields"])
    assert pop.ext_fields["queueId"] == "-1" and pop.ext_fields["order"] == "false"
    assert ack.ext_fields["extraInfo"] == m.receipt_handle and ack.ext_fields["offset"] == str(m.queue_offset)


def test_unacked_message_comes_back_after_invisible_duration_not_before(v5_cluster, v5_producer):
    v5_producer.send(Message(TOPIC, b"again"))
    c = _consumer(v5_cluster, await_duration=0.2)
    try:
        (m,) = _receive_all(c, 1, invisible=1.0)
        t0 = time.monotonic()
        (again,) = _receive_all(c, 1, invisible=30.0)
        waited = time.monotonic() - t0
        # ± the broker's revive interval (100 ms here) and one long poll
        assert 0.8 <= waited < 5, waited
        assert again.body == b"again" and again.reconsume_times == 1 and again.topic == TOPIC
        c.ack(again)
        assert broker_of(v5_cluster).pop.service.in_flight("simple_group") == 0
    finally:
        c.shutdown()


def test_change_invisible_duration_then_ack_the_same_object(v5_cluster, v5_producer):
    v5_producer.send(Message(TOPIC, b"later"))
    c = _consumer(v5_cluster, await_duration=0.2)
    try:
        (m,) = _receive_all(c, 1, invisible=60.0)
        old = m.receipt_handle
        c.change_invisible_duration(m, 0.5)
        assert m.receipt_handle != old
        (again,) = _receive_all(c, 1, invisible=60.0)  # back after 0.5 s, not 60 s
        assert again.body == b"later"
        c.ack(again)
        with pytest.raises(IllegalArgumentError):
            c.change_invisible_duration(again, 10)  # already acknowledged
    finally:
        c.shutdown()


def test_bad_input_is_refused_before_sending(v5_cluster):
    c = SimpleConsumer("simple_bad", v5_cluster.namesrv_addr)
    c.start()
    try:
        with pytest.raises(IllegalArgumentError, match="subscription"):
            c.receive(1, 10)
        c.subscribe(TOPIC)
        for n in (0, 33, True):
            with pytest.raises(IllegalArgumentError, match="max_message_num"):
                c.receive(n, 10)
        for d in (0, -1, 13 * 3600, "10"):
            with pytest.raises(IllegalArgumentError, match="invisible_duration"):
                c.receive(1, d)
        with pytest.raises(IllegalArgumentError, match="receipt handle"):
            c.ack(Message(TOPIC, b"not received"))  # type: ignore[arg-type]
    finally:
        c.shutdown()
    with pytest.raises(IllegalArgumentError):
        SimpleConsumer("g", "127.0.0.1:1", await_duration=-1)


def test_async_twins(v5_cluster, v5_producer):
    v5_producer.send(Message(TOPIC, b"aio"))
    c = _consumer(v5_cluster, await_duration=0.5)

    async def main():
        got = []
        deadline = time.monotonic() + 10
        while not got:
            assert time.monotonic() < deadline
            got = await c.receive_async(4, 30)
        await c.change_invisible_duration_async(got[0], 30)
        await c.ack_async(got[0])
        return got

    try:
        got = asyncio.run(main())
        assert [m.body for m in got] == [b"aio"]
        assert broker_of(v5_cluster).pop.service.in_flight("simple_group") == 0
    finally:
        c.shutdown()


def test_more_consumers_than_queues_share_the_topic(v5_cluster, v5_producer):
    for i in range(40):
        v5_producer.send(Message(TOPIC, f"s{i}".encode()))
    consumers = [_consumer(v5_cluster, "simple_share", await_duration=0.2) for _ in range(3)]
    try:
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 40:
            assert time.monotonic() < deadline
            for c in consumers:
                for m in c.receive(5, 30):
                    got.append(m.body)
                    c.ack(m)
        assert sorted(got) == sorted(f"s{i}".encode() for i in range(40))
    finally:
        for c in consumers:
            c.shutdown()


def test_4x_broker_says_no_pop(tmp_path):
    with start_dev_cluster(str(tmp_path / "s4"), in_process=True, broker_config=V4) as c4:
        from rocketmq_sdk import Producer
        with Producer("p4", c4.namesrv_addr) as p:
            p.send(Message(TOPIC, b"x"))
        c = SimpleConsumer("simple4", c4.namesrv_addr, await_duration=0)
        c.subscribe(TOPIC)
        c.start()
        try:
            with pytest.raises(RequestCodeNotSupportedError):
                c.receive(1, 10)
        finally:
            c.shutdown()


def _count_codes(broker, codes):
    """Count the requests of ``codes`` the broker receives (a spy in front of each processor)."""
    seen: dict[int, int] = dict.fromkeys(codes, 0)
    for code in codes:
        orig = broker.server._processors.get(code)
        if orig is None:
            continue

        def spy(ch, cmd, orig=orig):
            seen[cmd.code] += 1
            return orig(ch, cmd)
        broker.server.register_processor(code, spy)
    return seen


def test_ack_of_several_messages_is_one_batch_ack(v5_cluster, v5_producer):
    for i in range(12):
        v5_producer.send(Message(TOPIC, f"b{i}".encode()))
    broker = broker_of(v5_cluster)
    seen = _count_codes(broker, (RequestCode.ACK_MESSAGE, RequestCode.BATCH_ACK_MESSAGE))
    c = _consumer(v5_cluster, "simple_batch_group", await_duration=0.5)
    try:
        got = _receive_all(c, 12)
        c.ack(got)
        assert seen == {RequestCode.ACK_MESSAGE: 0, RequestCode.BATCH_ACK_MESSAGE: 1}  # one broker: one request
        assert broker.pop.service.in_flight("simple_batch_group") == 0
        assert c.receive(32, 1.0) == []
        with pytest.raises(IllegalArgumentError, match="already acknowledged"):
            c.ack(got[3:5])
        with pytest.raises(IllegalArgumentError, match="empty"):
            c.ack([])
    finally:
        c.shutdown()


def test_batch_ack_falls_back_to_single_acks_on_a_broker_without_it(v5_cluster, v5_producer):
    for i in range(5):
        v5_producer.send(Message(TOPIC, f"f{i}".encode()))
    broker = broker_of(v5_cluster)
    del broker.server._processors[RequestCode.BATCH_ACK_MESSAGE]  # a 5.x broker before 5.1.4
    seen = _count_codes(broker, (RequestCode.ACK_MESSAGE,))
    c = _consumer(v5_cluster, "simple_nobatch_group", await_duration=0.5)
    try:
        got = _receive_all(c, 5)
        with pytest.raises(IllegalArgumentError, match="twice"):
            c.ack([got[0], got[0]])
        assert seen[RequestCode.ACK_MESSAGE] == 0  # refused before anything was sent

        async def main():
            await c.ack_async(got)
        asyncio.run(main())
        assert seen[RequestCode.ACK_MESSAGE] == 5
        assert broker.pop.service.in_flight("simple_nobatch_group") == 0
    finally:
        c.shutdown()
