"""``SimpleConsumer(..., protocol="grpc")``: the 5.x ``SimpleConsumer`` over RocketMQ 5's gRPC
API, to a 5.x proxy (``endpoints="host:8081"``): ReceiveMessage (long polling on the proxy),
AckMessage, ChangeInvisibleDuration. Messages are the same ``MessageExt`` objects as over
remoting, with the proxy's receipt handle in ``receipt_handle``.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import logging
import socket
import threading
import time
from typing import Any, Unpack

from ..aio import AsyncLifecycle
from ..config import ConsumerConfig
from ..config_types import ConsumerSettings
from ..exceptions import ClientStateError, IllegalArgumentError, RemotingError
from ..grpc import v2
from ..grpc.connection import GrpcConnection, check, proxy_endpoints, user_agent
from ..grpc.convert import POP_CK, message_ext
from ..lifecycle import Lifecycle
from ..protocol.codes import GROUP_MAX_LENGTH, TOPIC_MAX_LENGTH, check_name
from ..protocol.message import MessageExt
from ..protocol.msgid import create_uniq_id
from .durations import as_seconds as _seconds
from .durations import invisible_ms as _invisible_ms
from .durations import receive_args

log = logging.getLogger("rocketmq_sdk.consumer.simple")

#: how long a topic's route (its readable queues) is used before it is asked again, s
ROUTE_TTL_S = 30.0


class GrpcSimpleConsumer(AsyncLifecycle):
    """The 5.x SimpleConsumer on gRPC; ``SimpleConsumer(group, endpoints="host:port",
    protocol="grpc")`` returns one (same methods as the remoting ``SimpleConsumer``).

    Args:
        group: consumer group.
        endpoints: the proxy, ``host:port`` (``grpc://``/``grpcs://`` accepted).
        await_duration: long polling of a :meth:`receive` finding nothing, seconds (default 5).
        tls_root_certificates: PEM bytes verifying the proxy (``use_tls``).
        **config: :class:`~rocketmq_sdk.config.ConsumerConfig` settings; used here:
            ``mq_client_api_timeout``, ``access_key``/``secret_key``, ``use_tls`` (no namespace:
            ConsumerConfig has none).

    Raises:
        IllegalArgumentError: bad group, endpoints or settings.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *, endpoints: str | None = None,
                 protocol: str = "grpc", await_duration: float | datetime.timedelta = 5.0, orderly: bool = False,
                 tls_root_certificates: bytes | None = None, **config: Unpack[ConsumerSettings]) -> None:
        self.endpoints, grpcs = proxy_endpoints(endpoints, namesrv_addr, "consumer")
        if orderly:
            raise IllegalArgumentError("orderly is not available with protocol='grpc' (FIFO groups are the proxy's)")
        self.group = check_name(group, "consumer group", GROUP_MAX_LENGTH)
        self.config = ConsumerConfig.from_kwargs(**config)
        wait = _seconds(await_duration, "await_duration")
        if wait < 0:
            raise IllegalArgumentError(f"await_duration must be >= 0 s, got {wait}")
        self.await_duration_ms = int(wait * 1000)
        self.subscriptions: dict[str, str] = {}
        self._tls = self.config.use_tls or grpcs
        self._roots = tls_root_certificates
        self._lifecycle = Lifecycle(f"gRPC simple consumer {self.group}")
        self._conn: GrpcConnection | None = None
        self._client_id = f"{socket.gethostname()}@{create_uniq_id()[:16]}"
        self._routes: dict[str, tuple[float, list[Any]]] = {}
        self._rr = itertools.count()
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._lifecycle.running

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Open the channel and the Telemetry stream (settings sync).

        Raises:
            ClientStateError: already started or shut down.
        """
        with self._lifecycle.starting():
            cfg = self.config
            self._conn = GrpcConnection(self.endpoints, self._client_id, namespace=None,
                                        access_key=cfg.access_key, secret_key=cfg.secret_key,
                                        security_token=cfg.security_token, tls=self._tls,
                                        root_certificates=self._roots)
            self._conn.open_telemetry(self._settings, lambda cmd: None)

    def shutdown(self) -> None:
        """NotifyClientTermination, then close the stream and the channel. Idempotent."""
        with self._lifecycle.lock:
            began = self._lifecycle.begin_shutdown()
        conn, self._conn = self._conn, None
        if began and conn is not None:
            req = v2.NotifyClientTerminationRequest()
            req.group.CopyFrom(self._group())
            try:
                conn.call("NotifyClientTermination", req, self._timeout_s())
            except RemotingError as exc:
                log.info("gRPC consumer %s: termination notice not delivered: %s", self.group, exc)
            conn.close()
        self._lifecycle.shutdown_done()

    def _connection(self) -> GrpcConnection:
        conn = self._conn
        if conn is None:
            raise ClientStateError(f"consumer {self.group} is not started")
        return conn

    def _timeout_s(self) -> float:
        return self.config.mq_client_api_timeout / 1000.0

    def _group(self) -> Any:
        return v2.Resource(name=self.group, resource_namespace="")

    def _topic(self, topic: str) -> Any:
        return v2.Resource(name=topic, resource_namespace="")

    def _settings(self) -> Any:
        s = v2.Settings(client_type=v2.SIMPLE_CONSUMER)
        host, _, port = self.endpoints.rpartition(":")
        s.access_point.addresses.add(host=host, port=int(port))
        s.request_timeout.seconds = max(1, int(self._timeout_s()))
        s.subscription.group.CopyFrom(self._group())
        for topic, expression in sorted(self.subscriptions.items()):
            e = s.subscription.subscriptions.add()
            e.topic.CopyFrom(self._topic(topic))
            e.expression.type = v2.TAG
            e.expression.expression = expression
        s.subscription.long_polling_timeout.seconds = self.await_duration_ms // 1000
        user_agent(s.user_agent)
        return s

    # -- subscriptions --------------------------------------------------------------------------
    def subscribe(self, topic: str, filter_expression: str = "*") -> None:
        """Receive messages of ``topic`` whose tag matches ``filter_expression``."""
        check_name(topic, "topic", TOPIC_MAX_LENGTH)
        self.subscriptions[topic] = filter_expression or "*"
        if self._conn is not None:
            cmd = v2.TelemetryCommand()
            cmd.settings.CopyFrom(self._settings())
            self._conn.send_telemetry(cmd)

    def unsubscribe(self, topic: str) -> None:
        """Stop receiving ``topic``."""
        self.subscriptions.pop(topic, None)

    # -- receive --------------------------------------------------------------------------------
    def _queues(self, conn: GrpcConnection, topic: str) -> list[Any]:
        cached = self._routes.get(topic)
        if cached is not None and time.monotonic() - cached[0] < ROUTE_TTL_S:
            return cached[1]
        req = v2.QueryRouteRequest(topic=self._topic(topic))
        host, _, port = self.endpoints.rpartition(":")
        req.endpoints.addresses.add(host=host, port=int(port))
        resp = conn.call("QueryRoute", req, self._timeout_s())
        check(resp.status, self.endpoints)
        queues = [q for q in resp.message_queues if q.permission in (v2.READ, v2.READ_WRITE)]
        # one POP per broker (queue -1 on the proxy): the brokers in turn
        by_broker = {q.broker.name: q for q in queues}
        out = list(by_broker.values())
        self._routes[topic] = (time.monotonic(), out)
        return out

    def receive(self, max_message_num: int = 16, invisible_duration: float | datetime.timedelta = 30.0
                ) -> list[MessageExt]:
        """Up to ``max_message_num`` (1..32) messages of one subscribed topic, invisible to the
        group for ``invisible_duration`` (seconds, ≤ 12 h); ``[]`` after ``await_duration``
        without any.

        Raises:
            IllegalArgumentError: a value out of range, or no subscription. ClientStateError:
            not started. MQBrokerError: a refusal (5.x code, e.g. 40403 CONSUMER_GROUP_NOT_FOUND).
            RemotingError: the proxy unreachable or silent.
        """
        max_message_num, invisible = receive_args(self.group, bool(self.subscriptions), max_message_num,
                                                  invisible_duration)
        conn = self._connection()
        topics = sorted(self.subscriptions)
        n = next(self._rr)
        topic = topics[n % len(topics)]
        queues = self._queues(conn, topic)
        if not queues:
            return []
        req = v2.ReceiveMessageRequest(group=self._group(), batch_size=max_message_num)
        req.message_queue.CopyFrom(queues[n % len(queues)])
        req.filter_expression.type = v2.TAG
        req.filter_expression.expression = self.subscriptions[topic]
        req.invisible_duration.seconds, rest = divmod(invisible, 1000)
        req.invisible_duration.nanos = rest * 1_000_000
        req.long_polling_timeout.seconds, rest = divmod(self.await_duration_ms, 1000)
        req.long_polling_timeout.nanos = rest * 1_000_000
        responses = conn.stream("ReceiveMessage", req, self._timeout_s() + self.await_duration_ms / 1000.0)
        out: list[MessageExt] = []
        for r in responses:
            kind = r.WhichOneof("content")
            if kind == "status" and r.status.code not in (v2.OK, v2.MESSAGE_NOT_FOUND):
                check(r.status, self.endpoints)
            elif kind == "message":
                out.append(message_ext(r.message))
        return out

    async def receive_async(self, max_message_num: int = 16,
                            invisible_duration: float | datetime.timedelta = 30.0) -> list[MessageExt]:
        """:meth:`receive` for asyncio code (in a worker thread)."""
        return await asyncio.to_thread(self.receive, max_message_num, invisible_duration)

    # -- ack / change invisibility ----------------------------------------------------------------
    @staticmethod
    def _handle(message: MessageExt) -> str:
        handle = message.receipt_handle
        if not handle:
            raise IllegalArgumentError("the message has no receipt handle: only messages returned by receive() "
                                       "can be acknowledged")
        return handle

    def ack(self, message: MessageExt) -> None:
        """Acknowledge a received message: it will not be delivered again.

        Raises:
            IllegalArgumentError: not a received message. MQBrokerError: refused (e.g. 40013
            INVALID_RECEIPT_HANDLE). ClientStateError, RemotingError.
        """
        handle = self._handle(message)
        req = v2.AckMessageRequest(group=self._group(), topic=self._topic(message.topic))
        req.entries.add(message_id=message.msg_id, receipt_handle=handle)
        resp = self._connection().call("AckMessage", req, self._timeout_s())
        check(resp.status, self.endpoints)

    async def ack_async(self, message: MessageExt) -> None:
        """:meth:`ack` for asyncio code."""
        await asyncio.to_thread(self.ack, message)

    def change_invisible_duration(self, message: MessageExt, invisible_duration: float | datetime.timedelta) -> None:
        """Make ``message`` invisible for ``invisible_duration`` from now; its receipt handle is
        replaced by the new one (ack the message object afterwards as usual).

        Raises:
            as :meth:`ack`, and IllegalArgumentError for a duration out of (0, 12 h].
        """
        handle = self._handle(message)
        ms = _invisible_ms(invisible_duration)
        req = v2.ChangeInvisibleDurationRequest(group=self._group(), topic=self._topic(message.topic),
                                                receipt_handle=handle, message_id=message.msg_id)
        req.invisible_duration.seconds, rest = divmod(ms, 1000)
        req.invisible_duration.nanos = rest * 1_000_000
        resp = self._connection().call("ChangeInvisibleDuration", req, self._timeout_s())
        check(resp.status, self.endpoints)
        message.properties[POP_CK] = resp.receipt_handle

    async def change_invisible_duration_async(self, message: MessageExt,
                                              invisible_duration: float | datetime.timedelta) -> None:
        """:meth:`change_invisible_duration` for asyncio code."""
        await asyncio.to_thread(self.change_invisible_duration, message, invisible_duration)

    def __repr__(self) -> str:
        return f"GrpcSimpleConsumer(group={self.group!r}, endpoints={self.endpoints!r})"
