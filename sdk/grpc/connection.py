"""``GrpcConnection``: the SDK's connection to a RocketMQ 5.x proxy (``apache.rocketmq.v2.
MessagingService``): unary calls in the caller's thread, the 5.x metadata (client id, namespace,
ACL signature), answers' ``Status`` turned into this SDK's exceptions, and the Telemetry stream
kept open in a thread of its own (re-opened after the proxy went away).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import logging
import os
import platform
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import grpc

from .._version import __version__
from ..exceptions import (
    IllegalArgumentError,
    MQBrokerError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    TopicNotExistError,
)
from . import v2
from .http2 import hpack_int, literal
from .service import (
    AUTHORIZATION,
    CLIENT_ID,
    CLIENT_VERSION,
    DATE_TIME,
    LANGUAGE,
    NAMESPACE,
    PROTOCOL,
    REQUEST_ID,
    RPCS,
)
from .unary import DEADLINE_EXCEEDED, UNAVAILABLE, GrpcStatusError, UnaryChannel

log = logging.getLogger("rocketmq_sdk.grpc")

#: 5.x codes a send may be retried after (the proxy or a broker was busy or away)
RETRYABLE_CODES = frozenset({v2.INTERNAL_ERROR, v2.INTERNAL_SERVER_ERROR, v2.PROXY_TIMEOUT, v2.HA_NOT_AVAILABLE,
                             v2.MASTER_PERSISTENCE_TIMEOUT, v2.SLAVE_PERSISTENCE_TIMEOUT, v2.REQUEST_TIMEOUT})
#: unary RPCs go over this SDK's own HTTP/2 transport (:mod:`.unary`) unless this environment
#: variable is ``grpcio`` (or ``GrpcConnection(transport="grpcio")``)
TRANSPORT_ENV = "ROCKETMQ_GRPC_TRANSPORT"
#: the ``x-mq-request-id`` header's name as an HPACK literal without indexing (its value follows)
_REQUEST_ID_NAME = literal(REQUEST_ID, "")[:-1]
#: the Telemetry stream is re-opened after this long without one, s (doubling up to 10 s)
TELEMETRY_RETRY_S = 0.2


def parse_endpoints(endpoints: str) -> str:
    """The gRPC target of ``endpoints``: ``host:port``, ``grpc://host:port`` or ``grpcs://...``
    (several ``;``-separated addresses are accepted; the first is used).

    Raises:
        ValueError: no ``host:port``.
    """
    text = endpoints.strip()
    for scheme in ("grpcs://", "grpc://", "https://", "http://"):
        if text.startswith(scheme):
            text = text[len(scheme):]
    first = text.split(";")[0].strip().rstrip("/")
    host, sep, port = first.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"endpoints {endpoints!r} is not host:port (e.g. 127.0.0.1:8081)")
    return first


def proxy_endpoints(endpoints: str | None, namesrv_addr: str | None, what: str) -> tuple[str, bool]:
    """``(host:port, tls)`` of the proxy a gRPC client is given (``endpoints``, else a
    ``grpc://`` / ``grpcs://`` ``namesrv_addr``); ``tls`` is True for ``grpcs://``.

    Raises:
        IllegalArgumentError: none given, or not ``host:port``.
    """
    target = endpoints or namesrv_addr
    if not target:
        raise IllegalArgumentError(f"a gRPC {what} needs endpoints='host:port' of a RocketMQ 5.x proxy")
    try:
        return parse_endpoints(target), target.startswith("grpcs://")
    except ValueError as exc:
        raise IllegalArgumentError(str(exc)) from None


def signature(secret_key: str, date_time: str) -> str:
    """The 5.x request signature: hex HMAC-SHA1 of the ``x-mq-date-time`` value."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def error_of(status: Any, target: str) -> MQBrokerError:
    """The exception for a non-OK 5.x ``Status`` (``.code`` is the 5.x code, e.g. 40002)."""
    cls = TopicNotExistError if status.code == v2.TOPIC_NOT_FOUND else MQBrokerError
    return cls(status.code, f"{v2.Code.Name(status.code) if status.code in v2.Code.values() else status.code}: "
                            f"{status.message}", target)


def check(status: Any, target: str) -> None:
    """Raise :func:`error_of` unless ``status`` is OK."""
    if status.code != v2.OK:
        raise error_of(status, target)


class GrpcConnection:
    """One channel to a 5.x proxy.

    Args:
        endpoints: ``host:port`` (or ``grpc://host:port``) of the proxy.
        client_id: this client's id (``x-mq-client-id``).
        namespace: resource namespace (``x-mq-namespace``), or None.
        access_key / secret_key: ACL credentials: requests are signed (``authorization`` header,
            ``MQv2-HMAC-SHA1``) when both are set.
        tls: connect with TLS; ``root_certificates`` (PEM bytes) verifies the proxy (default:
            the system's roots).
        transport: how :meth:`call` makes unary RPCs: ``"h2"`` (this SDK's own HTTP/2 client,
            :mod:`.unary`) or ``"grpcio"`` (grpcio's sync stub); default ``$ROCKETMQ_GRPC_TRANSPORT``,
            else ``"h2"``. Streams (ReceiveMessage, Telemetry) and :meth:`call_future` use grpcio.

    Raises:
        ValueError: another ``transport``.
    """

    def __init__(self, endpoints: str, client_id: str, *, namespace: str | None = None,
                 access_key: str | None = None, secret_key: str | None = None, security_token: str | None = None,
                 tls: bool = False, root_certificates: bytes | None = None, transport: str | None = None) -> None:
        self.target = parse_endpoints(endpoints)
        transport = transport or os.environ.get(TRANSPORT_ENV) or "h2"
        if transport not in ("h2", "grpcio"):
            raise ValueError(f"transport {transport!r} is not 'h2' or 'grpcio' (${TRANSPORT_ENV})")
        self.transport = transport
        self._h2 = UnaryChannel(self.target, tls=tls, root_certificates=root_certificates,
                                user_agent=f"rocketmq-python-sdk/{__version__}") if transport == "h2" else None
        self.client_id = client_id
        self.namespace = namespace or ""
        self._ak, self._sk, self._token = access_key, secret_key, security_token
        self._headers: tuple[int, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = (-1, (), ())
        self._encoded: tuple[int, bytes, bytes] = (-1, b"", b"")
        self._request_ids = itertools.count()
        self._request_ids_prefix = f"{uuid.uuid4()}-"
        self._request_ids_prefix_bytes = self._request_ids_prefix.encode()
        # a proxy that went away is tried again after 0.2 s, doubling up to 2 s (gRPC's default
        # grows to 120 s): calls fail fast (RemotingConnectError) until it is back
        options = [("grpc.enable_retries", 0), ("grpc.max_receive_message_length", -1),
                   ("grpc.max_send_message_length", -1), ("grpc.keepalive_time_ms", 30_000),
                   ("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
                   ("grpc.max_reconnect_backoff_ms", 2_000)]
        if tls:
            self.channel = grpc.secure_channel(self.target, grpc.ssl_channel_credentials(root_certificates), options)
        else:
            self.channel = grpc.insecure_channel(self.target, options)
        self._unary: dict[str, Any] = {}
        for name, rpc in RPCS.items():
            if rpc.request_stream:
                continue
            factory = self.channel.unary_stream if rpc.response_stream else self.channel.unary_unary
            self._unary[name] = factory(rpc.path, request_serializer=_serialize,
                                        response_deserializer=rpc.response.FromString)
        self._telemetry_call = self.channel.stream_stream(RPCS["Telemetry"].path, request_serializer=_serialize,
                                                          response_deserializer=v2.TelemetryCommand.FromString)
        self._closed = threading.Event()
        self._telemetry_thread: threading.Thread | None = None

    # -- metadata -----------------------------------------------------------------------------
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The 5.x headers of one request: the date (UTC, to the second) and its signature, a
        request id unique to this request (this connection's random prefix and a counter)."""
        second = int(time.time())
        cached = self._headers
        if cached[0] != second:
            cached = self._headers_of(second)
        _, head, tail = cached
        return (*head, (REQUEST_ID, self._request_id()), *tail)

    def _request_id(self) -> str:
        return f"{self._request_ids_prefix}{next(self._request_ids):08x}"

    def _encoded_metadata(self) -> bytes:
        """:meth:`metadata` as HPACK literals (the part fixed for a second encoded once)."""
        second = int(time.time())
        cached = self._encoded
        if cached[0] != second:
            headers = self._headers
            _, head, tail = headers if headers[0] == second else self._headers_of(second)
            cached = self._encoded = (second, b"".join(literal(k, v) for k, v in head),
                                      b"".join(literal(k, v) for k, v in tail))
        rid = b"%s%08x" % (self._request_ids_prefix_bytes, next(self._request_ids))  # as _request_id()
        return b"".join((cached[1], _REQUEST_ID_NAME, hpack_int(len(rid), 7, 0), rid, cached[2]))

    def _headers_of(self, second: int) -> tuple[int, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
        """The headers of requests made during ``second`` (cached: the date and the signature change
        once a second)."""
        now = datetime.fromtimestamp(second, UTC).strftime("%Y%m%dT%H%M%SZ")
        head = ((LANGUAGE, "PYTHON"), (PROTOCOL, "GRPC_V2"), (CLIENT_VERSION, __version__), (DATE_TIME, now))
        tail = [(CLIENT_ID, self.client_id), (NAMESPACE, self.namespace)]
        if self._ak and self._sk:
            tail.append((AUTHORIZATION, f"MQv2-HMAC-SHA1 Credential={self._ak}, SignedHeaders={DATE_TIME}, "
                                        f"Signature={signature(self._sk, now)}"))
            if self._token:
                tail.append(("x-mq-session-token", self._token))
        self._headers = (second, head, tuple(tail))
        return self._headers

    # -- calls ----------------------------------------------------------------------------------
    def call(self, name: str, request: Any, timeout_s: float) -> Any:
        """A unary RPC in the caller's thread; returns the response (its status unchecked).

        Raises:
            RemotingConnectError: the proxy cannot be reached. RemotingTimeoutError: no answer
            within ``timeout_s``. RemotingError: another gRPC error (message = its details).
        """
        h2 = self._h2
        if h2 is not None:
            rpc = RPCS[name]
            try:
                return rpc.response.FromString(h2.call(rpc.path, request.SerializeToString(), self._encoded_metadata(),
                                                       timeout_s))
            except GrpcStatusError as exc:
                raise self._status_error(exc.code, exc.details, name, timeout_s) from None
        try:
            return self._unary[name](request, timeout=timeout_s, metadata=self.metadata())
        except grpc.RpcError as exc:
            raise self._rpc_error(exc, name, timeout_s) from None

    def call_future(self, name: str, request: Any, timeout_s: float) -> Any:
        """A unary RPC started now; returns the grpc future (``.result()`` / ``add_done_callback``)."""
        return self._unary[name].future(request, timeout=timeout_s, metadata=self.metadata())

    def stream(self, name: str, request: Any, timeout_s: float) -> list[Any]:
        """A server-streaming RPC (ReceiveMessage): all its responses.

        Raises:
            as :meth:`call`.
        """
        return list(self.iterate(self.start_stream(name, request, timeout_s), name, timeout_s))

    def start_stream(self, name: str, request: Any, timeout_s: float) -> Any:
        """Start a server-streaming RPC: the grpc call (an iterator of responses with
        ``cancel()``; read it through :meth:`iterate`)."""
        return self._unary[name](request, timeout=timeout_s, metadata=self.metadata())

    def iterate(self, call: Any, name: str, timeout_s: float) -> Iterator[Any]:
        """The responses of a :meth:`start_stream` call, gRPC errors raised as :meth:`call` does
        (a cancelled call: RemotingError)."""
        try:
            yield from call
        except grpc.RpcError as exc:
            raise self._rpc_error(exc, name, timeout_s) from None

    def _rpc_error(self, exc: Any, name: str, timeout_s: float) -> RemotingError:
        code = exc.code() if hasattr(exc, "code") else None
        details = exc.details() if hasattr(exc, "details") else str(exc)
        return self._status_error(code.value[0] if code is not None else -1, details or "", name, timeout_s)

    def _status_error(self, code: int, details: str, name: str, timeout_s: float) -> RemotingError:
        """The SDK exception for gRPC status ``code`` (a number) of a failed call."""
        if code == DEADLINE_EXCEEDED:
            return RemotingTimeoutError(self.target, timeout_s * 1000, name)
        if code == UNAVAILABLE:
            return RemotingConnectError(self.target, details or "unavailable", role="gRPC proxy")
        return RemotingError(f"{name} to {self.target} failed: {GrpcStatusError.name_of(code) if code >= 0 else '?'} "
                             f"{details}")

    def error(self, exc: BaseException, name: str, timeout_s: float) -> BaseException:
        """The SDK exception for what a :meth:`call_future` raised."""
        return self._rpc_error(exc, name, timeout_s) if isinstance(exc, grpc.RpcError) else exc

    # -- Telemetry ------------------------------------------------------------------------------
    def open_telemetry(self, settings: Callable[[], Any], on_command: Callable[[Any], None]) -> None:
        """Keep a Telemetry stream open in a daemon thread: each (re-)opened stream starts with
        ``settings()`` (a ``v2.Settings``); every command the proxy sends goes to
        ``on_command`` (its Settings answer, RecoverOrphanedTransactionCommand...).
        :meth:`send_telemetry` writes on the open stream."""
        self._outbox: queue.Queue = queue.Queue()
        self._settings = settings
        self._on_command = on_command
        self._telemetry_thread = threading.Thread(target=self._telemetry_loop, name=f"rocketmq-grpc-telemetry-"
                                                  f"{self.client_id}", daemon=True)
        self._telemetry_thread.start()

    def send_telemetry(self, cmd: Any) -> None:
        """Write ``cmd`` (a ``v2.TelemetryCommand``) on the open stream (queued until one is)."""
        self._outbox.put(cmd)

    def _requests(self, first: Any, stop: threading.Event) -> Iterator[Any]:
        yield first
        while not stop.is_set() and not self._closed.is_set():
            try:
                cmd = self._outbox.get(timeout=0.5)
            except queue.Empty:
                continue
            if cmd is None:
                return
            yield cmd

    def _telemetry_loop(self) -> None:
        delay = TELEMETRY_RETRY_S
        while not self._closed.is_set():
            first = v2.TelemetryCommand()
            first.settings.CopyFrom(self._settings())
            stop = threading.Event()
            call = self._telemetry_call(self._requests(first, stop), metadata=self.metadata())
            self._call = call
            try:
                for cmd in call:
                    delay = TELEMETRY_RETRY_S
                    try:
                        self._on_command(cmd)
                    except Exception:  # noqa: BLE001 - a bad command must not end the stream
                        log.exception("telemetry command from %s failed", self.target)
            except grpc.RpcError as exc:
                if not self._closed.is_set():
                    log.info("telemetry stream to %s ended (%s); reopening in %.1f s", self.target,
                             exc.code() if hasattr(exc, "code") else exc, delay)
            finally:
                stop.set()
            if self._closed.wait(delay):
                return
            delay = min(delay * 2, 10.0)

    def close(self) -> None:
        """End the Telemetry stream and close the channel (idempotent)."""
        if self._closed.is_set():
            return
        self._closed.set()
        call = getattr(self, "_call", None)
        if call is not None:
            call.cancel()
        if self._telemetry_thread is not None:
            self._telemetry_thread.join(5)
        if self._h2 is not None:
            self._h2.close()
        self.channel.close()


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data


def user_agent(ua: Any) -> None:
    """Fill a ``v2.UA`` with this SDK's language, version, platform and host name."""
    ua.language = v2.PYTHON
    ua.version = __version__
    ua.platform = f"{platform.system()} {platform.release()} {platform.machine()} Python {platform.python_version()}"
    ua.hostname = platform.node()

