"""Calls on the proxy's own gRPC server (``h2_server.py``): the methods served (:class:`Methods`),
the context a handler gets (:class:`CallContext`, the part of grpc.aio's ``ServicerContext`` the
proxy's handlers use), and one call run from its request to its trailers (:func:`run_call`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rocketmq_sdk.grpc import http2 as h
from rocketmq_sdk.grpc.status import CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNKNOWN, encode_message

from .h2_stream import CallError, ConnectionGone, Outbound, ServerStream

log = logging.getLogger("rocketmq_broker.proxy")

#: kinds of RPC
UNARY, SERVER_STREAMING, BIDI_STREAMING = "unary", "server_streaming", "bidi_streaming"

#: the response's first header block: ``:status 200`` (static index 8), content-type application/grpc
RESPONSE_HEAD = b"\x88" + h.literal(h.CONTENT_TYPE, "application/grpc")
TRAILERS_OK = h.literal("grpc-status", "0")


def trailers(code: int, details: str = "") -> bytes:
    """A trailer block: ``grpc-status`` and, when given, ``grpc-message`` (percent-encoded)."""
    block = h.literal("grpc-status", str(code))
    return block + h.literal("grpc-message", encode_message(details)) if details else block


@dataclass(frozen=True)
class Method:
    """One served RPC: its ``kind`` and ``handler`` (grpc.aio's behaviour-function signatures:
    ``(request bytes, context)`` returning bytes, or an async iterator of bytes for streaming
    answers; a bidi handler gets an async iterator of request bytes instead)."""

    kind: str
    handler: Callable[..., Any]


class AbortError(Exception):
    """Raised by :meth:`CallContext.abort`: the call ends with its status."""

    def __init__(self, code: int, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class CallContext:
    """What a handler may ask of its call (grpc.aio ``ServicerContext``'s names and meaning).

    Args:
        stream: the call's stream (metadata, deadline).
        peer: the client as grpc writes it (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``).
    """

    __slots__ = ("_stream", "_peer", "_callbacks", "trailing_metadata")

    def __init__(self, stream: ServerStream, peer: str) -> None:
        self._stream = stream
        self._peer = peer
        self._callbacks: list[Callable[[CallContext], None]] = []
        self.trailing_metadata: tuple[tuple[str, str], ...] = ()

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        """The request's metadata: ``(name, value)`` pairs, names lower case, without pseudo-headers."""
        return tuple(self._stream.metadata)

    def peer(self) -> str:
        """The client's address, ``ipv4:host:port`` or ``ipv6:[host]:port``."""
        return self._peer

    def time_remaining(self) -> float | None:
        """Seconds left until the call's ``grpc-timeout`` (None: the client set no deadline)."""
        deadline = self._stream.deadline
        if deadline is None:
            return None
        return max(0.0, deadline - asyncio.get_running_loop().time())

    async def abort(self, code: Any, details: str = "") -> None:
        """End the call with status ``code`` (a ``grpc.StatusCode`` or its number) and ``details``.

        Raises:
            AbortError: always (the handler stops here).
        """
        number = code.value[0] if hasattr(code, "value") else int(code)
        raise AbortError(number, details)

    def set_trailing_metadata(self, metadata: tuple[tuple[str, str], ...]) -> None:
        """Metadata sent with the status in the trailers."""
        self.trailing_metadata = tuple(metadata)

    def add_done_callback(self, callback: Callable[[CallContext], None]) -> None:
        """Call ``callback(context)`` once the call has ended (answered, failed or cancelled)."""
        self._callbacks.append(callback)

    def cancelled(self) -> bool:
        """True when the client cancelled the call (RST_STREAM) or its deadline passed."""
        return self._stream.reset or self._stream.expired

    def _done(self) -> None:
        for cb in self._callbacks:
            try:
                cb(self)
            except Exception:  # noqa: BLE001 - one callback's failure does not stop the others
                log.exception("done callback of a gRPC call failed")


class _Sender:
    """The answer's frames on one stream: headers first, messages within the windows, trailers."""

    __slots__ = ("out", "st", "max_message")

    def __init__(self, out: Outbound, st: ServerStream, max_message: int) -> None:
        self.out, self.st, self.max_message = out, st, max_message

    def _check(self, message: bytes) -> None:
        if len(message) > self.max_message:
            raise CallError(RESOURCE_EXHAUSTED, f"Sent message larger than max ({len(message)} vs. {self.max_message})")

    async def message(self, message: bytes) -> None:
        self._check(message)
        out, st = self.out, self.st
        payload = h.grpc_message(message)
        head = b""
        if not st.headers_sent:
            st.headers_sent = True
            head = h.header_frames(st.id, RESPONSE_HEAD, out.max_frame)
        data = out.try_whole(st, payload)
        if data is not None:
            out.write(head + data)
            return
        if head:
            out.write(head)
        await out.send(st, payload)

    def unary(self, message: bytes, block: bytes) -> bool:
        """Headers, ``message`` and trailer ``block`` in one write when the windows allow (True)."""
        self._check(message)
        out, st = self.out, self.st
        data = out.try_whole(st, h.grpc_message(message))
        if data is None:
            return False
        st.headers_sent = st.local_closed = True
        out.write(h.header_frames(st.id, RESPONSE_HEAD, out.max_frame) + data
                  + h.header_frames(st.id, block, out.max_frame, h.END_STREAM) + self._reset_tail())
        return True

    def finish(self, block: bytes) -> None:
        """The trailers (trailers-only: with ``:status`` and content-type when nothing was sent)."""
        out, st = self.out, self.st
        if st.local_closed:
            return
        st.local_closed = True
        if not st.headers_sent:
            st.headers_sent = True
            block = RESPONSE_HEAD + block
        out.write(h.header_frames(st.id, block, out.max_frame, h.END_STREAM) + self._reset_tail())

    def _reset_tail(self) -> bytes:
        # answered before the client finished its request: tell it to stop sending (RFC 9113 §8.1)
        return b"" if self.st.remote_closed else h.rst_stream(self.st.id, h.NO_ERROR)


def finish_call(out: Outbound, st: ServerStream, code: int, details: str) -> None:
    """End the call on ``st`` now with status ``code`` and ``details`` (nothing if already ended)."""
    _Sender(out, st, 0).finish(trailers(code, details))


def _trailer_block(code: int, details: str, ctx: CallContext) -> bytes:
    block = trailers(code, details)
    for k, v in ctx.trailing_metadata:
        block += h.literal(k, v)
    return block


async def run_call(method: Method, st: ServerStream, out: Outbound, peer: str, max_message: int) -> None:
    """Run one call on ``st``: read the request, call the handler, send the answer and the status.
    A handler's error that is not an abort ends the call with UNKNOWN (as grpc does); a reset
    from the client cancels the handler and sends nothing more; a passed deadline ends it with
    DEADLINE_EXCEEDED."""
    ctx = CallContext(st, peer)
    send = _Sender(out, st, max_message)
    code, details = 0, ""
    try:
        if method.kind == UNARY:
            answer = await method.handler(await st.read_one(), ctx)
            if not ctx.trailing_metadata and send.unary(answer, TRAILERS_OK):
                return
            await send.message(answer)
        elif method.kind == SERVER_STREAMING:
            async for answer in method.handler(await st.read_one(), ctx):
                await send.message(answer)
        else:
            async for answer in method.handler(st.requests(), ctx):
                await send.message(answer)
    except (AbortError, CallError) as exc:
        code, details = exc.code, exc.details
    except ConnectionGone:
        return
    except asyncio.CancelledError:
        if st.expired:
            code, details = DEADLINE_EXCEEDED, "Deadline Exceeded"
        elif st.reset or out.closed:
            return  # the client gave the call up (or the connection went): nobody to answer
        else:
            code, details = CANCELLED, "the server is shutting down"
    except Exception as exc:  # noqa: BLE001 - answered as grpc does: UNKNOWN
        log.exception("gRPC call %s failed", st.path)
        code, details = UNKNOWN, f"Unexpected {type(exc).__name__}"
    finally:
        ctx._done()
    if not st.reset:
        send.finish(_trailer_block(code, details, ctx) if code or details or ctx.trailing_metadata else TRAILERS_OK)


def deadline_of(value: str | None, now: float) -> float | None:
    """The loop-clock deadline of a ``grpc-timeout`` header (None: absent).

    Raises:
        CallError: malformed (INTERNAL, as grpc answers it).
    """
    if value is None:
        return None
    try:
        return now + h.parse_grpc_timeout(value)
    except ValueError as exc:
        raise CallError(13, str(exc)) from None

