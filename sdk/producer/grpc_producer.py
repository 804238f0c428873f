"""``Producer(..., protocol="grpc")``: the same producer API over RocketMQ 5's gRPC API, to a 5.x
proxy (``endpoints="host:8081"``) instead of name servers and brokers.

What differs from remoting (docs/grpc.md): the proxy picks the queue, so ``SendResult`` carries
the topic with broker ``""`` and queue id -1, and ``queue_offset`` is the stored offset; an
ordered send (``selector`` + ``arg``) becomes a 5.x FIFO message whose message group is
``str(arg)`` (one group, one queue: the per-key order holds); ``mq=`` is refused; the
``DELAY`` level becomes a delivery time (now + the level's delay). Retries follow a
:class:`~rocketmq_sdk.retry.RetryPolicy` like remoting sends: ``retry_times_when_send_failed``
retries after a network error or a retryable 5.x code (INTERNAL_SERVER_ERROR, PROXY_TIMEOUT,
persistence timeouts), with an exponential backoff (10 ms doubling up to 1 s).
"""

from __future__ import annotations

import concurrent.futures
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Unpack

from ..aio import AsyncLifecycle
from ..config import ProducerConfig, local_ip
from ..config_types import ProducerSettings
from ..exceptions import ClientStateError, IllegalArgumentError, MQBrokerError, RemotingError
from ..grpc import v2
from ..grpc.connection import RETRYABLE_CODES, GrpcConnection, error_of, proxy_endpoints, user_agent
from ..grpc.convert import SHARDING_KEY, fill_v2, set_timestamp_ms, v2_base
from ..lifecycle import Lifecycle
from ..protocol.codes import GROUP_MAX_LENGTH, check_name
from ..protocol.message import Message, MessageQueue, SendResult, SendStatus
from ..protocol.msgid import create_uniq_id
from ..retry import ExponentialBackoff, RetryPolicy
from .callbacks import run_callback
from .prepare import MessagePreparer
from .selector import SelectorLike

SendCallback = Callable[[SendResult | None, BaseException | None], Any]

log = logging.getLogger("rocketmq_sdk.producer")
_OK = v2.OK
_SEND_OK = SendStatus.SEND_OK


def grpc_retryable(error: BaseException) -> bool:
    """A send failure worth another attempt: a network error or a retryable 5.x code."""
    if isinstance(error, RemotingError):
        return True
    return isinstance(error, MQBrokerError) and error.code in RETRYABLE_CODES


class GrpcProducer(AsyncLifecycle):
    """The producer speaking RocketMQ 5's gRPC API; ``Producer(group, endpoints="host:port",
    protocol="grpc")`` (or ``Producer(group, "grpc://host:port")``) returns one. Same ``Message``,
    ``SendResult``, callbacks and ``RetryPolicy``; ``send``, ``send_batch``, ``send_async``,
    ``send_oneway``, ``start``/``shutdown`` and the context managers (request-reply and traces are
    remoting only).

    Args:
        group: producer group (checked as for remoting; 5.x proxies do not use it).
        endpoints: the proxy, ``host:port`` (``grpc://`` / ``grpcs://`` prefixes accepted;
            ``grpcs://`` implies ``use_tls``).
        tls_root_certificates: PEM bytes to verify the proxy's certificate with (``use_tls``);
            default the system's roots.
        **config: :class:`~rocketmq_sdk.config.ProducerConfig` settings; used here:
            ``send_msg_timeout``, ``retry_times_when_send_failed`` (and ``_async_``),
            ``max_message_size``, ``namespace``, ``access_key``/``secret_key`` (5.x request
            signature), ``use_tls``.

    Raises:
        IllegalArgumentError: illegal group name, no or illegal endpoints, unknown setting.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *, endpoints: str | None = None,
                 protocol: str = "grpc", tls_root_certificates: bytes | None = None, enable_msg_trace: bool = False,
                 customized_trace_topic: str | None = None, **config: Unpack[ProducerSettings]) -> None:
        self.endpoints, grpcs = proxy_endpoints(endpoints, namesrv_addr, "producer")
        if enable_msg_trace:
            raise IllegalArgumentError("enable_msg_trace is not available with protocol='grpc'")
        self.group = check_name(group, "producer group", GROUP_MAX_LENGTH)
        self.config = ProducerConfig.from_kwargs(**config)
        self._tls = self.config.use_tls or self.config.ssl_context is not None or grpcs
        self._roots = tls_root_certificates
        self._lifecycle = Lifecycle(f"gRPC producer {self.group}")
        self._preparer = MessagePreparer(self.group, self.config)
        backoff = ExponentialBackoff(0.01, 1.0)
        self.policy = RetryPolicy(self.config.retry_times_when_send_failed, backoff=backoff,
                                  retry_on_error=grpc_retryable)
        self.async_policy = self.policy.with_retries(self.config.retry_times_when_send_async_failed)
        self._conn: GrpcConnection | None = None
        self._client_id = f"{socket.gethostname()}@{create_uniq_id()[:16]}"
        self._topics: set[str] = set()
        self._queues: dict[str, MessageQueue] = {}  # topic -> MessageQueue(topic, "", -1) of its SendResults
        self._bases: dict[str, Any] = {}  # topic -> the v2.Message fields all its messages share (v2_base)
        self._callbacks: concurrent.futures.ThreadPoolExecutor | None = None
        self._host = self.config.client_ip or local_ip()
        self._settings_seen = threading.Event()

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Open the channel and the Telemetry stream (settings sync).

        Raises:
            ClientStateError: already started or shut down.
        """
        with self._lifecycle.starting():
            cfg = self.config
            self._conn = GrpcConnection(self.endpoints, self._client_id, namespace=cfg.namespace,
                                        access_key=cfg.access_key, secret_key=cfg.secret_key,
                                        security_token=cfg.security_token, tls=self._tls,
                                        root_certificates=self._roots)
            self._conn.open_telemetry(self._settings, self._on_command)
            self._callbacks = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="rocketmq-grpc-callback")
        log.info("gRPC producer %s started (proxy %s, client %s)", self.group, self.endpoints, self._client_id)

    def shutdown(self) -> None:
        """Tell the proxy (NotifyClientTermination), close the stream and the channel. Idempotent."""
        lifecycle = self._lifecycle
        with lifecycle.lock:
            began = lifecycle.begin_shutdown()
        conn, self._conn = self._conn, None
        if began and conn is not None:
            try:
                conn.call("NotifyClientTermination", v2.NotifyClientTerminationRequest(),
                          self.config.mq_client_api_timeout / 1000.0)
            except RemotingError as exc:
                log.info("gRPC producer %s: termination notice not delivered: %s", self.group, exc)
            conn.close()
            if self._callbacks is not None:
                self._callbacks.shutdown(wait=False)
        lifecycle.shutdown_done()

    def _connection(self) -> GrpcConnection:
        conn = self._conn
        if conn is None:
            self._lifecycle.check_running()
            raise ClientStateError(f"gRPC producer {self.group} is shut down")
        return conn

    # -- telemetry ------------------------------------------------------------------------------
    def _settings(self) -> Any:
        s = v2.Settings(client_type=v2.PRODUCER)
        host, _, port = self.endpoints.rpartition(":")
        s.access_point.addresses.add(host=host, port=int(port))
        s.access_point.scheme = v2.IPv4 if host.replace(".", "").isdigit() else v2.DOMAIN_NAME
        s.request_timeout.seconds = max(1, self.config.send_msg_timeout // 1000)
        for topic in sorted(self._topics):
            s.publishing.topics.add(name=topic, resource_namespace=self.config.namespace or "")
        s.publishing.max_body_size = self.config.max_message_size
        s.publishing.validate_message_type = True
        user_agent(s.user_agent)
        return s

    def _on_command(self, cmd: Any) -> None:
        if cmd.WhichOneof("command") == "settings":
            self._settings_seen.set()
        elif cmd.HasField("status") and cmd.status.code != v2.OK:
            log.warning("gRPC producer %s: the proxy refused its settings: %s", self.group, cmd.status.message)

    def _publishing(self, topic: str) -> None:
        if topic not in self._topics:
            self._topics.add(topic)
            conn = self._conn
            if conn is not None:  # the proxy learns the topic (transaction recovery is by topic)
                cmd = v2.TelemetryCommand()
                cmd.settings.CopyFrom(self._settings())
                conn.send_telemetry(cmd)

    # -- requests -------------------------------------------------------------------------------
    def _request(self, msgs: Sequence[Message], group: str | None = None) -> tuple[Any, list[str]]:
        req = v2.SendMessageRequest()
        ids = []
        now = int(time.time() * 1000)
        topic = msgs[0].topic
        base = self._bases.get(topic)
        if base is None:
            if len(self._bases) >= 10_000:
                self._bases.clear()
            base = self._bases[topic] = v2_base(topic, self.config.namespace or "")
            base.system_properties.born_host = self._host
        for msg in msgs:
            if msg.topic != topic:
                raise IllegalArgumentError("the messages of a batch must have the same topic")
            uniq = self._preparer.check_message(msg)
            ids.append(uniq)
            props = msg.properties
            if group is not None:
                props = {**props, SHARDING_KEY: group}
            m = req.messages.add()
            m.CopyFrom(base)
            fill_v2(m, msg.body, props, now_ms=now)
            set_timestamp_ms(m.system_properties.born_timestamp, now)
        if topic not in self._topics:
            self._publishing(topic)
        return req, ids

    def _result(self, resp: Any, topic: str, ids: list[str]) -> SendResult:
        status = resp.status
        if status.code != _OK:
            raise error_of(status, self.endpoints)
        first = None
        for e in resp.entries:
            if e.status.code != _OK:
                raise error_of(e.status, self.endpoints)
            if first is None:
                first = e
        mq = self._queues.get(topic)
        if mq is None:
            if len(self._queues) >= 10_000:
                self._queues.clear()
            mq = self._queues[topic] = MessageQueue(topic, "", -1)
        msg_id = ids[0] if len(ids) == 1 else ",".join(ids)
        if first is None:
            return SendResult(_SEND_OK, msg_id, "", mq, -1, None)
        return SendResult(_SEND_OK, msg_id, "", mq, first.offset, first.transaction_id or None)

    @staticmethod
    def _group_of(selector: SelectorLike | None, arg: Any, mq: MessageQueue | None) -> str | None:
        if mq is not None:
            raise IllegalArgumentError("mq= is not available with protocol='grpc': the proxy picks the queue "
                                       "(use a selector and arg for per-key order)")
        return None if selector is None else str(arg)

    # -- sends ----------------------------------------------------------------------------------
    def send(self, msg: Message, selector: SelectorLike | None = None, arg: Any = None, *,
             mq: MessageQueue | None = None, timeout_ms: float | None = None) -> SendResult:
        """Send ``msg`` and wait for the proxy's answer (as ``Producer.send``; differences in the
        module docstring).

        Raises:
            IllegalArgumentError: illegal message or ``mq`` given. ClientStateError: not running.
            TopicNotExistError: 5.x TOPIC_NOT_FOUND. MQBrokerError: another 5.x code (``.code``,
            e.g. 40002 ILLEGAL_TOPIC). RemotingError: the proxy unreachable or silent (after the
            retries).
        """
        conn = self._connection()
        req, ids = self._request([msg], self._group_of(selector, arg, mq))
        return self._send_blocking(conn, req, msg.topic, ids, timeout_ms)

    def send_batch(self, msgs: Sequence[Message], *, mq: MessageQueue | None = None,
                   timeout_ms: float | None = None) -> SendResult:
        """Send messages of one topic in one SendMessage request (``msg_id`` comma-joined)."""
        conn = self._connection()
        if not msgs:
            raise IllegalArgumentError("empty batch")
        req, ids = self._request(list(msgs), self._group_of(None, None, mq))
        return self._send_blocking(conn, req, msgs[0].topic, ids, timeout_ms)

    def _send_blocking(self, conn: GrpcConnection, req: Any, topic: str, ids: list[str],
                       timeout_ms: float | None) -> SendResult:
        timeout_s = (self.config.send_msg_timeout if timeout_ms is None else timeout_ms) / 1000.0
        deadline = time.monotonic() + timeout_s
        failures = 0
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise error_of(v2.Status(code=v2.REQUEST_TIMEOUT, message=f"send not answered within "
                                                                              f"{timeout_s * 1000:.0f} ms"),
                                   self.endpoints)
                return self._result(conn.call("SendMessage", req, left), topic, ids)
            except (MQBrokerError, RemotingError) as exc:
                failures += 1
                if left <= 0 or not self.policy.retry_error(failures, exc):
                    raise
                log.info("gRPC send to %s failed (%s); attempt %d", self.endpoints, exc, failures + 1)
                time.sleep(min(self.policy.delay_s(failures, exc), max(0.0, deadline - time.monotonic())))

    def send_async(self, msg: Message | Sequence[Message], callback: SendCallback | None = None,
                   selector: SelectorLike | None = None, arg: Any = None, *, mq: MessageQueue | None = None,
                   timeout_ms: float | None = None) -> concurrent.futures.Future[SendResult]:
        """Start a send and return a future of its ``SendResult`` (as ``Producer.send_async``);
        ``callback(result, error)`` runs on a small callback pool."""
        conn = self._connection()
        msgs = [msg] if isinstance(msg, Message) else list(msg)
        if not msgs:
            raise IllegalArgumentError("empty batch")
        req, ids = self._request(msgs, self._group_of(selector, arg, mq))
        timeout_s = (self.config.send_msg_timeout if timeout_ms is None else timeout_ms) / 1000.0
        out: concurrent.futures.Future[SendResult] = concurrent.futures.Future()
        deadline = time.monotonic() + timeout_s
        topic = msgs[0].topic

        def attempt(failures: int) -> None:
            call = conn.call_future("SendMessage", req, max(0.001, deadline - time.monotonic()))

            def done(f: Any) -> None:
                try:
                    out.set_result(self._result(f.result(), topic, ids))
                    return
                except Exception as exc:  # noqa: BLE001 - mapped, retried or handed to the future
                    error = conn.error(exc, "SendMessage", timeout_s)
                n = failures + 1
                if time.monotonic() < deadline and self.async_policy.retry_error(n, error):
                    delay = self.async_policy.delay_s(n, error)
                    threading.Timer(delay, attempt, (n,)).start()
                else:
                    out.set_exception(error)

            call.add_done_callback(done)

        attempt(0)
        if callback is not None:
            pool = self._callbacks
            out.add_done_callback(lambda f: pool.submit(run_callback, callback, f) if pool else None)
        return out

    def send_oneway(self, msg: Message, selector: SelectorLike | None = None, arg: Any = None, *,
                    mq: MessageQueue | None = None) -> None:
        """Send without waiting for (or seeing) the answer."""
        conn = self._connection()
        req, _ = self._request([msg], self._group_of(selector, arg, mq))
        conn.call_future("SendMessage", req, self.config.send_msg_timeout / 1000.0)

    def __repr__(self) -> str:
        return f"GrpcProducer(group={self.group!r}, endpoints={self.endpoints!r}, state={self._lifecycle.state.name})"

