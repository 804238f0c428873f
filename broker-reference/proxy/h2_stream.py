"""One gRPC call's HTTP/2 stream on the proxy's own server (``h2_server.py``): the request
messages as they arrive (gRPC's 5-byte prefix, the size limit, END_STREAM), and the send side's
flow control (:class:`Outbound`: the connection's and each stream's send windows, the peer's
largest frame, the transport's write buffer).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from rocketmq_sdk.grpc import http2 as h
from rocketmq_sdk.grpc.status import INTERNAL, RESOURCE_EXHAUSTED

UNIMPLEMENTED = 12


class CallError(Exception):
    """A call ends with gRPC status ``code`` and ``details`` (sent as its trailers)."""

    def __init__(self, code: int, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class ConnectionGone(Exception):
    """The connection closed: nothing more can be sent on any of its streams."""


class ServerStream:
    """A client-opened stream: what the call reads and the state the connection keeps of it.

    Args:
        stream_id: the client's (odd) stream id.
        path: ``:path`` (``/package.Service/Method``).
        metadata: the request's non-pseudo headers (``(name, value)``, names lower case).
        send_window: the peer's SETTINGS_INITIAL_WINDOW_SIZE (bytes it accepts on this stream).
        max_message: the largest request message accepted, bytes (a larger one: RESOURCE_EXHAUSTED).
    """

    __slots__ = ("id", "path", "metadata", "deadline", "send_window", "max_message", "task", "headers_sent",
                 "remote_closed", "local_closed", "reset", "expired", "recv_unacked", "error", "_buf", "_messages",
                 "_waiter", "_window_waiter", "_timer", "_queued")

    def __init__(self, stream_id: int, path: str, metadata: list[tuple[str, str]], send_window: int,
                 max_message: int) -> None:
        self.id = stream_id
        self.path = path
        self.metadata = metadata
        self.deadline: float | None = None  # the loop's clock
        self.send_window = send_window
        self.max_message = max_message
        self.task: asyncio.Task[Any] | None = None
        self.headers_sent = False
        self.remote_closed = False  # END_STREAM received
        self.local_closed = False  # END_STREAM (trailers) or RST_STREAM sent
        self.reset = False  # RST_STREAM received: the call was cancelled by the client
        self.expired = False  # grpc-timeout passed
        self.recv_unacked = 0
        self.error: CallError | None = None  # the request cannot be read (too large, compressed)
        self._buf = bytearray()
        self._messages: deque[bytes] = deque()
        self._queued = 0  # bytes of messages read from the client and not yet by the handler
        self._waiter: asyncio.Future[None] | None = None
        self._window_waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    # -- the request ----------------------------------------------------------------------------
    def on_data(self, payload: bytes, end_stream: bool) -> None:
        """DATA from the client (padding removed): whole gRPC messages become readable."""
        if self.error is None:
            buf = self._buf
            buf += payload
            while len(buf) >= 5:
                if buf[0] != 0:
                    self.error = CallError(INTERNAL, "a compressed message without grpc-encoding" if buf[0] == 1
                                           else f"message flag {buf[0]} (not 0 or 1)")
                    break
                size = int.from_bytes(buf[1:5], "big")
                if size > self.max_message:
                    self.error = CallError(RESOURCE_EXHAUSTED, f"Received message larger than max ({size} vs. "
                                                               f"{self.max_message})")
                    break
                if len(buf) < 5 + size:
                    break
                self._messages.append(bytes(buf[5:5 + size]))
                del buf[:5 + size]
                self._queued += size
                if self._queued > self.max_message:  # a client sending faster than the handler reads
                    self.error = CallError(RESOURCE_EXHAUSTED, f"over {self.max_message} bytes of requests not read")
                    break
            if self.error is not None:
                buf.clear()
        if end_stream:
            self.remote_closed = True
        self._wake()

    def end_remote(self) -> None:
        """END_STREAM on a HEADERS frame (trailers from the client, or a request without DATA)."""
        self.remote_closed = True
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def _next(self) -> bytes | None:
        while True:
            if self.error is not None:
                raise self.error
            if self._messages:
                message = self._messages.popleft()
                self._queued -= len(message)
                return message
            if self.remote_closed:
                if self._buf:
                    raise CallError(INTERNAL, f"the request ended inside a message ({len(self._buf)} bytes)")
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def read_one(self) -> bytes:
        """The one request message of a unary or server-streaming call.

        Raises:
            CallError: none, more than one, too large or compressed.
        """
        message = await self._next()
        if message is None:
            raise CallError(UNIMPLEMENTED, "a unary request without a message")
        if await self._next() is not None:
            raise CallError(UNIMPLEMENTED, "more than one message in a unary request")
        return message

    async def requests(self) -> Any:
        """The request messages of a client-streaming call, as they arrive (an async iterator)."""
        while (message := await self._next()) is not None:
            yield message

    # -- the send window --------------------------------------------------------------------------
    def window_opened(self) -> None:
        w = self._window_waiter
        if w is not None and not w.done():
            w.set_result(None)

    def close_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class Outbound:
    """The send side of one connection: writes frames to ``transport`` within the peer's windows.

    Args:
        transport: the connection's asyncio transport.
    """

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self.transport = transport
        self.window = h.DEFAULT_WINDOW  # the connection's send window
        self.initial_window = h.DEFAULT_WINDOW  # the peer's SETTINGS_INITIAL_WINDOW_SIZE
        self.max_frame = h.DEFAULT_MAX_FRAME  # the peer's SETTINGS_MAX_FRAME_SIZE
        self.closed = False
        self.paused = False  # the transport's buffer is full (pause_writing)
        self._waiting: set[ServerStream] = set()

    def write(self, data: bytes) -> None:
        if not self.closed:
            self.transport.write(data)

    def wake_all(self) -> None:
        """The connection's window grew, the transport drained, or the connection closed."""
        for st in self._waiting:
            st.window_opened()

    async def _wait(self, st: ServerStream) -> None:
        st._window_waiter = fut = asyncio.get_running_loop().create_future()
        self._waiting.add(st)
        try:
            await fut
        finally:
            self._waiting.discard(st)
            st._window_waiter = None
        if self.closed:
            raise ConnectionGone()

    def _take(self, st: ServerStream, want: int) -> int:
        n = min(want, self.window, st.send_window, self.max_frame)
        if n > 0:
            self.window -= n
            st.send_window -= n
        return n

    def try_whole(self, st: ServerStream, payload: bytes) -> bytes | None:
        """DATA frames carrying all of ``payload`` if the windows take it now (else None, nothing taken)."""
        n = len(payload)
        if n > self.window or n > st.send_window or self.paused:
            return None
        self.window -= n
        st.send_window -= n
        if n <= self.max_frame:
            return h.frame(h.DATA, 0, st.id, payload)
        size = self.max_frame
        return b"".join([h.frame(h.DATA, 0, st.id, payload[i:i + size]) for i in range(0, n, size)])

    async def send(self, st: ServerStream, payload: bytes) -> None:
        """``payload`` as DATA frames on ``st``, waiting for window where needed.

        Raises:
            ConnectionGone: the connection closed first.
        """
        if self.closed:
            raise ConnectionGone()
        view = memoryview(payload)
        while view:
            if self.paused:
                await self._wait(st)
                continue
            n = self._take(st, len(view))
            if n <= 0:
                await self._wait(st)
                continue
            self.transport.write(h.frame(h.DATA, 0, st.id, bytes(view[:n])))
            view = view[n:]
