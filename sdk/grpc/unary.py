"""The SDK's own transport for gRPC *unary* calls: HTTP/2 (RFC 9113) on a plain socket, or TLS
with ALPN ``h2``, without grpcio's machinery between the caller and the socket.

``UnaryChannel.call`` runs in the caller's thread: it writes the request (HEADERS + DATA under one
writer lock, stream ids in order) and then reads the connection itself until its answer is
complete. With several threads calling at once one of them reads at a time ("leader") and hands
the other streams' frames to them. Frames handled: SETTINGS (+ ACK), PING (answered), WINDOW_UPDATE
and flow control both ways, HEADERS/CONTINUATION (decoded by ``hpack``: dynamic table, Huffman),
DATA (one length-prefixed gRPC message, at most ``max_message_bytes``), RST_STREAM, GOAWAY.
A GOAWAY or a lost connection makes the next call open a new connection; calls the server did not
process (above GOAWAY's last stream id, REFUSED_STREAM) are sent again on it once. Errors are
:class:`GrpcStatusError` with gRPC's status code (``grpc-status`` of the trailers, or 14
UNAVAILABLE for connection failures, 4 DEADLINE_EXCEEDED when the caller's deadline passed, 13
INTERNAL for a server breaking the protocol).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Sequence

from . import http2 as h
from .h2_connection import MAX_MESSAGE, H2Connection
from .status import DEADLINE_EXCEEDED, UNAVAILABLE, GrpcStatusError, Unprocessed

__all__ = ["DEADLINE_EXCEEDED", "UNAVAILABLE", "GrpcStatusError", "UnaryChannel"]


class UnaryChannel:
    """Unary gRPC calls to one ``host:port`` over :class:`H2Connection` (opened on first use and
    again after a GOAWAY or a lost connection).

    Args:
        target: ``host:port``.
        tls: TLS with ALPN ``h2``; ``root_certificates`` (PEM bytes) are trusted, default the
            system's roots; the certificate must name ``host``.
        max_message_bytes: the largest answer accepted (default 64 MiB); a larger one fails the
            call with RESOURCE_EXHAUSTED.
        user_agent: the ``user-agent`` header.
    """

    def __init__(self, target: str, *, tls: bool = False, root_certificates: bytes | None = None,
                 max_message_bytes: int = MAX_MESSAGE, user_agent: str = "rocketmq-python-sdk") -> None:
        host, _, port = target.rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        self.target = target
        self._context: ssl.SSLContext | None = None
        if tls:
            self._context = ssl.create_default_context(cadata=root_certificates.decode() if root_certificates
                                                       else None)
            self._context.set_alpn_protocols(["h2"])
        self._max_message = max_message_bytes
        self._common = h.literal(h.AUTHORITY, target) + h.literal(h.CONTENT_TYPE, "application/grpc") + \
            h.literal("te", "trailers") + h.literal(h.USER_AGENT, user_agent)
        self._heads: dict[str, bytes] = {}
        self._timeouts: dict[int, bytes] = {}  # ms -> the grpc-timeout header (the same for most calls)
        self._lock = threading.Lock()
        self._conn: H2Connection | None = None
        self._closed = False

    def call(self, path: str, message: bytes, metadata: Sequence[tuple[str, str]] | bytes, timeout_s: float) -> bytes:
        """Call ``path`` (``/package.Service/Method``) with the serialized request ``message`` and
        ``metadata`` (``(name, value)`` pairs, names in lower case, or pairs already encoded by
        :func:`.http2.literal`); returns the serialized answer.

        Raises:
            GrpcStatusError: not OK (``code``: 14 UNAVAILABLE no connection or lost, 4
            DEADLINE_EXCEEDED after ``timeout_s``, else the server's ``grpc-status``).
        """
        deadline = time.monotonic() + timeout_s
        head = self._heads.get(path)
        if head is None:
            head = self._heads[path] = (h.METHOD_POST + (h.SCHEME_HTTPS if self._context else h.SCHEME_HTTP)
                                        + h.literal(h.PATH, path) + self._common)
        ms = min(99_999_999, max(1, int(timeout_s * 1000)))
        timeout = self._timeouts.get(ms)
        if timeout is None:
            if len(self._timeouts) >= 256:
                self._timeouts.clear()
            timeout = self._timeouts[ms] = h.literal("grpc-timeout", f"{ms}m")
        tail = timeout + (metadata if isinstance(metadata, bytes) else b"".join([h.literal(k, v) for k, v in metadata]))
        for _ in range(3):
            conn = self._connection(deadline)
            try:
                return conn.unary(head, tail, message, deadline)
            except Unprocessed:
                continue
        raise GrpcStatusError(UNAVAILABLE, f"{self.target} did not take the call (GOAWAY or refused stream)")

    def _connection(self, deadline: float) -> H2Connection:
        conn = self._conn
        if conn is not None and conn.usable:
            return conn
        with self._lock:
            if self._closed:
                raise GrpcStatusError(UNAVAILABLE, "channel closed")
            conn = self._conn
            if conn is None or not conn.usable:
                if conn is not None:
                    conn.close_if_idle()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise GrpcStatusError(DEADLINE_EXCEEDED, "deadline exceeded before connecting")
                try:
                    conn = H2Connection.open(self.host, self.port, left, self._context, self._max_message)
                except (OSError, ssl.SSLError) as exc:
                    raise GrpcStatusError(UNAVAILABLE, f"cannot connect to {self.target}: {exc}") from None
                self._conn = conn
            return conn

    def close(self) -> None:
        """Close the connection; calls in progress fail with UNAVAILABLE (idempotent)."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
