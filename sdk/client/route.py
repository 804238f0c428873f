"""Turning a ``TopicRouteData`` into the queues producers write to and consumers read from
(docs/protocol.md §6.2 and §6.1)."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from ..protocol.bodies import QueueData, TopicRouteData
from ..protocol.codes import MASTER_ID, PermName
from ..protocol.message import MessageQueue

__all__ = ["TopicPublishInfo", "publish_info_from_route", "subscribe_queues_from_route", "tbw102_route_for"]


@dataclass
class TopicPublishInfo:
    """Writable queues of a topic, in Java order (QueueData sorted by broker name, then queue id).

    ``select_one_queue(last_broker)`` mirrors Java's default (non-latency) selection: a
    round-robin index seeded at random; on a retry the next queue whose broker differs from the
    broker that just failed.
    """

    topic: str
    queues: list[MessageQueue]
    route: TopicRouteData | None = None
    order_topic: bool = False
    #: the round robin over ``queues`` (Java ``sendWhichQueue``: a counter starting at a random
    #: value, so producers started together do not all begin with the same queue); read by the
    #: fault strategy (``producer/fault.py``) as well as by :meth:`select_one_queue`
    send_which_queue: itertools.count[int] = field(
        default_factory=lambda: itertools.count(random.randrange(1 << 31)), repr=False)

    @property
    def ok(self) -> bool:
        return bool(self.queues)

    def select_one_queue(self, last_broker: str | None = None) -> MessageQueue:
        """Next queue in round-robin order, avoiding ``last_broker`` when another broker exists.

        Raises:
            IndexError: no writable queue.
        """
        queues = self.queues
        n = len(queues)
        if last_broker is None:
            return queues[(next(self.send_which_queue) & 0x7FFFFFFF) % n]
        for _ in range(n):
            mq = queues[(next(self.send_which_queue) & 0x7FFFFFFF) % n]
            if mq.broker_name != last_broker:
                return mq
        return queues[(next(self.send_which_queue) & 0x7FFFFFFF) % n]


def _writable_with_master(route: TopicRouteData) -> list[QueueData]:
    masters = {b.broker_name for b in route.broker_datas if b.broker_addrs.get(MASTER_ID)}
    return sorted((q for q in route.queue_datas if q.perm & PermName.WRITE and q.broker_name in masters),
                  key=lambda q: q.broker_name)


def publish_info_from_route(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    """Java ``topicRouteData2TopicPublishInfo``: ``orderTopicConf`` (``broker:n;broker:n``) if
    set, else queues ``0..writeQueueNums-1`` of each writable QueueData whose broker has a master."""
    queues: list[MessageQueue] = []
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            name, _, n = item.partition(":")
            if name and n.isdigit():
                queues.extend(MessageQueue(topic, name, i) for i in range(int(n)))
        return TopicPublishInfo(topic, queues, route, order_topic=True)
    for qd in _writable_with_master(route):
        queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return TopicPublishInfo(topic, queues, route)


def subscribe_queues_from_route(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Java ``topicRouteData2TopicSubscribeInfo``: read queues of every readable QueueData, sorted."""
    out = [MessageQueue(topic, qd.broker_name, i)
           for qd in route.queue_datas if qd.perm & PermName.READ for i in range(qd.read_queue_nums)]
    out.sort()
    return out


def tbw102_route_for(default_route: TopicRouteData, default_topic_queue_nums: int) -> TopicRouteData:
    """The route a producer assumes for a topic that does not exist yet: the default topic's
    (``TBW102``) with read/write queue counts ``min(defaultTopicQueueNums, readQueueNums)``."""
    queue_datas = []
    for qd in default_route.queue_datas:
        n = min(default_topic_queue_nums, qd.read_queue_nums)
        queue_datas.append(QueueData(qd.broker_name, n, n, qd.perm, qd.topic_sys_flag))
    return TopicRouteData(queue_datas, list(default_route.broker_datas), default_route.order_topic_conf)
