"""SQL92 subscriptions: the broker (enablePropertyFilter) evaluates the selector over message
properties; only matching messages reach the listener."""

from __future__ import annotations

import pytest
from rocketmq_sdk import Message, Producer, PushConsumer
from rocketmq_sdk.exceptions import IllegalArgumentError

from tests.conftest import Received, env_broker_config

from .helpers import FAST, owned, unique, wait_until

embedded = pytest.importorskip("rocketmq_broker.embedded")


@pytest.fixture(scope="module")
def sql_cluster():
    with embedded.start_dev_cluster(in_process=True, broker_config={"enable_property_filter": True}) as c:
        yield c


def test_sql92_selector_delivers_only_matching_messages(sql_cluster):
    topic, group = unique("TopicSql"), unique("cg")
    got = Received()
    with Producer(unique("pg"), sql_cluster.namesrv_addr) as p:
        p.send(Message(topic, b"create", properties={"a": "0"}))
        c = PushConsumer(group, sql_cluster.namesrv_addr, instance_name="sql", **FAST)
        with pytest.raises(IllegalArgumentError):
            c.subscribe(topic, "a > 1", "XPATH")
        c.subscribe(topic, "a > 5 AND region = 'eu'", "SQL92")
        c.register_message_listener(got)
        c.start()
        try:
            wait_until(lambda: len(owned(c, topic)) == 4, what="queues")
            for i in range(10):
                p.send(Message(topic, f"m{i}", properties={"a": str(i), "region": "eu" if i % 2 else "us"}))
            wait_until(lambda: len(got.messages) >= 2, what="the matching messages")
            wait_until(lambda: all(pq.msg_count == 0 for pq in c.process_queues().values()), what="drained")
        finally:
            c.shutdown()
    assert sorted(got.bodies()) == [b"m7", b"m9"]


def test_dev_command_flag_enables_sql92():
    """Issue 25, defect 6: ``python -m rocketmq_broker dev --enable-property-filter`` (the child
    process start_dev_cluster runs) accepts SQL92 subscriptions."""
    topic, group = unique("TopicSqlDev"), unique("cg")
    got = Received()
    with embedded.start_dev_cluster(broker_config={"enable_property_filter": True, **env_broker_config()}) as c, \
            Producer(unique("pg"), c.namesrv_addr) as p:
        p.send(Message(topic, b"create", properties={"a": "0"}))
        consumer = PushConsumer(group, c.namesrv_addr, instance_name="sqldev", **FAST)
        consumer.subscribe(topic, "a > 5", "SQL92")
        consumer.register_message_listener(got)
        consumer.start()
        try:
            wait_until(lambda: len(owned(consumer, topic)) == 4, what="queues")
            for i in range(8):
                p.send(Message(topic, f"m{i}", properties={"a": str(i)}))
            wait_until(lambda: len(got.messages) >= 2, what="the matching messages")
        finally:
            consumer.shutdown()
    assert sorted(got.bodies()) == [b"m6", b"m7"]
