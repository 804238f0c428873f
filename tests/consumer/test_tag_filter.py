"""Tag filtering of a push consumer (``subscribe(topic, "TagA || TagB")``): the broker filters by
tag hash, the client by tag name; the listener sees exactly the subscribed tags, each message once.
Runs on the reference broker as 4.9.8 and, in make test's 5.x pass, as 5.3.3."""

from __future__ import annotations

from rocketmq_sdk import Message, PushConsumer

from tests.conftest import Received

from .helpers import FAST, unique, wait_until


def test_push_consumer_receives_only_the_subscribed_tags_once(cluster, producer):
    topic, group = unique("tags"), unique("tags_cg")
    tags = ["TagA", "TagB", "TagC", None, "TagA"]
    for i, tag in enumerate(tags):
        producer.send(Message(topic, f"m{i}".encode(), tags=tag))
    seen = Received()
    consumer = PushConsumer(group, cluster.namesrv_addr, **FAST)
    consumer.subscribe(topic, "TagA || TagB")
    consumer.register_message_listener(seen)
    consumer.start()
    try:
        wait_until(lambda: len(seen.messages) >= 3, 20, "the TagA and TagB messages")
        producer.send(Message(topic, b"late-c", tags="TagC"))
        producer.send(Message(topic, b"late-b", tags="TagB"))
        wait_until(lambda: len(seen.messages) >= 4, 20, "the late TagB message")
    finally:
        consumer.shutdown()
    assert sorted(seen.bodies()) == [b"late-b", b"m0", b"m1", b"m4"]
    assert {m.tags for m in seen.messages} == {"TagA", "TagB"}
