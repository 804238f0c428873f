"""Create the demo topic on the broker and wait until the name server routes it.

Done with plain remoting requests (UPDATE_AND_CREATE_TOPIC to the broker, GET_ROUTEINFO_BY_TOPIC
to the name server), as ``mqadmin updateTopic`` does, so the consumers find the topic's queues
before the first message is sent.
"""

from __future__ import annotations

import asyncio
import time

from rocketmq_sdk.exceptions import MQBrokerError
from rocketmq_sdk.protocol.bodies import TopicRouteData
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import CreateTopicRequestHeader
from rocketmq_sdk.remoting.client import RemotingClient
from rocketmq_sdk.remoting.command import RemotingCommand
from rocketmq_sdk.remoting.loop import EventLoopThread


async def _create_and_wait(namesrv_addr: str, broker_addr: str, topic: str, queues: int, timeout_s: float) -> int:
    client = RemotingClient()
    try:
        header = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=queues,
                                          write_queue_nums=queues, perm=6, topic_filter_type="SINGLE_TAG",
                                          topic_sys_flag=0, order=False)
        resp = await client.invoke(broker_addr, RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()), 5000)
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, broker_addr)
        deadline = time.monotonic() + timeout_s
        while True:
            resp = await client.invoke(namesrv_addr, RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 3000)
            if resp.code == ResponseCode.SUCCESS and resp.body:
                route = TopicRouteData.from_json(resp.body)
                routed = sum(q.read_queue_nums for q in route.queue_datas)
                if routed >= queues:
                    return routed
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic} not routed by {namesrv_addr} after {timeout_s} s")
            await asyncio.sleep(0.1)  # polling the name server, not synchronising
    finally:
        await client.close()


def create_topic(namesrv_addr: str, broker_addr: str, topic: str, queues: int, timeout_s: float = 30.0) -> int:
    """Create ``topic`` with ``queues`` read and write queues on ``broker_addr`` and wait (at most
    ``timeout_s``) until ``namesrv_addr`` returns a route with them; returns the routed queue count.

    Raises:
        MQBrokerError: the broker refused the topic.
        TimeoutError: the name server did not route the topic in time.
    """
    loop = EventLoopThread("flights-admin")
    try:
        return loop.run(_create_and_wait(namesrv_addr, broker_addr, topic, queues, timeout_s), timeout_s + 10)
    finally:
        loop.stop()
