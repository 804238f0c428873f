"""``PushConsumer(..., protocol="grpc")``: the push consumer over RocketMQ 5's gRPC API, on
SimpleConsumer semantics as the 5.x Java and Python clients build it:

- the Telemetry stream announces the subscription (client type PUSH_CONSUMER) and brings back
  the proxy's settings: the group's retry policy, whether the group is FIFO, the receive batch
  size and the long polling timeout (re-announced whenever the stream is re-opened);
- every ``ASSIGNMENT_SCAN_S`` (5 s, at once at start) QueryAssignment per subscribed topic; each
  assigned queue gets a receive thread long-polling ReceiveMessage (with ``auto_renew``: the
  proxy keeps a held message invisible, or for ``invisible_duration`` when one is given), paused
  while ``pull_threshold_for_queue`` of its messages wait for the listener;
- the listener (same function, statuses and contexts as the remoting ``PushConsumer``) runs on
  the consume threads; results are settled as :mod:`.grpc_consume` says (ack, change invisible
  duration with the 5.x backoff, ForwardMessageToDeadLetterQueue after the last attempt; FIFO
  groups in message-group order).

A proxy that goes away is survived: receives and settles fail with RemotingConnectError and are
tried again every second, the Telemetry stream is re-opened; a message whose settle was lost is
delivered again after its invisible duration (at-least-once).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import functools
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any, Unpack

from ..aio import AsyncLifecycle
from ..config import ConsumerConfig
from ..config_types import ConsumerSettings
from ..exceptions import ClientStateError, IllegalArgumentError, MQError
from ..grpc import v2
from ..grpc.connection import proxy_endpoints
from ..lifecycle import Lifecycle, ServiceState
from ..protocol.codes import GROUP_MAX_LENGTH, TOPIC_MAX_LENGTH, check_name
from ..protocol.message import MessageExt, MessageQueue
from .durations import as_seconds as _seconds
from .durations import invisible_ms as _invisible_ms
from .grpc_consume import ConsumeBackoff, GrpcConsumeService
from .grpc_consumer_client import GrpcConsumerClient, check_namespace, grpc_client
from .listener_adapters import AsyncListenerRunner, ListenerRegistry, TopicDispatcher

__all__ = ["GrpcPushConsumer"]

log = logging.getLogger("rocketmq_sdk.consumer.grpc")

#: how often the assignments are asked again, s (the 5.x clients: 5 s)
ASSIGNMENT_SCAN_S = 5.0
#: wait before a failed ReceiveMessage is tried again, s (the 5.x clients: 1 s)
RECEIVE_RETRY_S = 1.0
#: long polling until the proxy's settings arrive, ms
DEFAULT_LONG_POLLING_MS = 20_000
#: the most messages one ReceiveMessage asks for
MAX_RECEIVE_BATCH = 32
#: what an ``auto_renew`` message is assumed invisible for (the proxies' default), ms: a FIFO
#: in-place retry keeps the message invisible for its wait plus this
AUTO_RENEW_INVISIBLE_MS = 60_000


class _Receiver:
    """One assigned queue's receive thread and its count of messages not settled yet."""

    def __init__(self, mq: Any) -> None:
        self.mq = mq
        self.stop = threading.Event()
        self.call: Any = None
        self.cached = 0
        self.cond = threading.Condition()
        self.thread: threading.Thread | None = None

    def add(self, n: int) -> None:
        with self.cond:
            self.cached += n

    def done(self, n: int) -> None:
        with self.cond:
            self.cached -= n
            self.cond.notify_all()

    def cancel(self) -> None:
        self.stop.set()
        call = self.call
        if call is not None:
            call.cancel()
        with self.cond:
            self.cond.notify_all()


class GrpcPushConsumer(AsyncLifecycle, ListenerRegistry):
    """A push consumer on a 5.x proxy; ``PushConsumer(group, endpoints="host:port",
    protocol="grpc")`` (or ``PushConsumer(group, "grpc://host:port")``) returns one.

    Args:
        group: consumer group (``^[%|a-zA-Z0-9_-]+$``, ≤ 255 characters).
        endpoints: the proxy, ``host:port`` (``grpc://``/``grpcs://`` accepted).
        namespace: resource namespace (5.x ``x-mq-namespace``; the brokers see
            ``<namespace>%<group>`` and ``<namespace>%<topic>``), default none.
        invisible_duration: how long received messages stay invisible to the rest of the group
            while this consumer holds them, seconds or ``timedelta`` (≤ 12 h): a listener call
            running longer may see its messages delivered again elsewhere. Default None: receive
            with ``auto_renew`` as the 5.x push consumers do (the proxy's invisible duration, 60 s
            on Apache's and the reference proxy, renewed by the proxy while the message is held).
        await_duration: long polling of one ReceiveMessage, seconds (default: the proxy's
            settings, 20 s until they arrive).
        tls_root_certificates: PEM bytes verifying the proxy (``use_tls``).
        **config: :class:`~rocketmq_sdk.config.ConsumerConfig` settings; used here:
            ``consume_thread_max`` (20), ``pull_batch_size`` (receive batch, ≤ 32),
            ``consume_message_batch_max_size`` (1), ``pull_threshold_for_queue`` (1000),
            ``max_reconsume_times`` (-1: the proxy's retry policy decides, 16 redeliveries by
            default; else the delivery attempts are ``max_reconsume_times`` + 1),
            ``await_termination_timeout`` (ms), ``mq_client_api_timeout`` (ms),
            ``access_key``/``secret_key``, ``use_tls``, ``event_loop``.

    Raises:
        IllegalArgumentError: bad group, namespace, endpoints or settings.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *, endpoints: str | None = None,
                 protocol: str = "grpc", namespace: str | None = None,
                 invisible_duration: float | datetime.timedelta | None = None,
                 await_duration: float | datetime.timedelta | None = None,
                 tls_root_certificates: bytes | None = None, **config: Unpack[ConsumerSettings]) -> None:
        self.endpoints, grpcs = proxy_endpoints(endpoints, namesrv_addr, "consumer")
        self.group = check_name(group, "consumer group", GROUP_MAX_LENGTH)
        self.namespace = check_namespace(namespace)
        self.config = ConsumerConfig.from_kwargs(**config)
        #: the receives' invisible duration, ms; None: ``auto_renew`` (the proxy's, renewed)
        self.invisible_ms = None if invisible_duration is None else _invisible_ms(invisible_duration)
        self._polling_override = None if await_duration is None else int(
            _seconds(await_duration, "await_duration") * 1000)
        if self._polling_override is not None and self._polling_override < 0:
            raise IllegalArgumentError(f"await_duration must be >= 0 s, got {await_duration}")
        self.subscriptions: dict[str, str] = {}
        self._tls = self.config.use_tls or grpcs
        self._roots = tls_root_certificates
        self._lifecycle = Lifecycle(f"gRPC push consumer {self.group}")
        self._listener: Callable[[list[MessageExt], Any], Any] | None = None
        self._dispatcher: TopicDispatcher | None = None
        self._async_runner = AsyncListenerRunner(f"rocketmq-listener-{group}", event_loop=self.config.event_loop)
        #: the listener is orderly (``register_message_listener(..., orderly=True)``)
        self.orderly = False
        #: the proxy says the group is FIFO (its messages are consumed in message-group order)
        self.fifo = False
        self._batch = MAX_RECEIVE_BATCH
        self._polling_ms = DEFAULT_LONG_POLLING_MS
        self._backoff = ConsumeBackoff()
        self._settings_seen = threading.Event()
        self._stopped = threading.Event()
        self._client: GrpcConsumerClient | None = None
        self._service: GrpcConsumeService | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._futures: set[concurrent.futures.Future] = set()
        self._receivers: dict[tuple[str, str, int], _Receiver] = {}
        self._lock = threading.Lock()
        self._scanner: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._lifecycle.running

    @property
    def state(self) -> ServiceState:
        """CREATE_JUST, RUNNING, SHUTTING_DOWN or SHUTDOWN_ALREADY (Java ``ServiceState``)."""
        return self._lifecycle.state

    # -- configuration ----------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str | None = "*") -> None:
        """Consume ``topic``'s messages whose tag matches ``expression`` (``*``, ``TagA || TagB``;
        TAG expressions only over gRPC). May be called before or after :meth:`start`.

        Raises:
            IllegalArgumentError: illegal topic name.
        """
        check_name(topic, "topic", TOPIC_MAX_LENGTH)
        self.subscriptions[topic] = expression or "*"
        self._announce()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its receive threads end within one long polling)."""
        self.subscriptions.pop(topic, None)
        with self._lock:
            for key in [k for k in self._receivers if k[0] == topic]:
                self._receivers.pop(key).cancel()
        self._announce()

    # -- settings (Telemetry) -------------------------------------------------------------------------
    def _settings(self) -> Any:
        client = self._connected()
        polling = self._polling_override if self._polling_override is not None else self._polling_ms
        return client.settings(v2.PUSH_CONSUMER, self.subscriptions, polling)

    def _announce(self) -> None:
        client = self._client
        if client is not None and self.running:
            cmd = v2.TelemetryCommand()
            cmd.settings.CopyFrom(self._settings())
            client.conn.send_telemetry(cmd)

    def _on_command(self, cmd: Any) -> None:
        """The proxy's Settings answer: retry policy, FIFO, receive batch, long polling."""
        if cmd.WhichOneof("command") != "settings":
            return
        s = cmd.settings
        backoff = ConsumeBackoff.from_policy(s.backoff_policy) if s.HasField("backoff_policy") else ConsumeBackoff()
        if self.config.max_reconsume_times >= 0:
            backoff = ConsumeBackoff(self.config.max_reconsume_times + 1, backoff.delays_ms, backoff.initial_ms,
                                     backoff.max_ms, backoff.multiplier)
        self._backoff = backoff
        if self._service is not None:
            self._service.backoff = backoff
        sub = s.subscription
        if not self._settings_seen.is_set():  # the consume mode is chosen once, as the 5.x clients do
            self.fifo = bool(sub.fifo)
        if sub.receive_batch_size > 0:
            self._batch = min(MAX_RECEIVE_BATCH, sub.receive_batch_size)
        if sub.HasField("long_polling_timeout"):
            self._polling_ms = sub.long_polling_timeout.seconds * 1000 + sub.long_polling_timeout.nanos // 1_000_000
        self._settings_seen.set()

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Open the channel and the Telemetry stream, wait (up to ``mq_client_api_timeout``) for
        the proxy's settings, then ask the assignments and start receiving.

        Raises:
            ClientStateError: no listener, no subscription, already started or shut down.
        """
        if self._listener is None:
            raise ClientStateError("register a message listener before start()")
        if not self.subscriptions:
            raise ClientStateError("subscribe to a topic before start()")
        with self._lifecycle.starting():
            cfg = self.config
            self._client = client = grpc_client(self.endpoints, self.group, self.namespace, cfg, self._tls,
                                                self._roots)
            self._async_runner.start()
            client.conn.open_telemetry(self._settings, self._on_command)
            if not self._settings_seen.wait(client.timeout_s):
                log.warning("gRPC push consumer %s: no settings from %s yet; consuming with the defaults",
                            self.group, self.endpoints)
            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, cfg.consume_thread_max),
                                                               thread_name_prefix=f"rocketmq-grpc-{self.group}")
            self._service = GrpcConsumeService(self.group, client, self._listener, orderly=self.orderly,
                                               batch_max=cfg.consume_message_batch_max_size, stopped=self._stopped,
                                               invisible_ms=self.invisible_ms or AUTO_RENEW_INVISIBLE_MS)
            self._service.backoff = self._backoff
            self._scanner = threading.Thread(target=self._scan_loop, name=f"rocketmq-grpc-assign-{self.group}",
                                             daemon=True)
        self._scanner.start()

    def shutdown(self) -> None:
        """Stop receiving, wait up to ``await_termination_timeout`` ms for the listener calls
        running (their messages are settled), NotifyClientTermination, close. Messages received
        but not handed to the listener yet come again after their invisible duration. Idempotent."""
        with self._lifecycle.lock:
            began = self._lifecycle.begin_shutdown()
        if began:
            self._stopped.set()
            with self._lock:
                receivers = list(self._receivers.values())
                self._receivers.clear()
            for r in receivers:
                r.cancel()
            for t in [self._scanner, *(r.thread for r in receivers)]:
                if t is not None and t is not threading.current_thread():
                    t.join(self.config.mq_client_api_timeout / 1000.0 + 1)
            self._drain_pool()
            client = self._client
            if client is not None:
                try:
                    client.notify_termination()
                except MQError as exc:
                    log.info("gRPC push consumer %s: termination notice not delivered: %s", self.group, exc)
                client.close()
                self._client = None
            self._async_runner.stop()
        self._lifecycle.shutdown_done()

    def _drain_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        with self._lock:
            futures = set(self._futures)
        pool.shutdown(wait=False, cancel_futures=True)
        concurrent.futures.wait(futures, self.config.await_termination_timeout / 1000.0)

    # -- assignments -----------------------------------------------------------------------------------
    def _scan_loop(self) -> None:
        while not self._stopped.is_set():
            for topic in list(self.subscriptions):
                try:
                    self._assign(topic, self._connected().query_assignment(topic))
                except MQError as exc:
                    log.warning("gRPC push consumer %s: QueryAssignment of %s failed: %s", self.group, topic, exc)
            if self._stopped.wait(ASSIGNMENT_SCAN_S):
                return

    def _connected(self) -> GrpcConsumerClient:
        client = self._client
        if client is None:
            raise ClientStateError(f"consumer {self.group} is not started")
        return client

    def _assign(self, topic: str, queues: list[Any]) -> None:
        wanted = {(topic, q.broker.name, q.id): q for q in queues if q.permission in (v2.READ, v2.READ_WRITE)}
        with self._lock:
            if self._stopped.is_set() or topic not in self.subscriptions:
                return
            for key in [k for k in self._receivers if k[0] == topic and k not in wanted]:
                log.info("gRPC push consumer %s: %s no longer assigned", self.group, key)
                self._receivers.pop(key).cancel()
            for key, mq in wanted.items():
                r = self._receivers.get(key)
                if r is not None and r.thread is not None and r.thread.is_alive():
                    continue
                r = self._receivers[key] = _Receiver(mq)
                r.thread = threading.Thread(target=self._receive_loop, args=(topic, r), daemon=True,
                                            name=f"rocketmq-grpc-receive-{self.group}-{key[1]}-{key[2]}")
                r.thread.start()

    # -- receiving -------------------------------------------------------------------------------------
    def _receive_loop(self, topic: str, r: _Receiver) -> None:
        threshold = max(1, self.config.pull_threshold_for_queue)
        attempt_id: str | None = None
        while not r.stop.is_set():
            with r.cond:
                while r.cached >= threshold and not r.stop.is_set():
                    r.cond.wait(1.0)
            expression = self.subscriptions.get(topic)
            client = self._client
            if expression is None or client is None or r.stop.is_set():
                return
            attempt_id = attempt_id or str(uuid.uuid4())  # the same id when a failed receive is tried again
            polling = self._polling_override if self._polling_override is not None else self._polling_ms
            batch = max(1, min(self._batch, self.config.pull_batch_size, threshold - r.cached))
            req = client.receive_request(r.mq, expression, batch, self.invisible_ms, polling, attempt_id)
            try:
                r.call = client.receive_call(req)
                msgs = client.messages_of(r.call, client.timeout_s + polling / 1000.0)
            except MQError as exc:
                if r.stop.is_set():
                    return
                log.warning("gRPC push consumer %s: ReceiveMessage from %s failed (again in %.0f s): %s",
                            self.group, r.mq.broker.name, RECEIVE_RETRY_S, exc)
                r.stop.wait(RECEIVE_RETRY_S)
                continue
            finally:
                r.call = None
            attempt_id = None
            if msgs:
                self._dispatch(r, MessageQueue(topic, r.mq.broker.name, r.mq.id), msgs)

    def _dispatch(self, r: _Receiver, mq: MessageQueue, msgs: list[MessageExt]) -> None:
        service, pool = self._service, self._pool
        if service is None or pool is None:
            return
        if self.fifo:
            tasks = [(service.consume_in_order, g) for g in service.by_message_group(msgs)]
        else:
            tasks = [(service.consume, b) for b in service.batches(msgs)]
        for fn, batch in tasks:
            r.add(len(batch))
            try:
                future = pool.submit(fn, batch, mq)
            except RuntimeError:  # the pool is shut down: these come again after their invisibility
                r.done(len(batch))
                return
            with self._lock:
                self._futures.add(future)
            future.add_done_callback(functools.partial(self._consumed, r, len(batch)))

    def _consumed(self, r: _Receiver, n: int, future: concurrent.futures.Future) -> None:
        with self._lock:
            self._futures.discard(future)
        r.done(n)
        if not future.cancelled() and future.exception() is not None:
            log.error("gRPC push consumer %s: consume task failed", self.group, exc_info=future.exception())

    @property
    def consumed(self) -> int:
        """Messages the listener consumed successfully so far."""
        return self._service.consumed if self._service is not None else 0

    def __repr__(self) -> str:
        return f"GrpcPushConsumer(group={self.group!r}, endpoints={self.endpoints!r}, state={self._lifecycle.state.name})"
