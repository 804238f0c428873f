"""Topic routes as the proxy sees them: name-server lookups (cached briefly), the message queues
a 5.x client is given (every queue on the proxy's own endpoints), and where a send goes."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from rocketmq_sdk.client.mq_client_api import MQClientAPI
from rocketmq_sdk.exceptions import RemotingError, TopicNotExistError
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.protocol.codes import DEFAULT_TOPIC, PermName
from rocketmq_sdk.protocol.javahash import java_string_hash
from rocketmq_sdk.protocol.message import MessageQueue

from .status import ProxyError

#: every message type: the 4.x topics of the reference broker carry no ``message.type`` attribute
ACCEPT_ALL = (v2.NORMAL, v2.FIFO, v2.DELAY, v2.TRANSACTION)
#: queues a topic is auto-created with by a send (the header's ``defaultTopicQueueNums``)
AUTO_CREATE_QUEUE_NUMS = 4


@dataclass(frozen=True, slots=True)
class WriteQueue:
    """A queue a send may go to: broker name, its master's address, queue id, and the
    ``MessageQueue`` naming it (of the route's topic)."""

    broker_name: str
    addr: str
    queue_id: int
    mq: MessageQueue


@dataclass(slots=True)
class Route:
    """One topic's route: ``queues`` (readable/writable per id) and the masters' addresses."""

    topic: str
    auto_create: bool  # the topic does not exist yet: sends create it from TBW102 (autoCreateTopicEnable)
    queues: list[tuple[str, int, int]]  # (broker name, queue id, v2.Permission)
    masters: dict[str, str]  # broker name -> master address
    fetched: float
    _writable: list[WriteQueue] | None = field(default=None, repr=False, compare=False)

    def write_queues(self) -> list[WriteQueue]:
        """Writable queues; of a topic not created yet only those it will be created with (as the
        Java client, which takes ``min(defaultTopicQueueNums, TBW102's queues)``). Computed once
        per route (every send asks): ``queues`` and ``masters`` are not changed after it is made."""
        writable = self._writable
        if writable is None:
            limit = AUTO_CREATE_QUEUE_NUMS if self.auto_create else None
            writable = self._writable = [
                WriteQueue(b, self.masters[b], q, MessageQueue(self.topic, b, q)) for b, q, perm in self.queues
                if perm in (v2.WRITE, v2.READ_WRITE) and b in self.masters and (limit is None or q < limit)]
        return writable


def _permission(queue_id: int, read: int, write: int, perm: int) -> int:
    readable = queue_id < read and PermName.is_readable(perm)
    writable = queue_id < write and PermName.is_writeable(perm)
    if readable and writable:
        return v2.READ_WRITE
    return v2.READ if readable else (v2.WRITE if writable else v2.NONE)


class RouteCache:
    """Routes by topic, refreshed from the name servers after ``ttl_s`` seconds.

    Args:
        api: the proxy's remoting request helpers (name servers and brokers).
        ttl_s: how long a route is used before it is asked again, seconds (default 5).
    """

    def __init__(self, api: MQClientAPI, ttl_s: float = 5.0) -> None:
        self.api = api
        self.ttl_s = ttl_s
        self._routes: dict[str, Route] = {}
        self._rr = itertools.count()
        #: every broker master address seen in a route (EndTransaction only goes to these)
        self.known_brokers: set[str] = set()

    async def get(self, topic: str, *, refresh: bool = False) -> Route:
        """The route of ``topic``.

        Raises:
            ProxyError: TOPIC_NOT_FOUND (no route, and no TBW102 to create it from), or
                INTERNAL_SERVER_ERROR (no name server answered).
        """
        route = self._routes.get(topic)
        if route is not None and not refresh and time.monotonic() - route.fetched < self.ttl_s:
            return route
        try:
            data = await self.api.get_topic_route(topic)
            auto_create = False
        except TopicNotExistError:
            try:
                data = await self.api.get_topic_route(DEFAULT_TOPIC)
            except TopicNotExistError:
                raise ProxyError(v2.TOPIC_NOT_FOUND, f"topic {topic} does not exist") from None
            except RemotingError as exc:
                raise ProxyError(v2.INTERNAL_SERVER_ERROR, f"name server unreachable: {exc}") from None
            auto_create = True
        except RemotingError as exc:
            raise ProxyError(v2.INTERNAL_SERVER_ERROR, f"name server unreachable: {exc}") from None
        masters = {b.broker_name: a for b in data.broker_datas if (a := b.master_addr())}
        self.known_brokers.update(masters.values())
        queues = []
        for qd in sorted(data.queue_datas, key=lambda q: q.broker_name):
            for qid in range(max(qd.read_queue_nums, qd.write_queue_nums)):
                queues.append((qd.broker_name, qid, _permission(qid, qd.read_queue_nums, qd.write_queue_nums,
                                                                 qd.perm)))
        route = Route(topic, auto_create, queues, masters, time.monotonic())
        self._routes[topic] = route
        if len(self._routes) > 10_000:
            self._routes.pop(next(iter(self._routes)))
        return route

    def forget(self, topic: str) -> None:
        """Drop the cached route of ``topic`` (after a send to it failed)."""
        self._routes.pop(topic, None)

    def message_queues(self, route: Route, endpoints: Any) -> list[Any]:
        """``v2.MessageQueue``s of ``route`` with ``endpoints`` (the proxy's) as every broker's."""
        out = []
        for broker_name, qid, perm in route.queues:
            mq = v2.MessageQueue(id=qid, permission=perm, accept_message_types=ACCEPT_ALL)
            mq.topic.name = route.topic
            mq.broker.name = broker_name
            mq.broker.id = 0
            mq.broker.endpoints.CopyFrom(endpoints)
            out.append(mq)
        return out

    def select(self, route: Route, message_group: str | None) -> WriteQueue:
        """The queue a send goes to: by Java's hash of the message group for FIFO messages (so a
        group stays on one queue), round robin otherwise.

        Raises:
            ProxyError: FORBIDDEN when the topic has no writable queue.
        """
        queues = route.write_queues()
        if not queues:
            raise ProxyError(v2.FORBIDDEN, f"topic {route.topic} has no writable queue")
        if message_group:
            return queues[abs(java_string_hash(message_group)) % len(queues)]
        return queues[next(self._rr) % len(queues)]
