"""``Channel``: one remoting TCP connection (either side), and the request dispatch shared by
the client and the server.

A connection is bidirectional (docs/protocol.md §1): each side can send requests, and responses are
matched to requests by ``opaque``. Frames with the RESPONSE flag complete a pending ``invoke``;
other frames are requests handed to the processor registered for their code.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeAlias

from rocketmq_sdk.exceptions import FrameError, RemotingSendRequestError, RemotingTimeoutError
from rocketmq_sdk.protocol.codes import ResponseCode, request_name
from rocketmq_sdk.remoting.busy_poll import BusyPoller
from rocketmq_sdk.remoting.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from rocketmq_sdk.remoting.frame import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder
from rocketmq_sdk.remoting.log_limit import RateLimitedLog

__all__ = ["BufferedChannel", "Channel", "Handler", "Processor", "RequestDispatcher", "ResponseWaiter", "close_channels"]

log = logging.getLogger("rocketmq_sdk.remoting")
#: bad requests and malformed frames: one WARNING line each (traceback at DEBUG), rate-limited
bad_input_log = RateLimitedLog(log)

class ResponseWaiter(Protocol):
    """What :meth:`Channel.expect_response` completes (an ``asyncio.Future`` is one)."""

    def done(self) -> bool: ...

    def set_result(self, response: RemotingCommand) -> Any: ...

    def set_exception(self, error: BaseException) -> Any: ...


Processor: TypeAlias = Callable[
    ["Channel", RemotingCommand], "Awaitable[RemotingCommand | None] | RemotingCommand | None"
]
"""A request handler: ``(channel, request) -> response | None``, async or plain."""
Handler = Processor

_monotonic = time.monotonic
_FLUSH_THRESHOLD = 64 * 1024  # bytes queued before a write is flushed without waiting for the loop
READ_BUFFER_SIZE = 256 * 1024  # bytes per socket read: asyncio's own read size for plain sockets
_read_buffers = threading.local()


class RequestDispatcher:
    """Processor table and channel-close callbacks, shared by ``RemotingClient`` and
    ``RemotingServer``.

    Java behaviour mirrored (docs/protocol.md §1.5): a request whose code has no processor (and no
    ``default_processor``) gets ``REQUEST_CODE_NOT_SUPPORTED`` (3) with remark
    ``" request type <code> not supported"``; a processor that raises gets ``SYSTEM_ERROR`` (1)
    with the exception text; a processor returning None sends nothing; oneway requests are never
    answered; a response copies the request's opaque and serialize type.

    Attributes:
        busy_poller: told by the channels of each read and of each read that answered inline,
            to keep the loop polling after those (a server's ``busy_poll_us``); None (default)
            lets it sleep.
    """

    busy_poller: BusyPoller | None = None

    def __init__(self) -> None:
        self._processors: dict[int, Processor] = {}
        self.default_processor: Processor | None = None
        self._close_callbacks: list[Callable[[Channel], Any]] = []
        self._tasks: set[asyncio.Task] = set()

    def register_processor(self, code: int, handler: Processor) -> None:
        """Handle requests with ``code`` by ``handler(channel, cmd)`` (async or plain function)."""
        self._processors[int(code)] = handler

    def on_channel_close(self, callback: Callable[[Channel], Any]) -> None:
        """Call ``callback(channel)`` (on the event loop) whenever a channel closes."""
        self._close_callbacks.append(callback)

    # -- called by Channel

    def _channel_opened(self, channel: Channel) -> None:
        pass

    def _channel_closed(self, channel: Channel) -> None:
        for callback in self._close_callbacks:
            try:
                callback(channel)
            except Exception:
                log.exception("channel close callback failed for %s", channel.remote_addr)

    def _on_request(self, channel: Channel, cmd: RemotingCommand) -> None:
        handler = self._processors.get(cmd.code) or self.default_processor
        if handler is None:
            log.debug("no processor for request code %d from %s", cmd.code, channel.remote_addr)
            self._reply(channel, cmd, cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                   f" request type {cmd.code} not supported"))
            return
        try:
            result = handler(channel, cmd)
        except Exception as exc:
            self._reply(channel, cmd, self._error_response(channel, cmd, exc))
            return
        if result is None or isinstance(result, RemotingCommand):
            self._reply(channel, cmd, result)
        elif isinstance(result, asyncio.Future):
            # e.g. a broker put waiting for a SYNC_FLUSH group commit: answered from the future's
            # done callback, no Task per request
            result.add_done_callback(functools.partial(self._future_done, channel, cmd))
        elif inspect.isawaitable(result):
            # the processor's own coroutine is the task (answered from its done callback): a close()
            # that cancels it before its first step then cancels the processor itself, where a
            # wrapper coroutine awaiting it would leave it never awaited
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(functools.partial(self._future_done, channel, cmd))
        else:
            self._reply(channel, cmd, result)

    def _future_done(self, channel: Channel, cmd: RemotingCommand, fut: asyncio.Future) -> None:
        if fut.cancelled():
            return  # as a cancelled processor task: no answer
        exc = fut.exception()
        response = self._error_response(channel, cmd, exc) if exc is not None else fut.result()
        self._reply(channel, cmd, response)

    @staticmethod
    def _error_response(channel: Channel, cmd: RemotingCommand, exc: BaseException) -> RemotingCommand:
        bad_input_log.warning("request code %d from %s failed: %s: %s", cmd.code, channel.remote_addr,
                              type(exc).__name__, str(exc)[:200], exc=exc)
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

    #: ``version`` written into every response when set (a reference broker answering as 5.x)
    response_version: int | None = None

    def _reply(self, channel: Channel, request: RemotingCommand, response: RemotingCommand | None) -> None:
        if response is None or request.flag & FLAG_ONEWAY:
            return
        if self.response_version is not None:
            response.version = self.response_version
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        response.serialize_type = request.serialize_type  # C++ clients only read JSON
        if channel.closed:
            log.debug("dropping response to %s: channel closed", channel.remote_addr)
            return
        if channel.in_process:  # the broker's own proxy (local mode): the command itself, no frame
            channel.take_response(response)
        else:
            channel.write_frame(response.encode())  # Channel.write in one call less

    def _cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()


def _expire(fut: asyncio.Future) -> None:
    """Timer callback of :meth:`Channel.invoke`: the response did not come in time."""
    if not fut.done():
        fut.set_exception(TimeoutError())


class Channel(asyncio.Protocol):
    """One remoting connection.

    Attributes:
        remote_addr: ``"ip:port"`` of the peer.
        local_addr: ``"ip:port"`` of this end.
        attributes: free-form dict (the broker attaches client info here).
        closed: True once the connection is closing or closed.
        write_paused: True while the transport reports backpressure (its write buffer is over
            the high mark): a writer that cannot wait for :meth:`invoke`'s drain should take a
            slower path.
        loop: the event loop the channel lives on (its methods are called on that loop only).
        last_active: ``time.monotonic()`` of the last read or write, in seconds.
        on_first_read: called (once, then reset to None) when the next bytes arrive, before
            they are handled; None (default) for nothing. The client watches a new connection's
            first byte with it (a TLS-only server closes a plaintext one without sending any).
    """

    #: False: responses to this channel's requests are written as frames (True: an in-process
    #: channel that takes the response command itself, ``take_response``)
    in_process = False

    def __init__(self, dispatcher: RequestDispatcher, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self._dispatcher = dispatcher
        self._decoder = FrameDecoder(max_frame_length)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self._closed_fut: asyncio.Future[None] = self.loop.create_future()
        self.write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._wbuf: list[bytes] = []
        self._wbuf_size = 0
        self._reading = False  # inside data_received: writes are flushed at its end
        self._answered = False  # something was written during the current read
        self.closed = False
        self.remote_addr = ""
        self.local_addr = ""
        self.attributes: dict[str, Any] = {}
        self.last_active = _monotonic()
        self.on_first_read: Callable[[], object] | None = None

    def __repr__(self) -> str:
        return f"Channel({self.local_addr} -> {self.remote_addr}{', closed' if self.closed else ''})"

    @property
    def transport(self) -> asyncio.Transport | None:
        """The asyncio transport (None before the connection is made)."""
        return self._transport

    @property
    def pending_count(self) -> int:
        """Number of requests waiting for a response on this channel."""
        return len(self._pending)

    def expect_response(self, opaque: int, waiter: ResponseWaiter) -> None:
        """Register ``waiter`` for the response with ``opaque`` (before writing the request).

        When the response arrives ``waiter.set_result(response)`` is called (unless
        ``waiter.done()``); when the channel closes first, ``waiter.set_exception(error)``
        (:class:`RemotingSendRequestError`). :meth:`invoke` does this with an asyncio future;
        callers that complete something else (a producer's callback-driven send) pass their own
        object. The caller owns the timeout: :meth:`forget_response` on expiry.
        """
        self._pending[opaque] = waiter  # type: ignore[assignment]

    def forget_response(self, opaque: int, waiter: ResponseWaiter) -> None:
        """Unregister ``waiter`` (timed out or abandoned) if it still waits for ``opaque``."""
        pending = self._pending
        if pending.get(opaque) is waiter:
            del pending[opaque]

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self.remote_addr = _fmt_addr(transport.get_extra_info("peername"))
        self.local_addr = _fmt_addr(transport.get_extra_info("sockname"))
        self._dispatcher._channel_opened(self)

    def data_received(self, data: bytes | memoryview) -> None:
        """Split ``data`` into frames and handle them; what the handlers write meanwhile goes out
        in one socket write at the end (no loop callback for a request answered inline)."""
        self.last_active = _monotonic()
        if self.on_first_read is not None:
            first, self.on_first_read = self.on_first_read, None
            first()
        poller = self._dispatcher.busy_poller
        if poller is not None:
            poller.on_read()
        try:
            frames = self._decoder.feed(data)
        except FrameError as exc:
            self._protocol_error(exc)
            return
        pending = self._pending
        self._reading = True
        try:
            for frame in frames:
                try:
                    cmd = RemotingCommand.decode(frame)
                except FrameError as exc:
                    self._protocol_error(exc)
                    return
                if cmd.flag & FLAG_RESPONSE:
                    fut = pending.pop(cmd.opaque, None)
                    if fut is None:
                        log.debug("response opaque %d from %s matches no pending request (timed out?)",
                                  cmd.opaque, self.remote_addr)
                    elif not fut.done():
                        fut.set_result(cmd)
                else:
                    self._dispatcher._on_request(self, cmd)
                if self.closed:
                    return
        finally:
            self._reading = False
            if self._wbuf:
                self._flush()
                self._answered = True
            if self._answered:  # answered inline: the client's next request may follow soon
                self._answered = False
                if poller is not None:
                    poller.arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail_pending(f"connection to {self.remote_addr} closed" + (f": {exc}" if exc else ""))
        if not self._closed_fut.done():
            self._closed_fut.set_result(None)
        self._dispatcher._channel_closed(self)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake_drain_waiters()

    # ------------------------------------------------------------------ sending

    def write(self, cmd: RemotingCommand) -> None:
        """Queue one command for writing without waiting.

        Frames written during one event-loop iteration go out in a single socket write (fewer
        syscalls with many requests in flight); the flush runs on the next loop iteration.

        Raises:
            RemotingSendRequestError: the channel is closed.
        """
        if self.closed or self._transport is None:
            raise RemotingSendRequestError(f"channel to {self.remote_addr} is closed")
        self.write_frame(cmd.encode())

    def write_frame(self, data: bytes) -> None:
        """:meth:`write` of an already encoded frame (length prefix included), e.g. a request
        encoded in another thread.

        Raises:
            RemotingSendRequestError: the channel is closed.
        """
        if self.closed or self._transport is None:
            raise RemotingSendRequestError(f"channel to {self.remote_addr} is closed")
        wbuf = self._wbuf
        if not wbuf and not self._reading:  # data_received flushes what is written while it runs
            self.loop.call_soon(self._flush)
        wbuf.append(data)
        self._wbuf_size += len(data)
        self.last_active = _monotonic()
        if self._wbuf_size >= _FLUSH_THRESHOLD:
            self._answered = self._reading
            self._flush()  # bounded buffering; lets the transport report backpressure at once

    def _flush(self) -> None:
        wbuf = self._wbuf
        if not wbuf:
            return
        self._wbuf = []
        self._wbuf_size = 0
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        transport.write(wbuf[0] if len(wbuf) == 1 else b"".join(wbuf))

    send = write

    def take_response(self, cmd: RemotingCommand) -> None:
        """A response from this process's dispatch: written as a frame (an ``in_process``
        channel takes the command itself instead)."""
        self.write(cmd)

    async def _drain(self) -> None:
        while self.write_paused and not self.closed:
            waiter = self.loop.create_future()
            self._drain_waiters.append(waiter)
            await waiter

    async def invoke(self, cmd: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """Send request ``cmd`` and wait for the response with the same opaque.

        Args:
            cmd: the request (its opaque must be unique among this channel's pending requests).
            timeout_ms: how long to wait for the response, in milliseconds.

        Raises:
            RemotingTimeoutError: no response within ``timeout_ms`` (the waiter is removed).
            RemotingSendRequestError: the channel is or becomes closed before the response.
        """
        opaque = cmd.opaque
        fut: asyncio.Future[RemotingCommand] = self.loop.create_future()
        pending = self._pending
        pending[opaque] = fut
        timer = None
        try:
            self.write(cmd)
            if self.write_paused:  # respect backpressure: let the socket buffer drain
                async with asyncio.timeout(timeout_ms / 1000.0):
                    await self._drain()
                    return await fut
            # a plain timer failing the future: cheaper than asyncio.timeout for every request
            timer = self.loop.call_later(timeout_ms / 1000.0, _expire, fut)
            return await fut
        except TimeoutError:
            raise RemotingTimeoutError(self.remote_addr, timeout_ms, request_name(cmd.code)) from None
        finally:
            if timer is not None:
                timer.cancel()
            if pending.get(opaque) is fut:
                del pending[opaque]

    async def invoke_oneway(self, cmd: RemotingCommand, timeout_ms: float = 3000.0) -> None:
        """Send ``cmd`` with the ONEWAY flag; no response is expected.

        Args:
            cmd: the request (its flag gets the ONEWAY bit).
            timeout_ms: how long to wait for the socket buffer to drain when the peer is slow, ms.

        Raises:
            RemotingSendRequestError: the channel is closed.
            RemotingTimeoutError: the write buffer did not drain within ``timeout_ms``.
        """
        cmd.flag |= FLAG_ONEWAY
        self.write(cmd)
        if self.write_paused:
            try:
                async with asyncio.timeout(timeout_ms / 1000.0):
                    await self._drain()
            except TimeoutError:
                raise RemotingTimeoutError(self.remote_addr, timeout_ms, "oneway request") from None

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close the connection; pending requests fail at once with RemotingSendRequestError."""
        if self.closed:
            return
        self._flush()  # what was written before close() still goes out
        self.closed = True
        self._fail_pending(f"channel to {self.remote_addr} closed locally")
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Close the connection at once, discarding unsent data."""
        self._wbuf = []
        self._wbuf_size = 0
        self.close()
        if self._transport is not None:
            self._transport.abort()

    async def wait_closed(self) -> None:
        """Wait until the connection is fully closed (``connection_lost`` ran)."""
        await asyncio.shield(self._closed_fut)

    def _protocol_error(self, exc: FrameError) -> None:
        bad_input_log.warning("closing connection %s -> %s: %s", self.local_addr, self.remote_addr, exc)
        # the waiting requests learn why (e.g. "looks like HTTP"), not only that it closed
        self._fail_pending(f"connection to {self.remote_addr} closed: {exc}")
        self.abort()

    def _fail_pending(self, reason: str) -> None:
        pending, self._pending = self._pending, {}
        for opaque, fut in pending.items():
            if not fut.done():
                fut.set_exception(RemotingSendRequestError(f"{reason} (request opaque {opaque} pending)"))
        self._wake_drain_waiters()

    def _wake_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


class BufferedChannel(Channel, asyncio.BufferedProtocol):
    """A :class:`Channel` read with ``recv_into`` a buffer it does not own.

    asyncio calls :meth:`get_buffer`, fills the buffer and calls :meth:`buffer_updated` in one go
    on the loop thread, and the frame decoder copies what it keeps (each frame once, a partial
    frame into its own buffer), so one buffer can serve every connection read on a thread. A
    plain ``Protocol`` gets a fresh 256 KiB ``bytes`` per read instead, which glibc maps and
    unmaps (``mmap`` + ``mremap`` + ``munmap`` and page faults per read).

    uvloop treats a protocol that is also an ``asyncio.Protocol`` (this class is) as a plain one:
    it calls :meth:`data_received` with a ``bytes`` of exactly the bytes read (copied from its own
    per-loop buffer, so without the 256 KiB allocation); it binds the method once per
    ``set_protocol``, so nothing may replace it on the instance (``on_first_read`` is the hook).

    Args:
        dispatcher: the owning client or server.
        max_frame_length: largest accepted frame, length prefix included, in bytes.
        read_view: the buffer to read into; default one buffer of ``READ_BUFFER_SIZE`` bytes per
            thread (the channel is made on its event loop's thread, where all its reads happen).
    """

    def __init__(self, dispatcher: RequestDispatcher, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
                 read_view: memoryview | None = None) -> None:
        super().__init__(dispatcher, max_frame_length)
        if read_view is None:
            read_view = getattr(_read_buffers, "view", None)
            if read_view is None:
                read_view = _read_buffers.view = memoryview(bytearray(READ_BUFFER_SIZE))
        self._read_view = read_view

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read_view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._read_view[:nbytes])


async def close_channels(channels: list[Channel], timeout_s: float) -> None:
    """Close ``channels`` gracefully; abort those still open after ``timeout_s`` seconds (a peer
    that stopped reading would otherwise keep them open until its unsent data drains)."""
    for channel in channels:
        channel.close()
    if not channels:
        return
    try:
        async with asyncio.timeout(timeout_s):
            await asyncio.gather(*(ch.wait_closed() for ch in channels))
    except TimeoutError:
        for channel in channels:
            if not channel._closed_fut.done():
                log.debug("aborting %r: unsent data did not drain within %.1f s", channel, timeout_s)
                channel.abort()


def _fmt_addr(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        host = addr[0]
        return f"[{host}]:{addr[1]}" if ":" in host else f"{host}:{addr[1]}"
    return str(addr or "")
