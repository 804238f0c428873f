"""Create the demo topic on the broker and wait until the name server routes it.

Done with the SDK's :class:`~rocketmq_sdk.admin.AdminClient` (``create_topic`` sends
UPDATE_AND_CREATE_TOPIC to the broker as ``mqadmin updateTopic`` does, ``topic_route`` asks the
name server), so the consumers find the topic's queues before the first message is sent.
"""

from __future__ import annotations

import time

from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.exceptions import TopicNotExistError


def create_topic(namesrv_addr: str, broker_addr: str, topic: str, queues: int, timeout_s: float = 30.0) -> int:
    """Create ``topic`` with ``queues`` read and write queues on ``broker_addr`` and wait (at most
    ``timeout_s``) until ``namesrv_addr`` returns a route with them; returns the routed queue count.

    Raises:
        MQBrokerError: the broker refused the topic.
        TimeoutError: the name server did not route the topic in time.
    """
    deadline = time.monotonic() + timeout_s
    with AdminClient(namesrv_addr) as admin:
        admin.create_topic(topic, broker_addr=broker_addr, read_queue_nums=queues, write_queue_nums=queues)
        while True:
            try:
                routed = sum(q.read_queue_nums for q in admin.topic_route(topic).queue_datas)
            except TopicNotExistError:
                routed = 0  # the broker has not registered it with the name server yet
            if routed >= queues:
                return routed
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic} not routed by {namesrv_addr} after {timeout_s} s")
            time.sleep(0.1)  # polling the name server, not synchronising
