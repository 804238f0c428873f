"""``RemotingClient``: one multiplexed connection per address, request/response by opaque."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from ..exceptions import RemotingConnectError
from .channel import Channel, Handler
from .command import RemotingCommand

log = logging.getLogger("rocketmq_sdk.remoting")


class RPCHook(Protocol):
    """Called around every request (e.g. ACL signing)."""

    def before_request(self, addr: str, cmd: RemotingCommand) -> None: ...

    def after_response(self, addr: str, cmd: RemotingCommand, response: RemotingCommand) -> None: ...


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


class RemotingClient:
    """Asyncio remoting client; must be used from one event loop.

    Args:
        connect_timeout_ms: TCP connect timeout (default 3000 ms, Java's).
    """

    def __init__(self, connect_timeout_ms: float = 3000) -> None:
        self.connect_timeout_ms = connect_timeout_ms
        self._channels: dict[str, Channel] = {}
        self._connecting: dict[str, asyncio.Future] = {}
        self._processors: dict[int, Handler] = {}
        self.rpc_hooks: list[RPCHook] = []
        self._closed = False

    def register_processor(self, code: int, handler: Handler) -> None:
        """Serve server→client requests of ``code`` arriving on our connections."""
        self._processors[int(code)] = handler

    async def get_channel(self, addr: str) -> Channel:
        """The open channel to ``addr``, connecting once if needed (concurrent callers share it).

        Raises:
            RemotingConnectError: the connection could not be made within the timeout.
        """
        ch = self._channels.get(addr)
        if ch is not None and not ch.closed.is_set():
            return ch
        fut = self._connecting.get(addr)
        if fut is None:
            loop = asyncio.get_running_loop()
            fut = loop.create_future()
            self._connecting[addr] = fut
            try:
                ch = await self._connect(addr)
                self._channels[addr] = ch
                fut.set_result(ch)
            except BaseException as exc:
                fut.set_exception(exc)
                fut.exception()  # mark retrieved
                raise
            finally:
                self._connecting.pop(addr, None)
            return ch
        return await asyncio.shield(fut)

    async def _connect(self, addr: str) -> Channel:
        if self._closed:
            raise RemotingConnectError(addr, "client closed")
        host, port = split_addr(addr)
        loop = asyncio.get_running_loop()

        def on_close(ch: Channel) -> None:
            if self._channels.get(addr) is ch:
                del self._channels[addr]

        try:
            _t, ch = await asyncio.wait_for(
                loop.create_connection(lambda: Channel(self._processors, on_close=on_close), host, port),
                self.connect_timeout_ms / 1000.0)
        except (OSError, TimeoutError) as exc:
            raise RemotingConnectError(addr, str(exc) or type(exc).__name__) from exc
        log.debug("connected to %s", addr)
        return ch

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_ms: float = 3000) -> RemotingCommand:
        """Send ``cmd`` to ``addr`` and return the response.

        Raises:
            RemotingConnectError, RemotingTimeoutError, RemotingSendRequestError.
        """
        for hook in self.rpc_hooks:
            hook.before_request(addr, cmd)
        ch = await self.get_channel(addr)
        resp = await ch.invoke(cmd, timeout_ms)
        for hook in self.rpc_hooks:
            hook.after_response(addr, cmd, resp)
        return resp

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        """Send ``cmd`` with the oneway flag; nothing is awaited but the write."""
        for hook in self.rpc_hooks:
            hook.before_request(addr, cmd)
        ch = await self.get_channel(addr)
        await ch.invoke_oneway(cmd)

    def close_channel(self, addr: str) -> None:
        ch = self._channels.pop(addr, None)
        if ch is not None:
            ch.close()

    async def close(self) -> None:
        """Close every connection; their pending requests fail at once."""
        self._closed = True
        channels = list(self._channels.values())
        self._channels.clear()
        for ch in channels:
            ch.close()
        for ch in channels:
            try:
                await asyncio.wait_for(ch.closed.wait(), 1.0)
            except TimeoutError:
                pass
