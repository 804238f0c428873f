"""RecallMessage of the proxy (RocketMQ 5.3): a delay/timer message withdrawn before its
delivery time by the ``recall_handle`` its SendMessage answer carried, as RECALL_MESSAGE (370)
to the master of the broker the handle names (Apache's proxy in cluster mode).

The handle is decoded here first (``rocketmq_sdk.protocol.recall``, the codec the SDK and the
broker share): one that does not decode, or whose broker serves no queue of the request's topic,
is refused with BAD_REQUEST before any broker is asked. The broker's refusals keep their 5.x
meaning: recall disabled (``recallMessageEnable=false``) → FORBIDDEN, a handle of another topic
or a message already due → BAD_REQUEST.
"""

from __future__ import annotations

from typing import Any

from rocketmq_sdk.client.mq_client_api import MQClientAPI
from rocketmq_sdk.exceptions import MQBrokerError, RemotingError
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.protocol.codes import ResponseCode
from rocketmq_sdk.protocol.recall import RecallHandle, RecallMessageRequestHeader

from .checks import topic_name
from .routes import RouteCache
from .status import ProxyError, from_remoting, status

#: the producer group RECALL_MESSAGE requests of the proxy name (the 5.x request has none)
RECALL_GROUP = "GRPC_PROXY_RECALL"
#: broker refusals of a recall that are the request's fault
_BAD_RECALL = frozenset({ResponseCode.ILLEGAL_OPERATION, ResponseCode.INVALID_PARAMETER})


class Recall:
    """The RecallMessage handler (runs on the proxy's loop).

    Args:
        api: remoting requests to the brokers.
        routes: topic routes (the handle's broker must serve the topic).
        timeout_ms: deadline of the broker request, ms.
    """

    def __init__(self, api: MQClientAPI, routes: RouteCache, timeout_ms: float = 3000.0) -> None:
        self.api = api
        self.routes = routes
        self.timeout_ms = timeout_ms

    async def recall(self, req: Any, context: Any) -> Any:
        topic = topic_name(req.topic)
        try:
            handle = RecallHandle.decode(req.recall_handle)
        except ValueError as exc:
            raise ProxyError(v2.BAD_REQUEST, str(exc)) from None
        route = await self.routes.get(topic)
        addr = route.masters.get(handle.broker_name)
        if addr is None:
            raise ProxyError(v2.BAD_REQUEST, f"the recall handle names broker {handle.broker_name[:100]!r}, which "
                                             f"serves no queue of topic {route.topic}")
        header = RecallMessageRequestHeader(producer_group=RECALL_GROUP, topic=topic,
                                            recall_handle=req.recall_handle, bname=handle.broker_name)
        try:
            message_id = await self.api.recall_message(addr, header, self.timeout_ms)
        except MQBrokerError as exc:
            code = v2.BAD_REQUEST if exc.code in _BAD_RECALL else from_remoting(exc.code)
            raise ProxyError(code, exc.remark or str(exc)) from None
        except RemotingError as exc:
            raise ProxyError(v2.PROXY_TIMEOUT, f"broker {addr} did not answer: {exc}") from None
        return v2.RecallMessageResponse(status=status(), message_id=message_id or handle.message_id)
