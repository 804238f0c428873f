"""One TCP connection carrying remoting commands both ways, used by client and server.

Responses are matched to their requests by opaque; frames without the RESPONSE bit are
requests from the peer and go to the registered processors (the broker's requests to a client
arrive on the client's own connection).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..exceptions import FrameError, RemotingSendRequestError, RemotingTimeoutError
from ..protocol.codes import ResponseCode
from .command import RemotingCommand
from .frame import FrameDecoder

log = logging.getLogger("rocketmq_sdk.remoting")

Handler = Callable[["Channel", RemotingCommand], "RemotingCommand | None | Awaitable[RemotingCommand | None]"]


class Channel(asyncio.Protocol):
    """An asyncio protocol for one connection.

    Attributes:
        remote_addr: ``"ip:port"`` of the peer.
        attributes: free-form dict (the broker keeps client ids here).
    """

    def __init__(self, processors: dict[int, Handler], default_processor: Handler | None = None,
                 on_close: Callable[[Channel], Any] | None = None,
                 max_frame_length: int = 16 * 1024 * 1024) -> None:
        self._processors = processors
        self._default = default_processor
        self._on_close = on_close
        self._decoder = FrameDecoder(max_frame_length)
        self._pending: dict[int, asyncio.Future] = {}
        self.transport: asyncio.Transport | None = None
        self.remote_addr = ""
        self.local_addr = ""
        self.attributes: dict[str, Any] = {}
        self.closed = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._loop = asyncio.get_running_loop()

    # -- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername") or ("?", 0)
        local = transport.get_extra_info("sockname") or ("?", 0)
        self.remote_addr = f"{peer[0]}:{peer[1]}"
        self.local_addr = f"{local[0]}:{local[1]}"

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except FrameError as exc:
            log.warning("closing connection %s: %s", self.remote_addr, exc)
            self.close()
            return
        for frame in frames:
            try:
                cmd = RemotingCommand.decode(frame)
            except FrameError as exc:
                log.warning("closing connection %s: %s", self.remote_addr, exc)
                self.close()
                return
            if cmd.is_response:
                fut = self._pending.pop(cmd.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(cmd)
                else:
                    log.debug("response for unknown opaque %s from %s", cmd.opaque, self.remote_addr)
            else:
                self._dispatch(cmd)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()
        self._can_write.set()
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(RemotingSendRequestError(f"connection to {self.remote_addr} closed"))
        if self._on_close is not None:
            try:
                self._on_close(self)
            except Exception:  # noqa: BLE001 - a close callback must not break the loop
                log.exception("channel close callback failed")

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # -- requests from the peer ----------------------------------------------------------------
    def _dispatch(self, cmd: RemotingCommand) -> None:
        handler = self._processors.get(cmd.code, self._default)
        if handler is None:
            if not cmd.is_oneway:
                self.send(cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                       f" request type {cmd.code} not supported"))
            return
        try:
            result = handler(self, cmd)
        except Exception as exc:  # noqa: BLE001 - mirrored as SYSTEM_ERROR like the Java server
            log.exception("processor for code %s failed", cmd.code)
            if not cmd.is_oneway:
                self.send(cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"))
            return
        if inspect.isawaitable(result):
            task = self._loop.create_task(self._finish(cmd, result))
            task.add_done_callback(_consume_task_exception)
        elif result is not None and not cmd.is_oneway:
            self.send(result)

    async def _finish(self, cmd: RemotingCommand, awaitable: Awaitable) -> None:
        try:
            result = await awaitable
        except Exception as exc:  # noqa: BLE001
            log.exception("processor for code %s failed", cmd.code)
            result = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if result is not None and not cmd.is_oneway and not self.closed.is_set():
            self.send(result)

    # -- writing -------------------------------------------------------------------------------
    def send(self, cmd: RemotingCommand) -> None:
        """Write a command now (no flow control wait)."""
        if self.transport is None or self.transport.is_closing():
            raise RemotingSendRequestError(f"connection to {self.remote_addr} is closed")
        self.transport.write(cmd.encode())

    async def invoke(self, cmd: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """Send a request and wait for its response.

        Raises:
            RemotingTimeoutError: no response within ``timeout_ms``.
            RemotingSendRequestError: the connection is or becomes closed.
        """
        if not self._can_write.is_set():
            await self._can_write.wait()
        fut = self._loop.create_future()
        opaque = cmd.opaque
        self._pending[opaque] = fut
        timer = self._loop.call_later(timeout_ms / 1000.0, _expire, fut,
                                      RemotingTimeoutError(self.remote_addr, timeout_ms, f"request code {cmd.code}"))
        try:
            self.send(cmd)
            return await fut
        finally:
            timer.cancel()
            self._pending.pop(opaque, None)

    async def invoke_oneway(self, cmd: RemotingCommand) -> None:
        """Send a request flagged oneway; no response is expected."""
        cmd.flag |= 0x2
        if not self._can_write.is_set():
            await self._can_write.wait()
        self.send(cmd)

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _expire(fut: asyncio.Future, exc: Exception) -> None:
    if not fut.done():
        fut.set_exception(exc)


def _consume_task_exception(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.debug("processor task failed: %s", task.exception())
