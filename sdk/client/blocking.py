"""``BlockingConnections``: request/response over plain blocking sockets owned by the calling
thread (one connection per thread and broker), for sync sends without the I/O-thread hop.

The hop to the event loop thread and back costs more than the rest of a sync send
(``benchmarks/profiling/LOG.md``), so a thread that owns its socket skips it. Only requests whose answer comes back on the same connection use it (sends); broker → client
requests never arrive here because these connections never send heartbeats.
"""

from __future__ import annotations

import logging
import select
import socket
import ssl
import struct
import sys
import threading
import time
import weakref
from collections.abc import Iterable
from typing import Any

from ..exceptions import (
    ClientStateError,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from ..protocol.codes import request_name
from ..remoting.client import parse_addr, peer_speaks_tls
from ..remoting.command import FLAG_RESPONSE, RemotingCommand
from ..remoting.frame import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder
from ..remoting.hooks import HookChain, RPCHook

__all__ = ["BlockingConnections"]

log = logging.getLogger("rocketmq_sdk.client.blocking")

# Plain TCP on Linux: the socket stays in blocking mode and the deadline is the kernel's
# SO_RCVTIMEO/SO_SNDTIMEO, set again only when it moves by more than _TIMEOUT_SLACK_S. A Python
# socket timeout (settimeout) makes every send/recv poll() first: one more syscall each.
_KERNEL_TIMEOUTS = sys.platform.startswith("linux")
_TIMEOUT_SLACK_S = 0.001
_TIMEVAL = struct.Struct("@ll")
_FRAME_LEN = struct.Struct(">I").unpack_from
_monotonic = time.monotonic
#: a connection unused for longer than this (s) is checked before reuse: brokers close idle
#: client connections (Java's ``serverChannelMaxIdleTimeSeconds``, 120 s), and these connections
#: send no heartbeats, so a send after a quiet spell would otherwise meet a closed socket
IDLE_CHECK_S = 1.0
_decode = RemotingCommand.decode


class _Conn:
    __slots__ = ("sock", "decoder", "fresh", "timeout_s", "last_used", "__weakref__")

    def __init__(self, sock: socket.socket, max_frame_length: int) -> None:
        self.sock = sock
        self.decoder = FrameDecoder(max_frame_length)
        self.fresh = True  # no response read yet (a TLS-only server closes a plaintext one at once)
        #: the kernel send/receive timeout in force (s), or None: Python socket timeouts (TLS)
        self.timeout_s: float | None = None
        #: time.monotonic() of the last answer read on it (or of its creation)
        self.last_used = _monotonic()

    def peer_gone(self) -> bool:
        """True when the idle connection is readable: the peer closed it (or sent something no
        request asked for, which makes it unusable for request/response too)."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):  # closed, or an fd select cannot take: let the send find out
            return False
        return bool(readable)

    def set_timeout(self, seconds: float) -> None:
        """Bound the next blocking send/recv to ~``seconds`` (at most 1 ms later)."""
        current = self.timeout_s
        if current is None:
            self.sock.settimeout(seconds)
        elif abs(seconds - current) > _TIMEOUT_SLACK_S:
            sec = int(seconds)
            usec = int((seconds - sec) * 1_000_000) or (0 if sec else 1)  # (0, 0) means "no timeout"
            tv = _TIMEVAL.pack(sec, usec)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
            self.timeout_s = seconds

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    __del__ = close  # a thread's connections close when the thread (and its locals) go away


class BlockingConnections:
    """Per-thread blocking connections.

    Args:
        connect_timeout_ms: TCP connect timeout, ms.
        rpc_hooks: the instance's hook chain (ACL signing), shared with its asyncio client (a
            list is copied into a new chain).
        max_frame_length: largest accepted frame, bytes.
        ssl_context: wrap each connection in TLS with this context (the handshake counts
            against ``connect_timeout_ms``); None for plain TCP.
    """

    def __init__(self, connect_timeout_ms: float, rpc_hooks: Iterable[RPCHook] = (),
                 max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH, *,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.connect_timeout_ms = connect_timeout_ms
        self.ssl_context = ssl_context
        self.rpc_hooks = HookChain.of(rpc_hooks)
        self.max_frame_length = max_frame_length
        self._local = threading.local()
        self._all: weakref.WeakSet[_Conn] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False

    def _conns(self) -> dict[str, _Conn]:
        conns = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        return conns

    def _get(self, addr: str) -> _Conn:
        conns = self._conns()
        conn = conns.get(addr)
        if conn is not None:
            return conn
        if self._closed:
            raise ClientStateError("the client's connections are closed")
        host, port = parse_addr(addr)
        try:
            sock = socket.create_connection((host, port), timeout=self.connect_timeout_ms / 1000.0)
        except TimeoutError:
            raise RemotingConnectError(addr, f"timed out after {self.connect_timeout_ms:.0f} ms") from None
        except OSError as exc:
            raise RemotingConnectError(addr, str(exc)) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context is not None:
            try:
                sock = self.ssl_context.wrap_socket(sock, server_hostname=host)  # handshake, same timeout
            except (OSError, ssl.SSLError) as exc:
                sock.close()
                raise RemotingConnectError(addr, f"TLS handshake failed: {exc}") from exc
        conn = conns[addr] = _Conn(sock, self.max_frame_length)
        if _KERNEL_TIMEOUTS and self.ssl_context is None:
            sock.settimeout(None)
            conn.timeout_s = -1.0  # forces the first set_timeout to set the kernel timeouts
        with self._lock:
            self._all.add(conn)
        return conn

    def _drop(self, addr: str, conn: _Conn) -> None:
        conns = self._conns()
        if conns.get(addr) is conn:
            del conns[addr]
        conn.close()

    def invoke(self, addr: str, cmd: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """Send ``cmd`` and wait for its response in the calling thread.

        Raises:
            RemotingConnectError: cannot connect.
            RemotingTimeoutError: no response within ``timeout_ms`` (the connection is dropped).
            RemotingSendRequestError: the connection broke.
            FrameError: a malformed frame (the connection is dropped).
            ClientStateError: closed.
        """
        now = _monotonic()
        deadline = now + timeout_ms / 1000.0
        hooks = self.rpc_hooks
        if hooks:
            hooks.before_request(addr, cmd)
        conns = getattr(self._local, "conns", None)
        conn = conns.get(addr) if conns is not None else None
        if conn is None:
            conn = self._get(addr)
        elif now - conn.last_used > IDLE_CHECK_S and conn.peer_gone():
            log.debug("connection to %s was closed while idle; reconnecting", addr)
            self._drop(addr, conn)
            conn = self._get(addr)
        sock = conn.sock
        opaque = cmd.opaque
        try:
            frame = cmd.encode()
            remaining = deadline - _monotonic()
            current = conn.timeout_s  # set_timeout only when the deadline moved (> 1 ms)
            if current is None or abs(remaining - current) > _TIMEOUT_SLACK_S:
                conn.set_timeout(max(0.001, remaining))
            try:
                sock.sendall(frame)
            except BlockingIOError:  # the kernel send timeout expired
                raise TimeoutError from None
            resp = None
            while resp is None:
                remaining = deadline - _monotonic()
                if remaining <= 0:
                    raise TimeoutError
                current = conn.timeout_s
                if current is None or abs(remaining - current) > _TIMEOUT_SLACK_S:
                    conn.set_timeout(remaining)
                try:
                    data = sock.recv(65536)
                except BlockingIOError:  # the kernel receive timeout expired (perhaps early by < 1 ms)
                    continue
                if not data:
                    if conn.fresh and self.ssl_context is None and \
                            peer_speaks_tls(addr, min(self.connect_timeout_ms / 1000.0, 3.0)):
                        raise RemotingConnectError(addr, "the server requires TLS: set use_tls=True (or an "
                                                         "ssl_context)")
                    raise RemotingSendRequestError(f"connection to {addr} closed by the peer "
                                                   f"(request opaque {opaque} pending)")
                decoder = conn.decoder
                n = len(data)
                if n >= 8 and _FRAME_LEN(data)[0] == n - 4 and n <= self.max_frame_length and not decoder.buffered:
                    frames: Any = (data[4:],)  # exactly one whole frame (the usual answer): no decoder pass
                else:
                    frames = decoder.feed(data)
                for frame in frames:
                    answer = _decode(frame)
                    if answer.flag & FLAG_RESPONSE and answer.opaque == opaque:
                        resp = answer
                    else:
                        log.debug("ignored frame code %d opaque %d from %s", answer.code, answer.opaque, addr)
        except TimeoutError:
            self._drop(addr, conn)
            raise RemotingTimeoutError(addr, timeout_ms, request_name(cmd.code)) from None
        except OSError as exc:
            self._drop(addr, conn)
            raise RemotingSendRequestError(f"connection to {addr} failed: {exc}") from exc
        except BaseException:
            self._drop(addr, conn)
            raise
        conn.fresh = False
        conn.last_used = now
        if hooks:
            hooks.after_response(addr, cmd, resp)
        return resp

    def close(self) -> None:
        """Close every connection of every thread (idempotent)."""
        self._closed = True
        with self._lock:
            conns = list(self._all)
        for conn in conns:
            conn.close()
