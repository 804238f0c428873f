"""A consumer group made of our PushConsumer and the official C++ client's push consumer
splits the queues with no overlap and no gap (same Averagely allocation over the same sorted
queues and client ids, docs/protocol.md §6.1)."""

from __future__ import annotations

import pytest
from rocketmq_sdk import Message, PushConsumer

from tests.conftest import Received

from .helpers import FAST, owned, unique, wait_until

cpp_client = pytest.importorskip("tests.interop.cpp_client")


def test_python_and_cpp_consumers_split_the_queues_without_overlap(cluster, producer):
    topic, group = unique("TopicMixed"), unique("cg_mixed")
    producer.send(Message(topic, b"create"))  # the topic exists (4 queues) before both start
    ours = Received()
    py = PushConsumer(group, cluster.namesrv_addr, instance_name="mixed", **FAST)
    py.subscribe(topic)
    py.register_message_listener(ours)
    py.start()
    try:
        with cpp_client.CppConsumer(cluster.namesrv_addr, topic, group=group) as cpp:
            cpp.wait_assigned(2, timeout_s=30)
            wait_until(lambda: len(owned(py, topic)) == 2, timeout_s=30, what="our consumer owning 2 queues")
            ids = {producer.send(Message(topic, f"m{i}")).msg_id for i in range(40)}
            wait_until(lambda: ids <= ({m.msg_id for m in list(ours.messages)} | {m.msg_id for m in cpp.messages}),
                       timeout_s=30, what="all 40 messages consumed by the group")
            cpp_msgs = [m for m in cpp.messages if m.msg_id in ids]
            py_owned = {mq.queue_id for mq in owned(py, topic)}
    finally:
        py.shutdown()
    py_msgs = [m for m in ours.messages if m.msg_id in ids]
    py_queues = {m.queue_id for m in py_msgs}
    cpp_queues = {m.queue_id for m in cpp_msgs}
    assert py_queues == py_owned
    assert not py_queues & cpp_queues and py_queues | cpp_queues == {0, 1, 2, 3}
    assert len(py_msgs) + len(cpp_msgs) == 40  # each message once: no overlap
    assert py_msgs and cpp_msgs
