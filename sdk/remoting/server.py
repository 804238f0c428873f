"""``RemotingServer``: the listening side used by the reference broker and name server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from .channel import Channel, Handler

log = logging.getLogger("rocketmq_sdk.remoting")


class RemotingServer:
    """Asyncio TCP server speaking the remoting protocol.

    Handlers: ``handler(channel, request) -> RemotingCommand | None`` (or an awaitable of it).
    Unknown codes get REQUEST_CODE_NOT_SUPPORTED unless a ``default_processor`` is set; a handler
    exception becomes SYSTEM_ERROR with the exception text; oneway requests are never answered;
    malformed or oversized frames close that connection only.
    """

    def __init__(self, max_frame_length: int = 16 * 1024 * 1024) -> None:
        self._processors: dict[int, Handler] = {}
        self.default_processor: Handler | None = None
        self._close_callbacks: list[Callable[[Channel], Any]] = []
        self._server: asyncio.AbstractServer | None = None
        self.channels: set[Channel] = set()
        self._max_frame = max_frame_length
        self.port = 0

    def register_processor(self, code: int, handler: Handler) -> None:
        self._processors[int(code)] = handler

    def on_channel_close(self, callback: Callable[[Channel], Any]) -> None:
        self._close_callbacks.append(callback)

    def _closed(self, ch: Channel) -> None:
        self.channels.discard(ch)
        for cb in self._close_callbacks:
            try:
                cb(ch)
            except Exception:  # noqa: BLE001
                log.exception("channel close callback failed")

    def _make_channel(self) -> Channel:
        ch = Channel(self._processors, self._default_dispatch, on_close=self._closed, max_frame_length=self._max_frame)
        self.channels.add(ch)
        return ch

    def _default_dispatch(self, ch: Channel, cmd):
        if self.default_processor is not None:
            return self.default_processor(ch, cmd)
        if cmd.is_oneway:
            return None
        from ..protocol.codes import ResponseCode
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen; return the bound port (``port=0`` picks a free one)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._make_channel, host, port, reuse_address=True, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for ch in list(self.channels):
                ch.close()
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except TimeoutError:
                pass
            self._server = None
