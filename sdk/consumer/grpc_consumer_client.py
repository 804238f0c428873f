"""``GrpcConsumerClient``: what the SDK's gRPC consumers (``SimpleConsumer`` and ``PushConsumer``
with ``protocol="grpc"``) send to a RocketMQ 5.x proxy for one consumer group: QueryRoute,
QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue, NotifyClientTermination, and the Telemetry settings.

Every ``Resource`` (topic, group) carries the consumer's namespace in ``resource_namespace`` and
every request the ``x-mq-namespace`` header, as the official 5.x clients send them; the proxy
stores ``<namespace>%<name>`` on the brokers (Java ``NamespaceUtil``), and messages come back
with the names the application used.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ..config import ConsumerConfig
from ..exceptions import IllegalArgumentError
from ..grpc import v2
from ..grpc.connection import GrpcConnection, check, user_agent
from ..grpc.convert import POP_CK, message_ext
from ..protocol.codes import GROUP_MAX_LENGTH, check_name
from ..protocol.message import MessageExt
from ..protocol.msgid import create_uniq_id

__all__ = ["ROUTE_TTL_S", "GrpcConsumerClient", "check_namespace", "grpc_client"]

#: how long a topic's route (its readable queues) is used before it is asked again, s
ROUTE_TTL_S = 30.0


def set_duration_ms(duration: Any, ms: int) -> None:
    """Set a ``google.protobuf.Duration`` to ``ms`` milliseconds."""
    duration.seconds, rest = divmod(int(ms), 1000)
    duration.nanos = rest * 1_000_000


class GrpcConsumerClient:
    """The requests of one consumer group to one proxy (thread-safe: a gRPC channel).

    Args:
        endpoints: ``host:port`` of the proxy.
        group: the consumer group (as the application names it).
        namespace: resource namespace ("" or None: none).
        timeout_s: deadline of each unary request, s.
        connect: ``(namespace) -> GrpcConnection`` opening the channel (metadata, TLS, ACL).
    """

    def __init__(self, endpoints: str, group: str, namespace: str | None, timeout_s: float,
                 connect: Callable[[str | None], GrpcConnection]) -> None:
        self.endpoints = endpoints
        self.group = group
        self.namespace = namespace or ""
        self.timeout_s = timeout_s
        self.conn = connect(namespace or None)
        self._routes: dict[str, tuple[float, list[Any]]] = {}
        self._lock = threading.Lock()

    # -- resources and settings ------------------------------------------------------------------
    def resource(self, name: str) -> Any:
        """A ``v2.Resource`` of ``name`` in the consumer's namespace."""
        return v2.Resource(name=name, resource_namespace=self.namespace)

    def endpoints_into(self, endpoints: Any) -> None:
        """Fill a ``v2.Endpoints`` with the proxy's address."""
        host, _, port = self.endpoints.rpartition(":")
        endpoints.addresses.add(host=host, port=int(port))

    def settings(self, client_type: Any, subscriptions: dict[str, str], long_polling_ms: int) -> Any:
        """The ``v2.Settings`` this consumer announces on the Telemetry stream (TAG expressions)."""
        s = v2.Settings(client_type=client_type)
        self.endpoints_into(s.access_point)
        s.request_timeout.seconds = max(1, int(self.timeout_s))
        s.subscription.group.CopyFrom(self.resource(self.group))
        for topic, expression in sorted(subscriptions.items()):
            e = s.subscription.subscriptions.add()
            e.topic.CopyFrom(self.resource(topic))
            e.expression.type = v2.TAG
            e.expression.expression = expression
        s.subscription.long_polling_timeout.seconds = long_polling_ms // 1000
        user_agent(s.user_agent)
        return s

    # -- routes and assignments -------------------------------------------------------------------
    def readable_brokers(self, topic: str) -> list[Any]:
        """One readable ``v2.MessageQueue`` per broker of ``topic`` (cached ``ROUTE_TTL_S``): a
        ReceiveMessage on it pops from all the broker's queues.

        Raises:
            MQBrokerError: refused (TopicNotExistError for TOPIC_NOT_FOUND). RemotingError.
        """
        with self._lock:
            cached = self._routes.get(topic)
        if cached is not None and time.monotonic() - cached[0] < ROUTE_TTL_S:
            return cached[1]
        req = v2.QueryRouteRequest(topic=self.resource(topic))
        self.endpoints_into(req.endpoints)
        resp = self.conn.call("QueryRoute", req, self.timeout_s)
        check(resp.status, self.endpoints)
        by_broker = {q.broker.name: q for q in resp.message_queues if q.permission in (v2.READ, v2.READ_WRITE)}
        out = list(by_broker.values())
        with self._lock:
            self._routes[topic] = (time.monotonic(), out)
        return out

    def query_assignment(self, topic: str) -> list[Any]:
        """The ``v2.MessageQueue`` s the proxy assigns this client for ``topic`` (QueryAssignment,
        as the 5.x push consumers ask every few seconds).

        Raises:
            MQBrokerError, RemotingError.
        """
        req = v2.QueryAssignmentRequest(topic=self.resource(topic), group=self.resource(self.group))
        self.endpoints_into(req.endpoints)
        resp = self.conn.call("QueryAssignment", req, self.timeout_s)
        check(resp.status, self.endpoints)
        return [a.message_queue for a in resp.assignments]

    # -- receive ------------------------------------------------------------------------------------
    def receive_request(self, queue: Any, expression: str, batch: int, invisible_ms: int | None, polling_ms: int,
                        attempt_id: str | None = None) -> Any:
        """A ``v2.ReceiveMessageRequest`` for ``queue`` (its topic keeps its namespace);
        ``invisible_ms`` None asks for ``auto_renew`` (the proxy's invisible duration, renewed
        while the message is held, as the 5.x push consumers receive)."""
        req = v2.ReceiveMessageRequest(group=self.resource(self.group), batch_size=batch)
        req.message_queue.CopyFrom(queue)
        req.filter_expression.type = v2.TAG
        req.filter_expression.expression = expression
        if invisible_ms is None:
            req.auto_renew = True
        else:
            set_duration_ms(req.invisible_duration, invisible_ms)
        set_duration_ms(req.long_polling_timeout, polling_ms)
        if attempt_id:
            req.attempt_id = attempt_id
        return req

    def receive_call(self, req: Any) -> Any:
        """Start a ReceiveMessage: the grpc call (iterate :meth:`messages_of`; ``cancel()`` ends it)."""
        polling_s = req.long_polling_timeout.seconds + req.long_polling_timeout.nanos / 1e9
        return self.conn.start_stream("ReceiveMessage", req, self.timeout_s + polling_s)

    def messages_of(self, call: Any, timeout_s: float) -> list[MessageExt]:
        """The messages a :meth:`receive_call` answered (``[]`` for MESSAGE_NOT_FOUND).

        Raises:
            MQBrokerError: a refusal (5.x code). RemotingError: the proxy failed or went away.
        """
        out: list[MessageExt] = []
        for r in self.conn.iterate(call, "ReceiveMessage", timeout_s):
            kind = r.WhichOneof("content")
            if kind == "status" and r.status.code not in (v2.OK, v2.MESSAGE_NOT_FOUND):
                check(r.status, self.endpoints)
            elif kind == "message":
                out.append(message_ext(r.message))
        return out

    def receive(self, queue: Any, expression: str, batch: int, invisible_ms: int, polling_ms: int,
                attempt_id: str | None = None) -> list[MessageExt]:
        """One ReceiveMessage on ``queue`` (blocking up to the long polling). Raises as
        :meth:`messages_of`."""
        req = self.receive_request(queue, expression, batch, invisible_ms, polling_ms, attempt_id)
        return self.messages_of(self.receive_call(req), self.timeout_s + polling_ms / 1000.0)

    # -- settle ---------------------------------------------------------------------------------------
    @staticmethod
    def handle(message: MessageExt) -> str:
        """The receipt handle of a received message.

        Raises:
            IllegalArgumentError: the message was not received by a gRPC consumer.
        """
        handle = message.receipt_handle
        if not handle:
            raise IllegalArgumentError("the message has no receipt handle: only messages returned by receive() "
                                       "can be acknowledged")
        return handle

    def ack(self, message: MessageExt) -> None:
        """AckMessage. Raises MQBrokerError (e.g. INVALID_RECEIPT_HANDLE), RemotingError."""
        req = v2.AckMessageRequest(group=self.resource(self.group), topic=self.resource(message.topic))
        req.entries.add(message_id=message.msg_id, receipt_handle=self.handle(message))
        resp = self.conn.call("AckMessage", req, self.timeout_s)
        check(resp.status, self.endpoints)

    def change_invisible_duration(self, message: MessageExt, invisible_ms: int) -> None:
        """ChangeInvisibleDuration; the message's receipt handle becomes the new one.
        Raises as :meth:`ack`."""
        req = v2.ChangeInvisibleDurationRequest(group=self.resource(self.group), topic=self.resource(message.topic),
                                                receipt_handle=self.handle(message), message_id=message.msg_id)
        set_duration_ms(req.invisible_duration, invisible_ms)
        resp = self.conn.call("ChangeInvisibleDuration", req, self.timeout_s)
        check(resp.status, self.endpoints)
        message.properties[POP_CK] = resp.receipt_handle

    def forward_to_dead_letter_queue(self, message: MessageExt, max_delivery_attempts: int) -> None:
        """ForwardMessageToDeadLetterQueue: the proxy stores the message in ``%DLQ%<group>`` and
        acknowledges it. Raises as :meth:`ack`."""
        req = v2.ForwardMessageToDeadLetterQueueRequest(
            group=self.resource(self.group), topic=self.resource(message.topic), receipt_handle=self.handle(message),
            message_id=message.msg_id, delivery_attempt=message.reconsume_times + 1,
            max_delivery_attempts=max_delivery_attempts)
        resp = self.conn.call("ForwardMessageToDeadLetterQueue", req, self.timeout_s)
        check(resp.status, self.endpoints)

    def notify_termination(self) -> None:
        """NotifyClientTermination (the proxy forgets this client). Raises RemotingError."""
        req = v2.NotifyClientTerminationRequest()
        req.group.CopyFrom(self.resource(self.group))
        self.conn.call("NotifyClientTermination", req, self.timeout_s)

    def close(self) -> None:
        """Close the channel (in-flight calls end with RemotingError)."""
        self.conn.close()


def check_namespace(namespace: str | None) -> str | None:
    """``namespace`` checked as a resource name (``^[%|a-zA-Z0-9_-]+$`` without ``%``), or None.

    Raises:
        IllegalArgumentError: an illegal namespace.
    """
    if namespace is None or namespace == "":
        return None
    check_name(namespace, "namespace", GROUP_MAX_LENGTH)
    if "%" in namespace or "|" in namespace:
        raise IllegalArgumentError(f"namespace {namespace!r} must not contain '%' or '|'")
    return namespace


def grpc_client(endpoints: str, group: str, namespace: str | None, config: ConsumerConfig, tls: bool,
                roots: bytes | None) -> GrpcConsumerClient:
    """A :class:`GrpcConsumerClient` on a new channel with the consumer's ACL and TLS settings."""
    client_id = f"{socket.gethostname()}@{create_uniq_id()[:16]}"

    def connect(ns: str | None) -> GrpcConnection:
        return GrpcConnection(endpoints, client_id, namespace=ns, access_key=config.access_key,
                              secret_key=config.secret_key, security_token=config.security_token, tls=tls,
                              root_certificates=roots)

    return GrpcConsumerClient(endpoints, group, namespace, config.mq_client_api_timeout / 1000.0, connect)
