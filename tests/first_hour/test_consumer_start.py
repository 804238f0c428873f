"""Consumers that start before their topic, or only pull (issue 17 items 5 and 11): they find the
route and announce themselves to the brokers within seconds, not at the next 30 s period."""

from __future__ import annotations

import logging

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import Message, Producer, PullConsumer, PushConsumer
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.exceptions import MQError

from tests.conftest import Received, wait_until

# periods far longer than the test's deadlines: only the new early retries can make them pass
SLOW_PERIODS = {"poll_name_server_interval": 120_000, "rebalance_interval": 120_000,
                "heartbeat_broker_interval": 120_000}


@pytest.fixture
def cluster(tmp_path):
    c = start_dev_cluster(str(tmp_path / "store"), in_process=True)
    yield c
    c.stop()


def test_consumer_started_before_its_topic_gets_the_first_message_soon(cluster, caplog):
    received = Received()
    consumer = PushConsumer("late_topic_cg", cluster.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                            **SLOW_PERIODS)
    consumer.subscribe("late_topic", "*")
    consumer.register_message_listener(received)
    with caplog.at_level(logging.INFO, logger="rocketmq_sdk"):
        consumer.start()
        try:
            with Producer("late_topic_pg", cluster.namesrv_addr) as producer:
                producer.send(Message("late_topic", b"first"))  # auto-creates the topic
            wait_until(lambda: received.bodies() == [b"first"], timeout_s=20, what="the first message consumed")
        finally:
            consumer.shutdown()
    infos = [r.getMessage() for r in caplog.records if "has no route yet" in r.getMessage()]
    assert infos == ["topic late_topic has no route yet; looking again soon"]
    rebalance_warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and "rebalance" in r.getMessage()]
    assert not rebalance_warnings, [r.getMessage() for r in rebalance_warnings]


def test_pull_consumer_is_known_to_the_broker_soon_after_it_learns_it(cluster):
    with Producer("pull_hb_pg", cluster.namesrv_addr) as producer:
        producer.send(Message("pull_hb_topic", b"x"))
    with PullConsumer("pull_hb_cg", cluster.namesrv_addr, **SLOW_PERIODS) as consumer, \
            AdminClient(cluster.namesrv_addr) as admin:
        assert consumer.fetch_subscribe_message_queues("pull_hb_topic")  # the broker is learned here

        def online() -> bool:
            try:
                return bool(admin.consumer_connection("pull_hb_cg").connections)
            except MQError:
                return False

        wait_until(online, timeout_s=10, what="the pull consumer's group online on the broker")


def test_a_missing_route_is_looked_up_again_after_1_2_4_s_up_to_the_route_poll_period(monkeypatch):
    """The retry of a subscribed topic without a route (``_await_route``): an exponential backoff
    from 1 s, capped at ``poll_name_server_interval``, until the topic is no longer wanted."""
    import asyncio

    from rocketmq_sdk.client.instance import MQClientInstance
    from rocketmq_sdk.config import ClientConfig
    from rocketmq_sdk.exceptions import TopicNotExistError

    inst = MQClientInstance(ClientConfig(namesrv_addr="127.0.0.1:1", poll_name_server_interval=5000), "t@backoff")

    class Subscriber:
        group = "g"
        topics = ["late"]

        def subscribed_topics(self):
            return self.topics

    sub = Subscriber()
    inst.register_consumer(sub)
    slept: list[float] = []
    lookups = 0

    async def no_sleep(s: float) -> None:
        slept.append(s)

    async def get_topic_route(topic: str):
        nonlocal lookups
        lookups += 1
        if lookups == 6:
            sub.topics = []  # unsubscribed meanwhile: the next round ends the retries
        raise TopicNotExistError(17, f"no route of {topic}")

    monkeypatch.setattr(inst.api, "get_topic_route", get_topic_route)
    monkeypatch.setattr("rocketmq_sdk.client.instance.asyncio.sleep", no_sleep)
    asyncio.run(inst._await_route("late"))
    assert lookups == 6
    assert slept == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0]
