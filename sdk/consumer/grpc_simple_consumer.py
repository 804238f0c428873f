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
from typing import Any, Unpack

from ..aio import AsyncLifecycle
from ..config import ConsumerConfig
from ..config_types import ConsumerSettings
from ..exceptions import ClientStateError, IllegalArgumentError, RemotingError
from ..grpc import v2
from ..grpc.connection import GrpcConnection, proxy_endpoints
from ..lifecycle import Lifecycle
from ..protocol.codes import GROUP_MAX_LENGTH, TOPIC_MAX_LENGTH, check_name
from ..protocol.message import MessageExt
from .durations import as_seconds as _seconds
from .durations import invisible_ms as _invisible_ms
from .durations import receive_args
from .grpc_consumer_client import GrpcConsumerClient, check_namespace, grpc_client

log = logging.getLogger("rocketmq_sdk.consumer.simple")


class GrpcSimpleConsumer(AsyncLifecycle):
    """The 5.x SimpleConsumer on gRPC; ``SimpleConsumer(group, endpoints="host:port",
    protocol="grpc")`` returns one (same methods as the remoting ``SimpleConsumer``).

    Args:
        group: consumer group.
        endpoints: the proxy, ``host:port`` (``grpc://``/``grpcs://`` accepted).
        await_duration: long polling of a :meth:`receive` finding nothing, seconds (default 5).
        namespace: resource namespace (5.x ``x-mq-namespace``; the brokers see
            ``<namespace>%<group>`` and ``<namespace>%<topic>``), default none.
        tls_root_certificates: PEM bytes verifying the proxy (``use_tls``).
        **config: :class:`~rocketmq_sdk.config.ConsumerConfig` settings; used here:
            ``mq_client_api_timeout``, ``access_key``/``secret_key``, ``use_tls``.

    Raises:
        IllegalArgumentError: bad group, namespace, endpoints or settings.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *, endpoints: str | None = None,
                 protocol: str = "grpc", await_duration: float | datetime.timedelta = 5.0, orderly: bool = False,
                 namespace: str | None = None, tls_root_certificates: bytes | None = None,
                 **config: Unpack[ConsumerSettings]) -> None:
        self.endpoints, grpcs = proxy_endpoints(endpoints, namesrv_addr, "consumer")
        if orderly:
            raise IllegalArgumentError("orderly is not available with protocol='grpc' (FIFO groups are the proxy's)")
        self.group = check_name(group, "consumer group", GROUP_MAX_LENGTH)
        self.namespace = check_namespace(namespace)
        self.config = ConsumerConfig.from_kwargs(**config)
        wait = _seconds(await_duration, "await_duration")
        if wait < 0:
            raise IllegalArgumentError(f"await_duration must be >= 0 s, got {wait}")
        self.await_duration_ms = int(wait * 1000)
        self.subscriptions: dict[str, str] = {}
        self._tls = self.config.use_tls or grpcs
        self._roots = tls_root_certificates
        self._lifecycle = Lifecycle(f"gRPC simple consumer {self.group}")
        self._client: GrpcConsumerClient | None = None
        self._rr = itertools.count()

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
            self._client = grpc_client(self.endpoints, self.group, self.namespace, self.config, self._tls,
                                       self._roots)
            self._client.conn.open_telemetry(self._settings, lambda cmd: None)

    def shutdown(self) -> None:
        """NotifyClientTermination, then close the stream and the channel. Idempotent."""
        with self._lifecycle.lock:
            began = self._lifecycle.begin_shutdown()
        client, self._client = self._client, None
        if began and client is not None:
            try:
                client.notify_termination()
            except RemotingError as exc:
                log.info("gRPC consumer %s: termination notice not delivered: %s", self.group, exc)
            client.close()
        self._lifecycle.shutdown_done()

    def _grpc(self) -> GrpcConsumerClient:
        client = self._client
        if client is None:
            raise ClientStateError(f"consumer {self.group} is not started")
        return client

    def _connection(self) -> GrpcConnection:
        return self._grpc().conn

    def _settings(self) -> Any:
        return self._grpc().settings(v2.SIMPLE_CONSUMER, self.subscriptions, self.await_duration_ms)

    # -- subscriptions --------------------------------------------------------------------------
    def subscribe(self, topic: str, filter_expression: str = "*") -> None:
        """Receive messages of ``topic`` whose tag matches ``filter_expression``."""
        check_name(topic, "topic", TOPIC_MAX_LENGTH)
        self.subscriptions[topic] = filter_expression or "*"
        client = self._client
        if client is not None:
            cmd = v2.TelemetryCommand()
            cmd.settings.CopyFrom(self._settings())
            client.conn.send_telemetry(cmd)

    def unsubscribe(self, topic: str) -> None:
        """Stop receiving ``topic``."""
        self.subscriptions.pop(topic, None)

    # -- receive --------------------------------------------------------------------------------
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
        client = self._grpc()
        topics = sorted(self.subscriptions)
        n = next(self._rr)
        topic = topics[n % len(topics)]
        queues = client.readable_brokers(topic)
        if not queues:
            return []
        return client.receive(queues[n % len(queues)], self.subscriptions[topic], max_message_num, invisible,
                              self.await_duration_ms)

    async def receive_async(self, max_message_num: int = 16,
                            invisible_duration: float | datetime.timedelta = 30.0) -> list[MessageExt]:
        """:meth:`receive` for asyncio code (in a worker thread)."""
        return await asyncio.to_thread(self.receive, max_message_num, invisible_duration)

    # -- ack / change invisibility ----------------------------------------------------------------
    def ack(self, message: MessageExt) -> None:
        """Acknowledge a received message: it will not be delivered again.

        Raises:
            IllegalArgumentError: not a received message. MQBrokerError: refused (e.g. 40013
            INVALID_RECEIPT_HANDLE). ClientStateError, RemotingError.
        """
        GrpcConsumerClient.handle(message)
        self._grpc().ack(message)

    async def ack_async(self, message: MessageExt) -> None:
        """:meth:`ack` for asyncio code."""
        await asyncio.to_thread(self.ack, message)

    def change_invisible_duration(self, message: MessageExt, invisible_duration: float | datetime.timedelta) -> None:
        """Make ``message`` invisible for ``invisible_duration`` from now; its receipt handle is
        replaced by the new one (ack the message object afterwards as usual).

        Raises:
            as :meth:`ack`, and IllegalArgumentError for a duration out of (0, 12 h].
        """
        GrpcConsumerClient.handle(message)
        self._grpc().change_invisible_duration(message, _invisible_ms(invisible_duration))

    async def change_invisible_duration_async(self, message: MessageExt,
                                              invisible_duration: float | datetime.timedelta) -> None:
        """:meth:`change_invisible_duration` for asyncio code."""
        await asyncio.to_thread(self.change_invisible_duration, message, invisible_duration)

    def __repr__(self) -> str:
        return f"GrpcSimpleConsumer(group={self.group!r}, endpoints={self.endpoints!r})"
