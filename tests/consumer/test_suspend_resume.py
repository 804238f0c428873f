"""``PushConsumer.suspend()`` / ``resume()`` (Java ``DefaultMQPushConsumer.suspend``): a
suspended consumer owns its queues but sends no pulls; after ``resume`` everything is consumed."""

from __future__ import annotations

import time

from rocketmq_sdk import Message, PushConsumer

from tests.conftest import Received

from .helpers import FAST, owned, unique, wait_until


def test_suspended_consumer_sends_no_pulls_until_resumed(cluster, producer):
    topic, group = unique("TopicSusp"), unique("cg")
    producer.send(Message(topic, b"create"))  # the topic exists before the consumer starts
    got = Received()
    pulls: list[int] = []
    c = PushConsumer(group, cluster.namesrv_addr, instance_name=unique("susp"), **FAST)
    c.subscribe(topic)
    c.register_message_listener(got)
    c.suspend()  # allowed before start, as in Java
    assert c.suspended
    c.start()
    try:
        api = c.instance.api
        real_pull = api.pull_message

        async def counting_pull(addr, header, timeout_ms):
            pulls.append(header.queue_id)
            return await real_pull(addr, header, timeout_ms)

        api.pull_message = counting_pull
        wait_until(lambda: len(owned(c, topic)) == 4, what="the queues to be owned")
        bodies = [f"m{i}".encode() for i in range(6)]
        for b in bodies:
            producer.send(Message(topic, b))
        # a bounded observation window: owning queues while suspended must not lead to pulls
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert not pulls and not got.messages, (pulls, got.bodies())
            time.sleep(0.05)
        c.resume()
        assert not c.suspended
        wait_until(lambda: set(got.bodies()) >= set(bodies), what="every message after resume")
        assert pulls, "resume sent pulls"
    finally:
        c.shutdown()
