"""Timer messages (5.x ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``): the SDK's
``Message.deliver_time_ms`` / ``delay_ms`` and the reference broker's wheel (never early, at most
one precision step late, persisted across restarts)."""

from __future__ import annotations

import time

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import (
    ClientStateError,
    IllegalArgumentError,
    Message,
    MessageIllegalError,
    Producer,
    SimpleConsumer,
)
from rocketmq_sdk.protocol.codes import MessageConst as MC

from tests.conftest import wait_until
from tests.rmq5.conftest import broker_of
from tests.rmq5.frames import frame

TOPIC = "TimerTopic"
V5 = {"broker_version": "5.3.3", "revive_interval": 100}


def _now_ms() -> int:
    return int(time.time() * 1000)


def test_message_timer_properties_and_validation():
    m = Message(TOPIC, b"x", delay_ms=3000)
    assert m.properties[MC.TIMER_DELAY_SEC] == "3" and m.delay_ms == 3000
    m.delay_ms = 4500
    assert m.properties[MC.TIMER_DELAY_MS] == "4500" and MC.TIMER_DELAY_SEC not in m.properties
    at = _now_ms() + 60_000
    m.deliver_time_ms = at
    assert m.deliver_time_ms == at and m.delay_ms is None and MC.TIMER_DELAY_MS not in m.properties
    m.deliver_time_ms = None
    assert MC.TIMER_DELIVER_MS not in m.properties
    with pytest.raises(IllegalArgumentError, match="3 days|max delay"):
        Message(TOPIC, b"x", delay_ms=MC.TIMER_MAX_DELAY_MS + 1)
    with pytest.raises(IllegalArgumentError, match="max delay"):
        Message(TOPIC, b"x", deliver_time_ms=_now_ms() + MC.TIMER_MAX_DELAY_MS + 60_000)
    with pytest.raises(IllegalArgumentError):
        Message(TOPIC, b"x", delay_ms=-1)
    with pytest.raises(TypeError):
        Message(TOPIC, b"x", delay_ms=1.5)  # type: ignore[arg-type]
    with pytest.raises(IllegalArgumentError, match="delay level"):
        Message(TOPIC, b"x", delay_time_level=2, delay_ms=1000)
    with pytest.raises(IllegalArgumentError, match="delay level"):
        Message(TOPIC, b"x", delay_ms=1000).delay_time_level = 2
    with pytest.raises(IllegalArgumentError, match="reserved"):
        Message(TOPIC, b"x").put_user_property(MC.TIMER_DELIVER_MS, "1")


def _consume(cluster, n, group, deadline_s=15.0):
    c = SimpleConsumer(group, cluster.namesrv_addr, await_duration=0.3, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(TOPIC)
    c.start()
    got = []
    try:
        deadline = time.monotonic() + deadline_s
        while len(got) < n:
            assert time.monotonic() < deadline, f"got {len(got)} of {n}"
            for m in c.receive(32, 60):
                got.append((m, _now_ms()))
                c.ack(m)
    finally:
        c.shutdown()
    return got


def test_timer_messages_are_delivered_never_early_at_most_one_step_late(v5_cluster, v5_producer):
    v5_producer.send(Message(TOPIC, b"warm-up"))  # creates the topic
    sent = _now_ms()
    asked = {}
    r = v5_producer.send(Message(TOPIC, b"delay", delay_ms=1500))
    asked[b"delay"] = sent + 1500
    at = _now_ms() + 2200
    v5_producer.send(Message(TOPIC, b"deliver", deliver_time_ms=at))
    asked[b"deliver"] = at
    v5_producer.send(Message(TOPIC, b"past", deliver_time_ms=_now_ms() - 10_000))
    got = {m.body: (m, t) for m, t in _consume(v5_cluster, 4, "timer_group")}
    assert r.message_queue.queue_id >= 0
    for body, wanted in asked.items():
        m, received = got[body]
        assert m.store_timestamp >= wanted - 5, (body, m.store_timestamp - wanted)  # never early
        assert m.store_timestamp <= wanted + 1000 + 1500, (body, m.store_timestamp - wanted)  # ~ one step late
        assert MC.TIMER_OUT_MS in m.properties and m.properties[MC.REAL_TOPIC] == TOPIC
    assert got[b"past"][0].store_timestamp < sent + 1000  # already due: stored at once
    assert broker_of(v5_cluster).timer.pending == 0


def test_timer_too_far_is_refused_like_5_3_3(v5_cluster, v5_producer):
    v5_producer.send(Message(TOPIC, b"warm-up"))
    m = Message(TOPIC, b"x")
    m.put_property(MC.TIMER_DELAY_SEC, "259260")  # past the SDK's own check, as the capture
    with pytest.raises(MessageIllegalError) as info:
        v5_producer.send(m)
    assert info.value.remark == frame("timer", 57)["header"]["remark"]


def test_delay_level_wins_over_timer(v5_cluster, v5_producer):
    v5_producer.send(Message(TOPIC, b"warm-up"))
    m = Message(TOPIC, b"level", delay_time_level=1)
    m.put_property(MC.TIMER_DELAY_SEC, "60")
    v5_producer.send(m)
    got = {x.body: x for x, _t in _consume(v5_cluster, 2, "timer_level_group")}
    assert MC.TIMER_DELAY_SEC not in got[b"level"].properties  # delivered after ~1 s by level 1


def test_pending_timers_survive_a_restart_and_are_not_early(tmp_path):
    store = str(tmp_path / "store")
    c = start_dev_cluster(store, in_process=True, broker_config=V5)
    try:
        with Producer("timer_restart_p", c.namesrv_addr) as p:
            p.send(Message(TOPIC, b"warm-up"))
            at = _now_ms() + 2500
            p.send(Message(TOPIC, b"after-restart", deliver_time_ms=at))
        # in the wheel (loaded from the timer queue by the broker's loop), not delivered yet
        wait_until(lambda: broker_of(c).timer.pending == 1, 10, "the timer message in the wheel")
    finally:
        c.stop()
    c = start_dev_cluster(store, in_process=True, broker_config=V5)
    try:
        got = {m.body: m for m, _t in _consume(c, 2, "timer_restart_group")}
        assert got[b"after-restart"].store_timestamp >= at - 5
    finally:
        c.stop()


class _Commit:
    def execute_local_transaction(self, msg, arg):
        from rocketmq_sdk.producer import LocalTransactionState
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg):
        from rocketmq_sdk.producer import LocalTransactionState
        return LocalTransactionState.COMMIT_MESSAGE


def test_transactional_timer_message_is_scheduled_at_commit_never_early(v5_cluster, v5_producer):
    """5.x: a half message is not timed; its commit goes into the timer wheel (never delivered
    before its time, at most one step late)."""
    from rocketmq_sdk.producer import TransactionProducer

    v5_producer.send(Message(TOPIC, b"warm-up"))
    at = _now_ms() + 2500
    p = TransactionProducer("timer_tx_producer", v5_cluster.namesrv_addr, listener=_Commit())
    p.start()
    try:
        r = p.send_message_in_transaction(Message(TOPIC, b"tx-timer", deliver_time_ms=at), None)
        assert r.local_transaction_state.name == "COMMIT_MESSAGE"
    finally:
        p.shutdown()
    got = {m.body: m for m, _t in _consume(v5_cluster, 2, "timer_tx_group")}
    m = got[b"tx-timer"]
    assert m.store_timestamp >= at - 5, m.store_timestamp - at  # never early
    assert m.store_timestamp <= at + 1000 + 1500
    assert m.properties[MC.TIMER_OUT_MS] and m.properties[MC.REAL_TOPIC] == TOPIC


@pytest.mark.parametrize("version,expected", [("5.3.3", True), ("4.9.8", False)])
def test_producer_tells_whether_the_topic_brokers_honour_timers(tmp_path, version, expected):
    """What Django's template and Celery's ETA tasks ask before choosing a timer message: the
    answer comes from the broker's heartbeat version, learnt by a heartbeat on the first call,
    also for a topic still to be auto-created (the default topic's brokers)."""
    with start_dev_cluster(str(tmp_path / "store"), in_process=True,
                           broker_config={"broker_version": version}) as cluster:
        p = Producer("timer_support_producer", namesrv_addr=cluster.namesrv_addr)
        p.start()
        try:
            assert p.supports_timer_messages("NotCreatedYet") is expected
            p.send(Message(TOPIC, b"x"))
            assert p.supports_timer_messages(TOPIC) is expected
            addr = p.instance.find_broker_master("broker-a")
            assert p.instance.broker_heartbeats.is_v5(addr) is expected
        finally:
            p.shutdown()
    with pytest.raises(ClientStateError, match="not running"):
        p.supports_timer_messages(TOPIC)
