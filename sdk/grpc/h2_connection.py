"""``H2Connection``: one HTTP/2 connection carrying unary gRPC calls for :class:`.unary.UnaryChannel`
(frames and flow control as described there: the caller's thread writes its call and reads the
connection until its answer is complete, one reader at a time).
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
from collections.abc import Callable
from typing import cast
from urllib.parse import unquote

import hpack

from . import http2 as h
from .status import (
    DEADLINE_EXCEEDED,
    INTERNAL,
    RESOURCE_EXHAUSTED,
    RST_STATUS,
    UNAVAILABLE,
    UNKNOWN,
    GrpcStatusError,
    Unprocessed,
)

log = logging.getLogger("rocketmq_sdk.grpc")
_HEAD_UNPACK = h.FRAME_HEAD.unpack_from

#: the receive window announced for the connection and each stream, bytes
RECV_WINDOW = 8 * 1024 * 1024
#: the largest frame accepted, bytes (announced as SETTINGS_MAX_FRAME_SIZE)
MAX_FRAME_IN = 1024 * 1024
#: the largest header block accepted (HEADERS + CONTINUATION), bytes
MAX_HEADER_BLOCK = 256 * 1024
#: a write blocked this long (the server reads nothing though it granted the window) loses the
#: connection, s
WRITE_TIMEOUT_S = 10.0
#: plain TCP sockets are blocking with kernel send/receive timeouts (Linux), else Python timeouts
_KERNEL_TIMEOUTS = sys.platform.startswith("linux")
_TIMEVAL = struct.Struct("@ll")
#: SO_RCVTIMEO is set again when the time left moves by more than this, s (a read may end this
#: much after the caller's deadline)
_TIMEOUT_SLACK_S = 0.001
#: the largest answer accepted by default, bytes
MAX_MESSAGE = 64 * 1024 * 1024


class _Stream:
    __slots__ = ("id", "headers", "data", "done", "error", "send_window", "unacked")

    def __init__(self, stream_id: int, send_window: int) -> None:
        self.id = stream_id
        self.headers: list[list[tuple[str, str]]] = []
        self.data = bytearray()
        self.done = False
        self.error: BaseException | None = None
        self.send_window = send_window
        self.unacked = 0


class H2Connection:
    """One HTTP/2 connection carrying unary gRPC calls (see the module docstring). Made by
    :meth:`open`; ``usable`` turns False after a GOAWAY, an error or :meth:`close`."""

    def __init__(self, sock: socket.socket, max_message: int) -> None:
        self._sock = sock
        self._max_message = max_message
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiters = 0  # threads in self._cond.wait(): notified only when there are some
        self._reading = False  # a thread reads the connection (the "reader"; the only one using _readable)
        #: TLS: the count of bytes decrypted already (readable without the socket being readable)
        self._pending: Callable[[], int] | None = sock.pending if isinstance(sock, ssl.SSLSocket) else None
        self._readable = _readable_check(sock)
        #: ``poll(ms)`` of the reader's poll object (None without one): the check before a write
        self._poll_now: Callable[[float], list] | None = getattr(self._readable, "poll", None)
        self._kernel_timeouts = _KERNEL_TIMEOUTS and sock.gettimeout() is None and self._pending is None
        self._recv_timeout = -1.0  # the SO_RCVTIMEO in force (s)
        self._buf = bytearray()
        self._decoder = hpack.Decoder()
        self._decoder.max_header_list_size = MAX_HEADER_BLOCK
        self._known: dict[bytes, list[tuple[str, str]]] = {}  # see _decode
        self._ok_pair: tuple[object, object] = (None, None)  # see _answer
        self._streams: dict[int, _Stream] = {}
        self._next_id = 1
        self._send_window = h.DEFAULT_WINDOW
        self._peer_initial_window = h.DEFAULT_WINDOW
        self._peer_max_frame = h.DEFAULT_MAX_FRAME
        self._peer_max_streams = 2**31
        self._recv_window = h.ReceiveWindow(RECV_WINDOW)
        self._settings_seen = False
        self._blocks = h.HeaderBlocks(MAX_HEADER_BLOCK)
        self._error: GrpcStatusError | None = None
        self._goaway = False

    @classmethod
    def open(cls, host: str, port: int, timeout_s: float, context: ssl.SSLContext | None,
             max_message: int = MAX_MESSAGE) -> H2Connection:
        """Connect, (TLS handshake with ALPN ``h2``,) and send the connection preface, SETTINGS
        and the connection's window; the server's SETTINGS are read with the first answer.

        Raises:
            OSError: no connection (refused, timed out, TLS refused); ssl.SSLError included.
        """
        sock = socket.create_connection((host, port), timeout=max(0.001, timeout_s))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=host)
                if sock.selected_alpn_protocol() != "h2":
                    raise ssl.SSLError(f"{host}:{port} did not agree to HTTP/2 (ALPN {sock.selected_alpn_protocol()!r})")
            # writes give up after WRITE_TIMEOUT_S; reads wait until the caller's deadline. Plain TCP
            # on Linux: a blocking socket with the kernel's SO_SNDTIMEO / SO_RCVTIMEO (a Python
            # socket timeout would make every send and recv poll() first: one more syscall each)
            if context is None and _KERNEL_TIMEOUTS:
                sock.settimeout(None)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(WRITE_TIMEOUT_S))
            else:
                sock.settimeout(WRITE_TIMEOUT_S)
            sock.sendall(h.PREFACE + h.settings({h.ENABLE_PUSH: 0, h.INITIAL_WINDOW_SIZE: RECV_WINDOW,
                                                 h.MAX_FRAME_SIZE: MAX_FRAME_IN,
                                                 h.MAX_HEADER_LIST_SIZE: MAX_HEADER_BLOCK})
                         + h.window_update(0, RECV_WINDOW - h.DEFAULT_WINDOW))
        except BaseException:
            sock.close()
            raise
        return cls(sock, max_message)

    @property
    def usable(self) -> bool:
        """True while new calls may start here (no GOAWAY, no error, stream ids left)."""
        return not self._goaway and self._error is None

    # -- a call ---------------------------------------------------------------------------------
    def unary(self, head: bytes, tail: bytes, message: bytes, deadline: float) -> bytes:
        """One unary call: header block ``head + tail``, request ``message``; returns the answer's
        message bytes. A call alone on the connection (the usual sync send) becomes its reader at
        once and reads its own answer: no hand-over between threads.

        Raises:
            GrpcStatusError: the call failed (see the module docstring). Unprocessed: the server
            did not take the call; send it again on a new connection.
        """
        payload = b"\0" + len(message).to_bytes(4, "big") + message
        with self._lock:
            lead = not self._reading and not self._streams  # alone: this thread reads from now on
            if lead:
                self._reading = True
        try:
            return self._unary(head + tail, payload, deadline, lead)
        finally:
            if lead:
                self._release()

    def _unary(self, block: bytes, payload: bytes, deadline: float, lead: bool) -> bytes:
        lock = self._lock
        if lead and self._input_waiting():
            self._poll()  # a GOAWAY or the connection's end before this call was written: the server
            error = self._error  # never saw the call; it goes to a new connection
            if error is not None and error.code != UNAVAILABLE:
                raise error  # the server broke the protocol: no second try
            if not self.usable:
                raise Unprocessed()
        if len(self._streams) >= self._peer_max_streams:  # the server's SETTINGS_MAX_CONCURRENT_STREAMS
            try:
                self._wait(lambda: len(self._streams) < self._peer_max_streams or not self.usable, deadline, lead)
            except TimeoutError:
                raise GrpcStatusError(DEADLINE_EXCEEDED, "deadline exceeded waiting for a free stream") from None
        with self._write_lock:
            with lock:
                if not self.usable:
                    raise Unprocessed()
                sid = self._next_id
                self._next_id += 2
                if self._next_id > h.MAX_WINDOW:
                    self._goaway = True  # stream ids used up: the next call opens a new connection
                st = self._streams[sid] = _Stream(sid, self._peer_initial_window)
                n = min(len(payload), self._send_window, st.send_window, self._peer_max_frame)
                self._send_window -= n
                st.send_window -= n
            out = self._header_frames(sid, block)
            out += h.frame(h.DATA, h.END_STREAM if n == len(payload) else 0, sid, payload[:n])
            try:
                self._sock.sendall(out)
            except OSError as exc:  # not all written: the server cannot have taken the call
                with lock:
                    self._streams.pop(sid, None)
                self._fail(GrpcStatusError(UNAVAILABLE, f"connection lost: {exc}"))
                raise Unprocessed() from None
        try:
            if n < len(payload):
                self._send_rest(st, memoryview(payload)[n:], deadline, lead)
            self._wait(lambda: st.done, deadline, lead)
        except TimeoutError:
            self._cancel(st)
            raise GrpcStatusError(DEADLINE_EXCEEDED, "deadline exceeded") from None
        finally:
            with lock:
                self._streams.pop(sid, None)
                idle = self._goaway and not self._streams
            if idle:
                self.close()
        return self._answer(st)

    def _input_waiting(self) -> bool:
        if self._poll_now is not None:
            return bool(self._poll_now(0)) or self._pending is not None and self._pending() > 0
        return self._readable(0) or self._pending is not None and self._pending() > 0

    def _poll(self) -> None:
        """Handle what the server sent while nobody read (GOAWAY, PING, the connection's end);
        called by the reader."""
        try:
            self._read_until(lambda: not self.usable or not self._input_waiting(), time.monotonic() + 0.05)
        except (TimeoutError, GrpcStatusError):
            pass

    def _header_frames(self, sid: int, block: bytes) -> bytes:
        return h.header_frames(sid, block, self._peer_max_frame)

    def _send_rest(self, st: _Stream, rest: memoryview, deadline: float, lead: bool) -> None:
        while rest:
            with self._cond:
                n = min(len(rest), self._send_window, st.send_window, self._peer_max_frame)
                if n > 0:
                    self._send_window -= n
                    st.send_window -= n
            if n <= 0:
                self._wait(lambda: st.done or min(self._send_window, st.send_window) > 0, deadline, lead)
                if st.done:
                    return
                continue
            data = h.frame(h.DATA, h.END_STREAM if n == len(rest) else 0, st.id, bytes(rest[:n]))
            with self._write_lock:
                try:
                    self._sock.sendall(data)
                except OSError as exc:
                    self._fail(GrpcStatusError(UNAVAILABLE, f"connection lost: {exc}"))
                    return
            rest = rest[n:]

    def _cancel(self, st: _Stream) -> None:
        if st.done:
            return
        with self._write_lock:
            try:
                self._sock.sendall(h.rst_stream(st.id, h.CANCEL))
            except OSError:
                pass

    def _answer(self, st: _Stream) -> bytes:
        if st.error is not None:
            raise st.error
        if not st.headers:
            raise GrpcStatusError(INTERNAL, "stream ended without headers")
        first, trailers = st.headers[0], st.headers[-1]
        ok = self._ok_pair  # the decoded lists (one object per distinct header block, see _decode) of
        if first is not ok[0] or trailers is not ok[1]:  # the last answer found OK: the same again is OK
            self._check_status(first, trailers)
            self._ok_pair = (first, trailers)
        data = st.data
        if len(data) < 5 or data[0] != 0 or int.from_bytes(data[1:5], "big") != len(data) - 5:
            raise GrpcStatusError(INTERNAL, f"answer is not one uncompressed gRPC message ({len(data)} bytes)")
        return bytes(data[5:])

    def _check_status(self, first_headers: list[tuple[str, str]], trailer_list: list[tuple[str, str]]) -> None:
        """Raise the call's error unless HTTP status 200 and grpc-status 0."""
        first, trailers = dict(first_headers), dict(trailer_list)
        status = first.get(":status", "")
        if status != "200":
            code = {"400": INTERNAL, "401": 16, "403": 7, "404": 12, "429": UNAVAILABLE, "502": UNAVAILABLE,
                    "503": UNAVAILABLE, "504": UNAVAILABLE}.get(status, UNKNOWN)
            raise GrpcStatusError(code, f"HTTP status {status or '(none)'} from the server")
        grpc_status = trailers.get("grpc-status")
        if grpc_status is None or not grpc_status.isdigit():
            raise GrpcStatusError(INTERNAL, f"answer without a valid grpc-status ({grpc_status!r})")
        if grpc_status != "0":
            raise GrpcStatusError(int(grpc_status), unquote(trailers.get("grpc-message", "")))

    # -- reading ------------------------------------------------------------------------------------
    def _wait(self, ready: Callable[[], bool], deadline: float, lead: bool = False) -> None:
        """Return once ``ready()``; read the connection meanwhile unless another thread does
        (``lead``: this thread is the reader already, and stays it).

        Raises:
            TimeoutError: ``deadline`` passed first. GrpcStatusError: the connection failed.
        """
        if lead:
            self._read_until(ready, deadline)
            return
        cond = self._cond
        with cond:
            while not ready():
                if self._error is not None:
                    raise self._error
                if not self._reading:
                    self._reading = True
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self._waiters += 1
                try:
                    cond.wait(left)
                finally:
                    self._waiters -= 1
            else:
                return
        try:
            self._read_until(ready, deadline)
        finally:
            self._release()

    def _release(self) -> None:
        """End this thread's turn as the reader; a waiting thread may take it."""
        with self._lock:
            self._reading = False
            if self._waiters:
                self._cond.notify_all()

    def _read_until(self, ready: Callable[[], bool], deadline: float) -> None:
        """As the reader: read and handle frames until ``ready()``."""
        try:
            while not ready():
                if self._error is not None:
                    raise self._error
                out = self._read_and_handle(deadline)
                if out:
                    try:
                        with self._write_lock:
                            self._sock.sendall(out)
                    except OSError as exc:  # reading on finds what the server said last (GOAWAY) and the end
                        log.debug("gRPC connection: writing %d bytes of control frames failed: %s", len(out), exc)
                if time.monotonic() > deadline and not ready():  # a server that never stops sending (PINGs...)
                    raise TimeoutError
        except (h.ProtocolError, hpack.HPACKError) as exc:
            self._fail(GrpcStatusError(INTERNAL, f"the server broke HTTP/2: {exc}"), h.PROTOCOL_ERROR)
            if not ready():
                raise self._error or GrpcStatusError(INTERNAL, str(exc)) from None
        except (ConnectionError, OSError) as exc:
            if isinstance(exc, TimeoutError | socket.timeout):
                raise TimeoutError from None
            self._fail(GrpcStatusError(UNAVAILABLE, f"connection lost: {exc or type(exc).__name__}"))
            if not ready():
                raise self._error or GrpcStatusError(UNAVAILABLE, str(exc)) from None

    def _fill(self, n: int, deadline: float) -> None:
        buf = self._buf
        sock = self._sock
        while len(buf) < n:
            if self._kernel_timeouts:  # a blocking recv bounded by SO_RCVTIMEO (~ the deadline)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                if abs(left - self._recv_timeout) > _TIMEOUT_SLACK_S:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(left))
                    self._recv_timeout = left
                try:
                    chunk = sock.recv(max(65_536, n - len(buf)))
                except BlockingIOError:  # EAGAIN: SO_RCVTIMEO ran out
                    raise TimeoutError from None
            else:
                if not (self._pending is not None and self._pending()):  # (TLS: bytes decrypted already)
                    left = deadline - time.monotonic()  # the socket's own timeout is the writers' (WRITE_TIMEOUT_S)
                    if left <= 0 or not self._readable(left):
                        raise TimeoutError
                chunk = sock.recv(max(65_536, n - len(buf)))
            if not chunk:
                raise ConnectionError("closed by the server")
            buf += chunk

    def _read_and_handle(self, deadline: float) -> bytes:
        """Read at least one frame and handle every complete frame read; returns the frames to send
        in reply (ACKs, windows)."""
        buf = self._buf
        if len(buf) < 9:
            self._fill(9, deadline)
        head = _HEAD_UNPACK(buf, 0)[0]
        need = 9 + self._check_head(head >> 8, head & 0xFF)
        if len(buf) < need:
            self._fill(need, deadline)
        out = b""
        pos, end = 0, len(buf)
        handle = self._handle
        with self._lock:
            try:
                while end - pos >= 9:
                    head, flags, sid = _HEAD_UNPACK(buf, pos)
                    length = head >> 8
                    if length > MAX_FRAME_IN or not self._settings_seen:
                        self._check_head(length, head & 0xFF)
                    start = pos + 9
                    pos = start + length
                    if pos > end:
                        pos = start - 9
                        break
                    reply = handle(head & 0xFF, flags, sid & h.MAX_WINDOW, bytes(buf[start:pos]))
                    if reply:
                        out += reply
            finally:
                del buf[:pos]
                if self._waiters:
                    self._cond.notify_all()
        return out

    def _check_head(self, length: int, kind: int) -> int:
        """``length`` of a frame of type ``kind`` the server sent.

        Raises:
            ProtocolError: over MAX_FRAME_IN, or not SETTINGS as the server's first frame.
        """
        if length > MAX_FRAME_IN:
            raise h.ProtocolError(f"frame of {length} bytes (max {MAX_FRAME_IN}; not an HTTP/2 gRPC server?)")
        if not self._settings_seen and kind != h.SETTINGS:
            raise h.ProtocolError(f"the server's first frame is of type {kind}, not SETTINGS (not an HTTP/2 server?)")
        return length

    def _handle(self, kind: int, flags: int, sid: int, payload: bytes) -> bytes:
        if self._blocks.pending is not None and kind != h.CONTINUATION:
            raise h.ProtocolError(f"frame type {kind} inside a header block")
        if kind == h.DATA:
            return self._on_data(flags, sid, payload)
        if kind == h.HEADERS:
            if sid == 0:
                raise h.ProtocolError("HEADERS on stream 0")
            if (block := self._blocks.headers(flags, sid, payload)) is not None:
                self._end_headers(*block)
            return b""
        if kind == h.CONTINUATION:
            if (block := self._blocks.continuation(flags, sid, payload)) is not None:
                self._end_headers(*block)
            return b""
        if kind == h.SETTINGS:
            return self._on_settings(flags, payload)
        if kind == h.PING:
            if len(payload) != 8:
                raise h.ProtocolError(f"PING of {len(payload)} bytes")
            return b"" if flags & h.ACK else h.frame(h.PING, h.ACK, 0, payload)
        if kind == h.WINDOW_UPDATE:
            if len(payload) != 4 or h.u32(payload) == 0:
                raise h.ProtocolError("malformed WINDOW_UPDATE")
            if sid == 0:
                self._send_window += h.u32(payload)
                if self._send_window > h.MAX_WINDOW:
                    raise h.ProtocolError("connection send window over 2**31-1")
            elif (st := self._streams.get(sid)) is not None:
                st.send_window += h.u32(payload)
            return b""
        if kind == h.RST_STREAM:
            if len(payload) != 4:
                raise h.ProtocolError("malformed RST_STREAM")
            code = h.u32(payload)
            st = self._streams.get(sid)
            if st is not None and not st.done:
                st.error = Unprocessed() if code == h.REFUSED_STREAM and not st.headers else GrpcStatusError(
                    RST_STATUS.get(code, INTERNAL), f"stream reset by the server (HTTP/2 error {code})")
                st.done = True
            return b""
        if kind == h.GOAWAY:
            if len(payload) < 8:
                raise h.ProtocolError("malformed GOAWAY")
            last, code = h.u32(payload), h.u32(payload, 4)
            self._goaway = True
            log.info("gRPC server sent GOAWAY (last stream %d, error %d %r)", last, code, payload[8:200])
            for st in self._streams.values():
                if st.id > last and not st.done:
                    st.error, st.done = Unprocessed(), True
            return b""
        if kind == h.PUSH_PROMISE:
            raise h.ProtocolError("PUSH_PROMISE though push is disabled")
        return b""  # PRIORITY, unknown types: ignored

    def _end_headers(self, sid: int, flags: int, block: bytes) -> None:
        headers = self._decode(block)  # always (even for a stream given up): keeps the table in step
        st = self._streams.get(sid)
        if st is not None and not st.done:
            st.headers.append(headers)
            if flags & h.END_STREAM:
                st.done = True

    def _decode(self, data: bytes) -> list[tuple[str, str]]:
        """The headers of block ``data``. A block that left the server's dynamic table as it was
        (grpc's answers after the first: indexed fields and literals without indexing) is
        remembered: the same bytes mean the same headers until the table changes."""
        headers = self._known.get(data)
        if headers is not None:
            return headers
        before = self._table_mark()  # holds the front entry: its id cannot be reused meanwhile
        headers = cast(list[tuple[str, str]], self._decoder.decode(data))
        after = self._table_mark()
        if after[1:] == before[1:] and after[0] is before[0]:
            if len(self._known) >= 64:
                self._known.clear()
            self._known[data] = headers
        else:
            self._known.clear()
        return headers

    def _table_mark(self) -> tuple[object, int, int]:
        table = self._decoder.header_table
        entries = table.dynamic_entries
        return (entries[0] if entries else None), len(entries), table.maxsize

    def _on_data(self, flags: int, sid: int, payload: bytes) -> bytes:
        if sid == 0:
            raise h.ProtocolError("DATA on stream 0")
        size = len(payload)
        out = self._recv_window.consume(size)
        st = self._streams.get(sid)
        if st is None or st.done:
            return out
        st.data += h.unpad(flags, payload)
        data = st.data
        if len(data) >= 5:
            declared = int.from_bytes(data[1:5], "big")
            if declared > self._max_message or len(data) > 5 + declared:
                st.error = GrpcStatusError(RESOURCE_EXHAUSTED, f"answer of {declared} bytes (limit "
                                           f"{self._max_message}) or more than one message")
                st.done = True
                return out + h.rst_stream(sid, h.CANCEL)
        if flags & h.END_STREAM:
            st.error, st.done = GrpcStatusError(INTERNAL, "stream ended without trailers"), True
            return out
        st.unacked += size
        if st.unacked >= RECV_WINDOW // 2:
            out += h.window_update(sid, st.unacked)
            st.unacked = 0
        return out

    def _on_settings(self, flags: int, payload: bytes) -> bytes:
        if flags & h.ACK:
            return b""
        self._settings_seen = True
        values = h.parse_settings(payload)
        if h.INITIAL_WINDOW_SIZE in values:
            size = values[h.INITIAL_WINDOW_SIZE]
            if size > h.MAX_WINDOW:
                raise h.ProtocolError(f"SETTINGS_INITIAL_WINDOW_SIZE {size}")
            delta, self._peer_initial_window = size - self._peer_initial_window, size
            for st in self._streams.values():
                st.send_window += delta
        if h.MAX_FRAME_SIZE in values:
            size = values[h.MAX_FRAME_SIZE]
            if not h.DEFAULT_MAX_FRAME <= size <= h.MAX_FRAME_LIMIT:
                raise h.ProtocolError(f"SETTINGS_MAX_FRAME_SIZE {size}")
            self._peer_max_frame = size
        if h.MAX_CONCURRENT_STREAMS in values:
            self._peer_max_streams = max(1, values[h.MAX_CONCURRENT_STREAMS])
        return h.frame(h.SETTINGS, h.ACK, 0)

    # -- ending -------------------------------------------------------------------------------------
    def _fail(self, error: GrpcStatusError, code: int | None = None) -> None:
        with self._cond:
            if self._error is not None:
                return
            self._error = error
            for st in self._streams.values():
                if not st.done:
                    st.error, st.done = error, True
            self._cond.notify_all()
        log.info("gRPC connection failed: %s", error.details)
        if code is not None:
            try:
                with self._write_lock:
                    self._sock.sendall(h.goaway(0, code, error.details.encode()[:200]))
            except OSError:
                pass
        self.close()

    def close_if_idle(self) -> None:
        """Close the connection unless a call still waits on it (that call closes it when done)."""
        with self._cond:
            self._goaway = True
            idle = not self._streams
        if idle:
            self.close()

    def close(self) -> None:
        """Close the socket; calls still waiting fail with UNAVAILABLE (idempotent)."""
        with self._cond:
            self._goaway = True
            if self._error is None:
                self._error = GrpcStatusError(UNAVAILABLE, "connection closed")
                for st in self._streams.values():
                    if not st.done:
                        st.error, st.done = self._error, True
            self._cond.notify_all()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()


def _timeval(seconds: float) -> bytes:
    """``struct timeval`` of ``seconds`` > 0 (never 0, which means "no timeout")."""
    sec = int(seconds)
    return _TIMEVAL.pack(sec, int((seconds - sec) * 1_000_000) or (0 if sec else 1))


def _readable_check(sock: socket.socket) -> Callable[[float], bool]:
    """``readable(timeout_s)`` for ``sock``: True when a read would not block (data, the end, an
    error) within ``timeout_s``. A ``poll`` object (no fd lists built per call) where the platform
    has one; not for concurrent use (the reader's alone)."""
    if not hasattr(select, "poll"):
        return lambda timeout_s: bool(select.select([sock], [], [], timeout_s)[0])
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poll = poller.poll

    def readable(timeout_s: float) -> bool:
        return bool(poll(timeout_s * 1000.0))
    readable.poll = poll  # type: ignore[attr-defined]
    return readable

