"""PullMessage, UpdateOffset, GetOffset and QueryOffset of the proxy: the 5.x API's pull side
(one named queue, offsets kept by the client or on the broker), over remoting as Apache's proxy
serves them: PULL_MESSAGE (long polling on the broker, messages filtered by exact tag as the
remoting clients do), UPDATE_CONSUMER_OFFSET, QUERY_CONSUMER_OFFSET, GET_MIN_OFFSET /
GET_MAX_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP.

A queue is named by broker name and queue id; a broker not in the topic's route, a negative
offset or queue id, a batch outside 1..32 or a TIMESTAMP query without a time is refused before
any broker is asked.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from rocketmq_sdk.client.mq_client_api import MQClientAPI
from rocketmq_sdk.consumer.pull_result import process_pull_result, pull_header
from rocketmq_sdk.exceptions import MQBrokerError, RemotingError
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.grpc.convert import set_timestamp_ms, timestamp_ms, to_v2
from rocketmq_sdk.protocol.bodies import SubscriptionData
from rocketmq_sdk.protocol.codes import PullSysFlag, ResponseCode
from rocketmq_sdk.protocol.message import MessageExt, MessageQueue, PullStatus

from .checks import group_name, topic_name
from .consuming import long_polling_ms
from .routes import RouteCache
from .status import ProxyError, from_remoting, status

#: the most messages one PullMessage returns
MAX_PULL_BATCH = 32


def message_of(topic_resource: Any, msg: MessageExt) -> Any:
    """The ``v2.Message`` of a pulled message (queue, offset, born/store time and hosts)."""
    m = to_v2(topic_resource.name, msg.body, msg.properties, namespace=topic_resource.resource_namespace)
    sp = m.system_properties
    sp.ClearField("delivery_timestamp")
    sp.queue_id = msg.queue_id
    sp.queue_offset = msg.queue_offset
    sp.delivery_attempt = msg.reconsume_times + 1
    set_timestamp_ms(sp.born_timestamp, msg.born_timestamp)
    sp.born_host = msg.born_host.rsplit(":", 1)[0]
    set_timestamp_ms(sp.store_timestamp, msg.store_timestamp)
    sp.store_host = msg.store_host
    return m


class Offsets:
    """The pull-side handlers (run on the proxy's loop).

    Args:
        api: remoting requests to the brokers.
        routes: topic routes (queue → broker address).
        timeout_ms: deadline of each broker request, ms.
    """

    def __init__(self, api: MQClientAPI, routes: RouteCache, timeout_ms: float = 3000.0) -> None:
        self.api = api
        self.routes = routes
        self.timeout_ms = timeout_ms

    async def _queue(self, mq: Any) -> tuple[str, MessageQueue]:
        """(master address, broker-side ``MessageQueue``) of a request's ``v2.MessageQueue``."""
        topic = topic_name(mq.topic)
        if mq.id < 0:
            raise ProxyError(v2.BAD_REQUEST, f"queue id {mq.id} is negative: name one queue")
        route = await self.routes.get(topic)
        broker = mq.broker.name
        addr = route.masters.get(broker)
        if addr is None or not any(b == broker and q == mq.id for b, q, _ in route.queues):
            raise ProxyError(v2.BAD_REQUEST, f"topic {route.topic} has no queue {mq.id} on broker {broker[:100]!r}")
        return addr, MessageQueue(topic, broker, mq.id)

    # -- PullMessage ------------------------------------------------------------------------------
    async def pull(self, req: Any, context: Any) -> AsyncIterator[Any]:
        """A status, the messages found, then ``next_offset`` (as Apache's proxy streams them)."""
        group = group_name(req.group)
        addr, mq = await self._queue(req.message_queue)
        batch = req.batch_size or 1
        if not 1 <= batch <= MAX_PULL_BATCH:
            raise ProxyError(v2.BAD_REQUEST, f"batch size {batch} is not within 1..{MAX_PULL_BATCH}")
        if req.offset < 0:
            raise ProxyError(v2.ILLEGAL_OFFSET, f"offset {req.offset} is negative")
        polling = long_polling_ms(req, context)  # as ReceiveMessage's: 0 .. 30 s, default 20 s
        expression = req.filter_expression.expression or "*"
        kind = "SQL92" if req.filter_expression.type == v2.SQL else "TAG"
        try:
            sub = SubscriptionData.build(mq.topic, expression, int(time.time() * 1000), kind)
        except ValueError as exc:
            raise ProxyError(v2.ILLEGAL_FILTER_EXPRESSION, f"bad filter expression: {exc}") from None
        header = pull_header(group, mq, sub, req.offset, batch, suspend_timeout_ms=polling,
                             sys_flag=PullSysFlag.build(False, polling > 0, True))
        try:
            result = await self.api.pull_message(addr, header, polling + self.timeout_ms)
        except MQBrokerError as exc:
            code = v2.BAD_REQUEST if exc.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED else from_remoting(exc.code)
            raise ProxyError(code, str(exc)) from None
        except RemotingError as exc:
            raise ProxyError(v2.PROXY_TIMEOUT, f"broker {addr} did not answer: {exc}") from None
        messages = process_pull_result(result, mq, sub)
        if result.pull_status is PullStatus.OFFSET_ILLEGAL:
            yield v2.PullMessageResponse(status=status(v2.ILLEGAL_OFFSET, f"offset {req.offset} is outside "
                                                       f"{result.min_offset}..{result.max_offset}"))
        elif messages:
            yield v2.PullMessageResponse(status=status())
            for msg in messages:
                yield v2.PullMessageResponse(message=message_of(req.message_queue.topic, msg))
        else:
            yield v2.PullMessageResponse(status=status(v2.MESSAGE_NOT_FOUND, "no new message"))
        yield v2.PullMessageResponse(next_offset=result.next_begin_offset)

    # -- consumer offsets ---------------------------------------------------------------------------
    async def update_offset(self, req: Any, context: Any) -> Any:
        group = group_name(req.group)
        addr, mq = await self._queue(req.message_queue)
        if req.offset < 0:
            raise ProxyError(v2.ILLEGAL_OFFSET, f"offset {req.offset} is negative")
        await self._broker(self.api.update_consumer_offset(addr, group, mq, req.offset, self.timeout_ms), addr)
        return v2.UpdateOffsetResponse(status=status())

    async def get_offset(self, req: Any, context: Any) -> Any:
        group = group_name(req.group)
        addr, mq = await self._queue(req.message_queue)
        offset = await self._broker(self.api.query_consumer_offset(addr, group, mq, self.timeout_ms), addr)
        return v2.GetOffsetResponse(status=status(), offset=offset)

    async def query_offset(self, req: Any, context: Any) -> Any:
        addr, mq = await self._queue(req.message_queue)
        policy = req.query_offset_policy
        if policy == v2.BEGINNING:
            call = self.api.get_min_offset(addr, mq, self.timeout_ms)
        elif policy == v2.END:
            call = self.api.get_max_offset(addr, mq, self.timeout_ms)
        elif policy == v2.TIMESTAMP:
            if not req.HasField("timestamp"):
                raise ProxyError(v2.BAD_REQUEST, "QueryOffset with policy TIMESTAMP needs a timestamp")
            call = self.api.search_offset(addr, mq, timestamp_ms(req.timestamp), self.timeout_ms)
        else:
            raise ProxyError(v2.BAD_REQUEST, f"unknown query offset policy {policy}")
        return v2.QueryOffsetResponse(status=status(), offset=await self._broker(call, addr))

    @staticmethod
    async def _broker(call: Any, addr: str) -> Any:
        """Await a broker request; its refusal as the 5.x code (QUERY_NOT_FOUND: OFFSET_NOT_FOUND)."""
        try:
            return await call
        except MQBrokerError as exc:
            code = v2.OFFSET_NOT_FOUND if exc.code == ResponseCode.QUERY_NOT_FOUND else from_remoting(exc.code)
            raise ProxyError(code, str(exc)) from None
        except RemotingError as exc:
            raise ProxyError(v2.PROXY_TIMEOUT, f"broker {addr} did not answer: {exc}") from None
