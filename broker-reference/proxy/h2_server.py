"""The proxy's own gRPC server: HTTP/2 (RFC 9113) on asyncio, hand-framed with the SDK's codec
(``rocketmq_sdk.grpc.http2``; the ``hpack`` library decodes the clients' header blocks), serving
unary, server-streaming and bidi calls (``h2_calls.py``) to any gRPC client (grpcio's, the
official 5.x clients', this SDK's own transport). The default server of ``GrpcProxy``; grpc.aio's
is kept behind ``ROCKETMQ_GRPC_SERVER=grpcio`` (docs/grpc.md).

One :class:`H2ServerConnection` per client connection: the preface, SETTINGS (+ ACK), PING
(ACK), flow control both ways (WINDOW_UPDATE; the receive windows are granted again as DATA
arrives), HEADERS/CONTINUATION (a header list over ``max_header_list`` bytes: RESOURCE_EXHAUSTED),
RST_STREAM (cancels the call's handler), GOAWAY, stream limits (over ``max_streams`` at once:
REFUSED_STREAM). A client breaking the protocol gets GOAWAY PROTOCOL_ERROR (or the RFC's more
specific code) and the connection closes; nothing it sends is used but as bytes in memory.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass

import hpack
from rocketmq_sdk.grpc import http2 as h
from rocketmq_sdk.grpc.status import INTERNAL, RESOURCE_EXHAUSTED

from .h2_calls import RESPONSE_HEAD, Method, deadline_of, finish_call, run_call, trailers
from .h2_stream import UNIMPLEMENTED, CallError, Outbound, ServerStream

log = logging.getLogger("rocketmq_broker.proxy")

#: the receive window granted to the connection and to each stream, bytes
RECV_WINDOW = 4 * 1024 * 1024
#: the largest frame accepted (announced as SETTINGS_MAX_FRAME_SIZE), bytes
MAX_FRAME_IN = 1024 * 1024
#: a header block (HEADERS + CONTINUATION) longer than this closes the connection, bytes
MAX_HEADER_BLOCK = 256 * 1024
#: a connection that has not sent the HTTP/2 preface by then is closed, s
PREFACE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Limits:
    """A server's limits.

    Attributes:
        max_message: the largest message each way, bytes (larger: RESOURCE_EXHAUSTED).
        max_streams: calls at once per connection (SETTINGS_MAX_CONCURRENT_STREAMS; more: REFUSED_STREAM).
        max_header_list: the largest request header list, bytes as HTTP/2 counts them (name + value
            + 32 per field; SETTINGS_MAX_HEADER_LIST_SIZE; larger: RESOURCE_EXHAUSTED).
    """

    max_message: int = 4 * 1024 * 1024
    max_streams: int = 1000
    max_header_list: int = 16 * 1024


def _peer(transport: asyncio.BaseTransport) -> str:
    addr = transport.get_extra_info("peername")
    if not isinstance(addr, tuple) or len(addr) < 2:
        return "unix:" if addr else ""
    return f"ipv6:[{addr[0]}]:{addr[1]}" if ":" in str(addr[0]) else f"ipv4:{addr[0]}:{addr[1]}"


class H2ServerConnection(asyncio.Protocol):
    """One client connection (see the module docstring).

    Args:
        methods: ``:path`` → :class:`Method`.
        limits: the server's :class:`Limits`.
        connections: the server's set of open connections (this one adds and removes itself).
    """

    def __init__(self, methods: dict[str, Method], limits: Limits, connections: set[H2ServerConnection]) -> None:
        self._methods = methods
        self._limits = limits
        self._connections = connections
        self._buf = bytearray()
        self._preface = False
        self._decoder = hpack.Decoder()
        self._decoder.max_header_list_size = MAX_HEADER_BLOCK
        self._streams: dict[int, ServerStream] = {}
        self._last_id = 0  # the highest stream id the client opened
        self._blocks = h.HeaderBlocks(MAX_HEADER_BLOCK)
        self._recv_window = h.ReceiveWindow(RECV_WINDOW)
        self._draining = False  # GOAWAY sent: no new calls
        self._closing = False
        self._out: Outbound | None = None
        self._transport: asyncio.Transport | None = None
        self._peer = ""
        self.idle: asyncio.Future[None] | None = None  # set once draining and without calls
        self._preface_timer: asyncio.TimerHandle | None = None

    # -- asyncio's side ------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._out = Outbound(transport)  # type: ignore[arg-type]
        self._peer = _peer(transport)
        self._connections.add(self)
        sslobj = transport.get_extra_info("ssl_object")
        if sslobj is not None and sslobj.selected_alpn_protocol() != "h2":
            log.info("gRPC client %s did not negotiate ALPN h2 (%r): closed", self._peer,
                     sslobj.selected_alpn_protocol())
            transport.close()
            return
        self._preface_timer = asyncio.get_running_loop().call_later(PREFACE_TIMEOUT_S, self._no_preface)
        lim = self._limits
        self._out.write(h.settings({h.MAX_CONCURRENT_STREAMS: lim.max_streams, h.INITIAL_WINDOW_SIZE: RECV_WINDOW,
                                    h.MAX_FRAME_SIZE: MAX_FRAME_IN, h.MAX_HEADER_LIST_SIZE: lim.max_header_list})
                        + h.window_update(0, RECV_WINDOW - h.DEFAULT_WINDOW))

    def _no_preface(self) -> None:
        self._preface_timer = None
        if not self._preface:
            log.info("gRPC client %s sent no HTTP/2 preface in %.0f s: closed", self._peer, PREFACE_TIMEOUT_S)
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._preface_timer is not None:
            self._preface_timer.cancel()
        self._connections.discard(self)
        out = self._out
        if out is not None:
            out.closed = True
            out.wake_all()
        for st in list(self._streams.values()):
            self._cancel(st)
        self._streams.clear()
        self._set_idle()

    def pause_writing(self) -> None:
        if self._out is not None:
            self._out.paused = True

    def resume_writing(self) -> None:
        if self._out is not None:
            self._out.paused = False
            self._out.wake_all()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        buf = self._buf
        buf += data
        try:
            if not self._preface:
                if len(buf) < 24:
                    if not h.PREFACE.startswith(bytes(buf)):
                        raise h.ProtocolError("not the HTTP/2 connection preface")
                    return
                if bytes(buf[:24]) != h.PREFACE:
                    raise h.ProtocolError("not the HTTP/2 connection preface")
                del buf[:24]
                self._preface = True
                if self._preface_timer is not None:
                    self._preface_timer.cancel()
                    self._preface_timer = None
            out: list[bytes] = []
            pos, end = 0, len(buf)
            try:
                while end - pos >= 9:
                    length, kind, flags, sid = h.parse_head(buf, pos)
                    if length > MAX_FRAME_IN:
                        raise h.ProtocolError(f"frame of {length} bytes (max {MAX_FRAME_IN})", h.FRAME_SIZE_ERROR)
                    if end - pos < 9 + length:
                        break
                    payload = bytes(buf[pos + 9:pos + 9 + length])
                    pos += 9 + length
                    self._handle(kind, flags, sid, payload, out)
            finally:
                del buf[:pos]
            if out and self._out is not None:
                self._out.write(b"".join(out))
        except h.ProtocolError as exc:
            self._fail(exc.code, str(exc))
        except (hpack.HPACKError, UnicodeDecodeError) as exc:
            self._fail(h.COMPRESSION_ERROR, f"header block: {type(exc).__name__}")
        except Exception as exc:  # noqa: BLE001 - a bug here must not leave the connection half-handled
            log.exception("gRPC connection from %s failed", self._peer)
            self._fail(h.INTERNAL_ERROR, f"{type(exc).__name__}")

    # -- frames ------------------------------------------------------------------------------------------
    def _handle(self, kind: int, flags: int, sid: int, payload: bytes, out: list[bytes]) -> None:
        if self._blocks.pending is not None and kind != h.CONTINUATION:
            raise h.ProtocolError(f"frame type {kind} inside a header block")
        if kind == h.DATA:
            self._on_data(flags, sid, payload, out)
        elif kind == h.HEADERS:
            if sid == 0 or not sid & 1:
                raise h.ProtocolError(f"HEADERS on stream {sid}")
            if (block := self._blocks.headers(flags, sid, payload)) is not None:
                self._end_headers(*block)
        elif kind == h.CONTINUATION:
            if (block := self._blocks.continuation(flags, sid, payload)) is not None:
                self._end_headers(*block)
        elif kind == h.SETTINGS:
            if sid != 0:
                raise h.ProtocolError("SETTINGS on a stream")
            if flags & h.ACK:
                if payload:
                    raise h.ProtocolError("SETTINGS ACK with a payload", h.FRAME_SIZE_ERROR)
                return
            self._on_settings(payload)
            out.append(h.frame(h.SETTINGS, h.ACK, 0))
        elif kind == h.PING:
            if len(payload) != 8 or sid != 0:
                raise h.ProtocolError(f"PING of {len(payload)} bytes on stream {sid}", h.FRAME_SIZE_ERROR)
            if not flags & h.ACK:
                out.append(h.frame(h.PING, h.ACK, 0, payload))
        elif kind == h.WINDOW_UPDATE:
            self._on_window_update(sid, payload)
        elif kind == h.RST_STREAM:
            if len(payload) != 4 or sid == 0:
                raise h.ProtocolError("malformed RST_STREAM", h.FRAME_SIZE_ERROR)
            if sid > self._last_id:
                raise h.ProtocolError(f"RST_STREAM on idle stream {sid}")
            st = self._streams.pop(sid, None)
            if st is not None:
                st.reset = True
                st.local_closed = True
                self._cancel(st)
                self._stream_gone()
        elif kind == h.GOAWAY:
            if len(payload) < 8 or sid != 0:
                raise h.ProtocolError("malformed GOAWAY")
            log.debug("gRPC client %s sent GOAWAY (error %d)", self._peer, h.u32(payload, 4))
        elif kind == h.PUSH_PROMISE:
            raise h.ProtocolError("PUSH_PROMISE from a client")
        elif kind == h.PRIORITY:
            if len(payload) != 5:
                raise h.ProtocolError("PRIORITY of a length other than 5", h.FRAME_SIZE_ERROR)
        # unknown frame types: ignored (RFC 9113 §4.1)

    def _on_settings(self, payload: bytes) -> None:
        values = h.parse_settings(payload)
        out = self._out
        assert out is not None
        if h.INITIAL_WINDOW_SIZE in values:
            size = values[h.INITIAL_WINDOW_SIZE]
            if size > h.MAX_WINDOW:
                raise h.ProtocolError(f"SETTINGS_INITIAL_WINDOW_SIZE {size}", h.FLOW_CONTROL_ERROR)
            delta, out.initial_window = size - out.initial_window, size
            for st in self._streams.values():
                st.send_window += delta
                if delta > 0:
                    st.window_opened()
        if h.MAX_FRAME_SIZE in values:
            size = values[h.MAX_FRAME_SIZE]
            if not h.DEFAULT_MAX_FRAME <= size <= h.MAX_FRAME_LIMIT:
                raise h.ProtocolError(f"SETTINGS_MAX_FRAME_SIZE {size}")
            out.max_frame = size
        if values.get(h.ENABLE_PUSH, 0) > 1:
            raise h.ProtocolError("SETTINGS_ENABLE_PUSH not 0 or 1")

    def _on_window_update(self, sid: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise h.ProtocolError("WINDOW_UPDATE of a length other than 4", h.FRAME_SIZE_ERROR)
        increment = h.u32(payload)
        out = self._out
        assert out is not None
        if sid == 0:
            if increment == 0:
                raise h.ProtocolError("WINDOW_UPDATE of 0 on the connection")
            out.window += increment
            if out.window > h.MAX_WINDOW:
                raise h.ProtocolError("connection send window over 2**31-1", h.FLOW_CONTROL_ERROR)
            out.wake_all()
            return
        st = self._streams.get(sid)
        if st is None:
            if sid > self._last_id:
                raise h.ProtocolError(f"WINDOW_UPDATE on idle stream {sid}")
            return
        if increment == 0 or st.send_window + increment > h.MAX_WINDOW:
            self._reset(st, h.PROTOCOL_ERROR if increment == 0 else h.FLOW_CONTROL_ERROR)
            return
        st.send_window += increment
        st.window_opened()

    def _on_data(self, flags: int, sid: int, payload: bytes, out: list[bytes]) -> None:
        if sid == 0:
            raise h.ProtocolError("DATA on stream 0")
        size = len(payload)
        update = self._recv_window.consume(size)
        if update:
            out.append(update)
        st = self._streams.get(sid)
        if st is None:
            if sid > self._last_id:
                raise h.ProtocolError(f"DATA on idle stream {sid}")
            return  # a stream already answered or reset: its data is dropped (the window counted above)
        if st.remote_closed:
            self._reset(st, h.STREAM_CLOSED)
            return
        st.recv_unacked += size
        if st.recv_unacked > RECV_WINDOW:
            self._reset(st, h.FLOW_CONTROL_ERROR)
            return
        st.on_data(h.unpad(flags, payload), bool(flags & h.END_STREAM))
        if st.error is not None:  # the call ends now, whether its handler reads or not
            finish_call(self._out, st, st.error.code, st.error.details)
            del self._streams[sid]
            self._cancel(st)
            self._stream_gone()
            return
        if st.recv_unacked >= RECV_WINDOW // 2 and not st.remote_closed:
            out.append(h.window_update(sid, st.recv_unacked))
            st.recv_unacked = 0

    # -- a new call ---------------------------------------------------------------------------------------
    def _end_headers(self, sid: int, flags: int, block: bytes) -> None:
        fields = h.decode_literals(block)  # this SDK's requests: no table, no Huffman
        if fields is None:
            fields = self._decoder.decode(block)  # always decoded: keeps the client's dynamic table in step
        st = self._streams.get(sid)
        if st is not None:  # trailers from the client (grpc sends none, but HTTP/2 allows them)
            if not flags & h.END_STREAM or st.remote_closed:
                raise h.ProtocolError(f"a second header block without END_STREAM on stream {sid}")
            st.end_remote()
            return
        if sid <= self._last_id:
            raise h.ProtocolError(f"HEADERS on closed stream {sid}")
        self._last_id = sid
        if self._draining:
            self._write(h.rst_stream(sid, h.REFUSED_STREAM))
            return
        if len(self._streams) >= self._limits.max_streams:
            self._write(h.rst_stream(sid, h.REFUSED_STREAM))
            return
        self._start(sid, flags, fields)

    def _start(self, sid: int, flags: int, fields: list[tuple[str, str]]) -> None:
        pseudo: dict[str, str] = {}
        metadata: list[tuple[str, str]] = []
        size = 0
        for name, value in fields:
            size += len(name) + len(value) + 32
            if name.startswith(":"):
                if metadata or name in pseudo:
                    raise h.ProtocolError(f"pseudo-header {name} repeated or after a header")
                pseudo[name] = value
            else:
                metadata.append((name, value))
        out = self._out
        assert out is not None
        st = ServerStream(sid, pseudo.get(":path", ""), metadata, out.initial_window, self._limits.max_message)
        if flags & h.END_STREAM:
            st.remote_closed = True
        head = dict(metadata)
        error: tuple[int, str] | None = None
        http_status = "200"
        method = self._methods.get(st.path)
        if pseudo.get(":method") != "POST":
            http_status, error = "405", (INTERNAL, f"method {pseudo.get(':method')!r} (gRPC needs POST)")
        elif not head.get("content-type", "").startswith("application/grpc"):
            http_status, error = "415", (INTERNAL, f"content-type {head.get('content-type', '')[:64]!r}")
        elif size > self._limits.max_header_list:
            error = (RESOURCE_EXHAUSTED, f"header list of {size} bytes (max {self._limits.max_header_list})")
        elif head.get("grpc-encoding", "identity") != "identity":
            error = (UNIMPLEMENTED, f"Compression algorithm {head['grpc-encoding'][:32]!r} not supported")
        elif method is None:
            error = (UNIMPLEMENTED, f"Method not found: {st.path[:200]}")
        loop = asyncio.get_running_loop()
        if error is None:
            try:
                st.deadline = deadline_of(head.get("grpc-timeout"), loop.time())
            except CallError as exc:
                error = (exc.code, exc.details)
        if error is not None:
            block = trailers(*error)
            block = (RESPONSE_HEAD + block) if http_status == "200" else \
                h.literal(":status", http_status) + h.literal(h.CONTENT_TYPE, "application/grpc") + block
            tail = b"" if st.remote_closed else h.rst_stream(sid, h.NO_ERROR)
            self._write(h.header_frames(sid, block, out.max_frame, h.END_STREAM) + tail)
            return
        assert method is not None
        self._streams[sid] = st
        st.task = task = loop.create_task(run_call(method, st, out, self._peer, self._limits.max_message))
        task.add_done_callback(lambda _t, st=st: self._finished(st))  # type: ignore[misc]
        if st.deadline is not None:
            st._timer = loop.call_at(st.deadline, self._expire, st)

    def _expire(self, st: ServerStream) -> None:
        st._timer = None
        if st.task is not None and not st.task.done():
            st.expired = True
            st.task.cancel()

    def _finished(self, st: ServerStream) -> None:
        st.close_timer()
        if self._streams.get(st.id) is st:
            del self._streams[st.id]
            self._stream_gone()

    def _stream_gone(self) -> None:
        if self._draining and not self._streams:
            self._set_idle()
            if self._transport is not None:
                self._transport.close()

    # -- ending -------------------------------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        if self._out is not None:
            self._out.write(data)

    def _reset(self, st: ServerStream, code: int) -> None:
        self._streams.pop(st.id, None)
        st.reset = st.local_closed = True
        self._write(h.rst_stream(st.id, code))
        self._cancel(st)
        self._stream_gone()

    @staticmethod
    def _cancel(st: ServerStream) -> None:
        st.close_timer()
        if st.task is not None and not st.task.done():
            st.task.cancel()
        st.window_opened()

    def _fail(self, code: int, reason: str) -> None:
        """A connection error: GOAWAY with ``code``, then close."""
        log.info("gRPC client %s broke HTTP/2: %s (GOAWAY %d)", self._peer, reason, code)
        self._closing = True
        self._write(h.goaway(self._last_id, code, reason.encode()[:200]))
        if self._transport is not None:
            self._transport.close()

    def _set_idle(self) -> None:
        if self.idle is not None and not self.idle.done():
            self.idle.set_result(None)

    def drain(self) -> asyncio.Future[None]:
        """GOAWAY (NO_ERROR, the last stream taken): calls in progress go on, new ones are refused;
        returns a future done once no call is left (the connection then closes)."""
        if self.idle is None:
            self.idle = asyncio.get_running_loop().create_future()
        if not self._draining:
            self._draining = True
            self._write(h.goaway(self._last_id, h.NO_ERROR, b"server shutting down"))
        if not self._streams:
            self._set_idle()
            if self._transport is not None:
                self._transport.close()
        return self.idle

    def abort(self) -> list[asyncio.Task]:
        """Close now: calls still running are cancelled; returns their tasks."""
        tasks = [st.task for st in self._streams.values() if st.task is not None and not st.task.done()]
        for task in tasks:
            task.cancel()
        self._closing = True
        if self._transport is not None:
            self._transport.close()
        return tasks


def tls_context(tls: tuple[bytes, bytes]) -> ssl.SSLContext:
    """A server TLS context of ``(private_key_pem, certificate_chain_pem)`` with ALPN ``h2``
    (the PEM bytes go through a private temporary directory: ``ssl`` loads them from files)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["h2"])
    with tempfile.TemporaryDirectory(prefix="rocketmq-grpc-tls-") as d:
        key, cert = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
        for path, data in ((key, tls[0]), (cert, tls[1])):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                f.write(data)
        ctx.load_cert_chain(cert, key)
    return ctx


class H2GrpcServer:
    """A listening gRPC server on the running loop.

    Args:
        methods: ``:path`` → :class:`Method`.
        limits: see :class:`Limits`.
        tls: ``(private_key_pem, certificate_chain_pem)`` to serve TLS only (ALPN h2), or None.
    """

    def __init__(self, methods: dict[str, Method], limits: Limits = Limits(),
                 tls: tuple[bytes, bytes] | None = None) -> None:
        self.methods = methods
        self.limits = limits
        self._ssl = tls_context(tls) if tls is not None else None
        self._server: asyncio.base_events.Server | None = None
        self.connections: set[H2ServerConnection] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: a free port); returns the port.

        Raises:
            OSError: the address cannot be bound.
        """
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: H2ServerConnection(self.methods, self.limits, self.connections), host, port, ssl=self._ssl,
            reuse_address=True)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self, grace_s: float) -> None:
        """Stop listening, GOAWAY every connection, let calls in progress end for up to ``grace_s``
        seconds, then close what is left (its calls are cancelled)."""
        if self._server is not None:
            self._server.close()
        idle = [c.drain() for c in list(self.connections)]
        if idle:
            await asyncio.wait(idle, timeout=grace_s)
        tasks = [t for c in list(self.connections) for t in c.abort()]
        if tasks:  # the cancelled handlers end before what they use (the proxy's remoting) is closed
            await asyncio.wait(tasks, timeout=max(1.0, grace_s))
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

