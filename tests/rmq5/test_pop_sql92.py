"""SQL92 filters in POP consumption (5.x ``PopMessageProcessor`` with ``expType=SQL92``): the
broker evaluates the expression over each message's properties, as for pull; SimpleConsumer
and PushConsumer(pop=True) subscribe with ``MessageSelector.by_sql``."""

from __future__ import annotations

import time

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import (
    Message,
    MessageSelector,
    MQBrokerError,
    Producer,
    PushConsumer,
    SimpleConsumer,
)
from rocketmq_sdk.consumer.pop_consume import PopSettings
from rocketmq_sdk.protocol.codes import ResponseCode

from tests.conftest import wait_until
from tests.rmq5.conftest import broker_of, recording_listener

TOPIC = "PopSqlTopic"
V5_SQL = {"broker_version": "5.3.3", "revive_interval": 100, "pop_from_retry_probability": 0,
          "enable_property_filter": True}


@pytest.fixture
def sql_cluster(tmp_path):
    c = start_dev_cluster(str(tmp_path / "store"), in_process=True, broker_config=V5_SQL)
    yield c
    c.stop()


def _send_numbered(cluster, n=10):
    with Producer("pop_sql_producer", cluster.namesrv_addr) as p:
        for i in range(n):
            m = Message(TOPIC, f"m{i}".encode(), tags="even" if i % 2 == 0 else "odd")
            m.put_user_property("a", str(i))
            p.send(m)


@pytest.mark.parametrize(("orderly", "sql", "want"), [(False, "a > 5 AND TAGS = 'odd'", [b"m7", b"m9"]),
                                                      (True, "a >= 8", [b"m8", b"m9"])])
def test_simple_consumer_receives_only_what_the_sql92_expression_selects(sql_cluster, orderly, sql, want):
    """Plain and orderly POP; the received messages are acknowledged with one batch ack per receive."""
    _send_numbered(sql_cluster)
    group = f"pop_sql_group_{orderly}"
    c = SimpleConsumer(group, sql_cluster.namesrv_addr, await_duration=0.3, orderly=orderly,
                       consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(TOPIC, MessageSelector.by_sql(sql))
    c.start()
    try:
        got = []
        deadline = time.monotonic() + 10
        while len(got) < len(want):
            assert time.monotonic() < deadline, got
            msgs = c.receive(32, 30)
            got += [m.body for m in msgs]
            if msgs:
                c.ack(msgs)
        assert sorted(got) == want
        assert c.receive(32, 30) == []  # nothing else matches (and nothing is left in flight)
        assert broker_of(sql_cluster).pop.service.in_flight(group) == 0
    finally:
        c.shutdown()


def test_push_consumer_pop_mode_with_sql92(sql_cluster):
    _send_numbered(sql_cluster)
    seen, listener = recording_listener()
    c = PushConsumer("push_pop_sql_group", sql_cluster.namesrv_addr, pop=True,
                     pop_settings=PopSettings(poll_time_ms=1000, invisible_time_ms=5000, init_mode=0))
    c.subscribe(TOPIC, MessageSelector.by_sql("a < 3"))
    c.register_message_listener(listener)
    c.start()
    try:
        wait_until(lambda: len(seen) >= 3, 15, "3 messages consumed")
        wait_until(lambda: broker_of(sql_cluster).pop.service.in_flight("push_pop_sql_group") == 0, 15, "acks")
        assert sorted(seen) == [b"m0", b"m1", b"m2"]
    finally:
        c.shutdown()


def test_bad_sql92_is_subscription_parse_failed(sql_cluster):
    _send_numbered(sql_cluster, 1)
    c = SimpleConsumer("pop_sql_bad", sql_cluster.namesrv_addr, await_duration=0.3)
    c.subscribe(TOPIC, MessageSelector.by_sql("a >>> 5"))
    c.start()
    try:
        with pytest.raises(MQBrokerError) as info:
            c.receive(1, 30)
        assert info.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    finally:
        c.shutdown()


def test_sql92_needs_enable_property_filter(v5_cluster, v5_producer):
    v5_producer.send(Message(TOPIC, b"x"))
    c = SimpleConsumer("pop_sql_off", v5_cluster.namesrv_addr, await_duration=0.3)
    c.subscribe(TOPIC, MessageSelector.by_sql("a > 5"))
    c.start()
    try:
        with pytest.raises(MQBrokerError, match="does not support consumer to filter message by SQL92"):
            c.receive(1, 30)
    finally:
        c.shutdown()

