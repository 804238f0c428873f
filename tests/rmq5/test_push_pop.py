"""``PushConsumer(..., pop=True)``: the usual listener API, consumption through POP on a 5.x
broker (no queue ownership): every message once, RECONSUME_LATER redelivered with
``reconsume_times`` + 1 through the POP retry topic, more consumers than queues."""

from __future__ import annotations

import threading

import pytest
from rocketmq_sdk import ClientStateError, ConsumeConcurrentlyStatus, Message, PushConsumer
from rocketmq_sdk.consumer.pop_consume import PopSettings

from tests.conftest import wait_until
from tests.rmq5.conftest import broker_of, recording_listener

TOPIC = "PushPopTopic"
FAST = PopSettings(poll_time_ms=1000, invisible_time_ms=5000, init_mode=0, retry_delays_ms=(300,))


def test_push_pop_consumes_every_message_once_across_more_consumers_than_queues(v5_cluster, v5_producer):
    for i in range(30):
        v5_producer.send(Message(TOPIC, f"p{i}".encode()))
    seen, listener = recording_listener()
    consumers = []
    for _ in range(6):  # the topic has 4 queues
        c = PushConsumer("push_pop_group", v5_cluster.namesrv_addr, pop=True, pop_settings=FAST)
        c.subscribe(TOPIC, "*")
        c.register_message_listener(listener)
        c.start()
        consumers.append(c)
    try:
        wait_until(lambda: len(seen) >= 30, 15, "30 messages consumed")
        wait_until(lambda: broker_of(v5_cluster).pop.service.in_flight("push_pop_group") == 0, 15, "acks")
        assert sorted(seen) == sorted(f"p{i}".encode() for i in range(30))
    finally:
        for c in consumers:
            c.shutdown()


def test_reconsume_later_comes_back_with_reconsume_times(v5_cluster, v5_producer):
    v5_producer.send(Message(TOPIC, b"retry-me"))
    calls: list[int] = []

    def listener(msgs, ctx):
        calls.extend(m.reconsume_times for m in msgs)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if len(calls) == 1 else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer("push_pop_retry", v5_cluster.namesrv_addr, pop=True, pop_settings=FAST)
    c.subscribe(TOPIC, "*")
    c.register_message_listener(listener)
    c.start()
    try:
        wait_until(lambda: len(calls) >= 2, 15, "redelivery")
        assert calls[:2] == [0, 1]
        wait_until(lambda: broker_of(v5_cluster).pop.service.in_flight("push_pop_retry") == 0, 15, "ack")
    finally:
        c.shutdown()


def test_pop_mode_refuses_orderly_listeners(v5_cluster):
    c = PushConsumer("push_pop_orderly", v5_cluster.namesrv_addr, pop=True)
    c.subscribe(TOPIC, "*")
    c.register_message_listener(lambda msgs, ctx: None, orderly=True)
    with pytest.raises(ClientStateError, match="concurrent listener"):
        c.start()


def test_consumed_batches_are_acknowledged_with_batch_ack(v5_cluster, v5_producer):
    from rocketmq_sdk.protocol.codes import RequestCode
    from rocketmq_sdk.protocol.pop import decode_batch_ack_body
    for i in range(20):
        v5_producer.send(Message(TOPIC, f"b{i}".encode()))
    broker = broker_of(v5_cluster)
    bodies = []
    orig = broker.server._processors[RequestCode.BATCH_ACK_MESSAGE]
    broker.server.register_processor(RequestCode.BATCH_ACK_MESSAGE,
                                     lambda ch, cmd: bodies.append(cmd.body) or orig(ch, cmd))
    seen = []
    c = PushConsumer("push_pop_batch", v5_cluster.namesrv_addr, pop=True, pop_settings=FAST)
    c.subscribe(TOPIC, "*")
    c.register_message_listener(lambda msgs, ctx: seen.extend(msgs) or ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    c.start()
    try:
        wait_until(lambda: len(seen) >= 20 and broker.pop.service.in_flight("push_pop_batch") == 0, 15, "batch acks")
    finally:
        c.shutdown()
    acked = sorted((a.queue_id, o) for b in bodies for a in decode_batch_ack_body(b) for o in a.offsets)
    assert acked == sorted((m.queue_id, m.queue_offset) for m in seen)


def test_pop_mode_consume_statistics_in_running_info(v5_cluster, v5_producer):
    """The running info's statusTable of a PushConsumer(pop=True), fetched as mqadmin
    consumerStatus does (through the broker): pops and listener calls counted under the topic
    (redeliveries through the POP retry topic too, as Java's POP consume service)."""
    from rocketmq_sdk.admin import AdminClient

    from tests.consumer.test_consume_stats import FIELDS
    lock = threading.Lock()
    calls: list[tuple[bytes, int]] = []

    def listener(msgs, ctx):
        with lock:
            calls.extend((m.body, m.reconsume_times) for m in msgs)
        if any(m.body.startswith(b"fail") and not m.reconsume_times for m in msgs):
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    for i in range(10):
        v5_producer.send(Message(TOPIC, f"fail-{i}" if i < 3 else f"ok-{i}"))
    c = PushConsumer("push_pop_stats", v5_cluster.namesrv_addr, pop=True, consume_message_batch_max_size=1,
                     pop_settings=PopSettings(poll_time_ms=1000, invisible_time_ms=5000, init_mode=0,
                                              retry_delays_ms=(300,), consume_batch_max_size=1))
    c.subscribe(TOPIC, "*")
    c.register_message_listener(listener)
    c.start()
    table: dict = {}

    def settled() -> tuple[int, int]:
        s = table.get(TOPIC, {})
        return round(s.get("consumeOKTPS", 0) * 60), round(s.get("consumeFailedTPS", 0) * 60)

    try:
        wait_until(lambda: len(calls) >= 13, 20, "10 deliveries + 3 redeliveries")
        client_id = c.instance.client_id
        with AdminClient(v5_cluster.namesrv_addr) as admin:
            wait_until(lambda: table.update(admin.consumer_running_info("push_pop_stats", client_id=client_id)
                                            [client_id].status_table) or settled() == (10, 3), 15,
                       "all results recorded")
    finally:
        c.shutdown()
    s = table[TOPIC]
    assert set(s) == FIELDS
    assert s["consumeFailedMsgs"] == 3
    assert s["pullTPS"] * 60 == pytest.approx(13)  # 10 popped + 3 popped again from the retry topic
    assert s["pullRT"] > 0 and s["consumeRT"] >= 0
