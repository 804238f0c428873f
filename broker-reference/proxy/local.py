"""The proxy's "local" mode (Apache RocketMQ's proxy embedded in its broker): sends to the broker
of the proxy's own process skip the remoting connection.

A request goes to the broker's request dispatch as if it had arrived on a connection (its request
hooks — ACL, the request guard, slave refusal — then its processor), and the answer comes back
through :class:`LocalChannel` instead of a socket: no TCP write and read, no framing on either
side. Only the codes in :data:`LOCAL_CODES` take this path: sends, transaction ends and the POP
requests (a held POP is answered later on the same local channel). The others — heartbeats, whose
connection the broker calls back on for transaction checks, DLQ forwards — keep the connection,
as in cluster mode.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rocketmq_sdk.exceptions import RemotingSendRequestError, RemotingTimeoutError
from rocketmq_sdk.protocol.codes import RequestCode, request_name
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand
from rocketmq_sdk.remoting.channel import RequestDispatcher

#: request codes a local broker is asked without a connection
LOCAL_CODES = frozenset(int(c) for c in (RequestCode.SEND_MESSAGE_V2, RequestCode.END_TRANSACTION,
                                          RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE,
                                          RequestCode.CHANGE_MESSAGE_INVISIBLETIME))


class LocalChannel:
    """The broker-side end of the in-process path: what a processor sees as the request's channel
    (``remote_addr`` is the proxy's gRPC address, the born host of messages sent through it).
    Responses written to it resolve the waiting request; it never carries requests from the broker
    (those go over the proxy's connection)."""

    def __init__(self, remote_addr: str, local_addr: str, loop: asyncio.AbstractEventLoop) -> None:
        self.remote_addr = remote_addr
        self.local_addr = local_addr
        self.loop = loop
        self.attributes: dict[str, Any] = {}
        self.closed = False
        self.write_paused = False
        self.last_active = time.monotonic()
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}

    #: the dispatch hands responses over with :meth:`take_response` (no frame encoded and decoded)
    in_process = True

    def write_frame(self, data: bytes) -> None:
        """A response frame (length prefix included): resolves its request."""
        self._resolve(RemotingCommand.decode(data[4:]))

    def take_response(self, cmd: RemotingCommand) -> None:
        """A response from the dispatch: resolves its request with ``cmd`` itself when its header
        fields are strings, as a connection would deliver them; otherwise with the decoded frame."""
        ext = cmd.ext_fields
        if ext and not all(type(v) is str for v in ext.values()):
            cmd = RemotingCommand.decode(cmd.encode()[4:])
        self._resolve(cmd)

    def _resolve(self, cmd: RemotingCommand) -> None:
        fut = self._pending.pop(cmd.opaque, None)
        if fut is not None and not fut.done():
            fut.set_result(cmd)

    def write(self, cmd: RemotingCommand) -> None:
        self.take_response(cmd)

    send = write

    async def invoke(self, cmd: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        raise RemotingSendRequestError("the broker cannot call the proxy back over the local path")

    async def invoke_oneway(self, cmd: RemotingCommand, timeout_ms: float = 3000.0) -> None:
        raise RemotingSendRequestError("the broker cannot call the proxy back over the local path")

    def close(self) -> None:
        self.closed = True
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(RemotingSendRequestError("the local broker stopped"))

    def expect(self, opaque: int) -> asyncio.Future[RemotingCommand]:
        fut: asyncio.Future[RemotingCommand] = self.loop.create_future()
        self._pending[opaque] = fut
        return fut

    def forget(self, opaque: int) -> None:
        self._pending.pop(opaque, None)


class LocalBrokerClient(RemotingClient):
    """The proxy's remoting client when a broker runs in the same process and on the same event
    loop: requests with a code of :data:`LOCAL_CODES` to ``broker_addr`` go to ``server``'s
    dispatch directly; everything else as :class:`RemotingClient`.

    Args:
        server: the broker's remoting server (its dispatcher: hooks and processors).
        broker_addr: the broker's address as routes name it.
        peer_addr: the address the broker sees as the sender (the proxy's gRPC address).
    """

    def __init__(self, server: RequestDispatcher, broker_addr: str, peer_addr: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.local_server = server
        self.local_addr = broker_addr
        self._local: LocalChannel | None = None
        self.peer_addr = peer_addr
        #: requests answered over the local path (benchmarks and tests read it)
        self.local_requests = 0

    def _local_channel(self) -> LocalChannel:
        ch = self._local
        if ch is None or ch.closed:
            ch = self._local = LocalChannel(self.peer_addr, self.local_addr, asyncio.get_running_loop())
        return ch

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_ms: float = 3000.0) -> RemotingCommand:
        if addr != self.local_addr or cmd.code not in LOCAL_CODES:
            return await super().invoke(addr, cmd, timeout_ms)
        hooks = self.rpc_hooks
        if hooks:
            hooks.before_request(addr, cmd)  # e.g. the proxy's own ACL signature
        ch = self._local_channel()
        fut = ch.expect(cmd.opaque)
        self.local_requests += 1
        self.local_server._on_request(ch, cmd)  # type: ignore[arg-type]  # duck-typed Channel
        if not fut.done():
            try:
                return await asyncio.wait_for(fut, timeout_ms / 1000.0)
            except TimeoutError:
                ch.forget(cmd.opaque)
                raise RemotingTimeoutError(addr, timeout_ms, request_name(cmd.code)) from None
        resp = fut.result()
        if hooks:
            hooks.after_response(addr, cmd, resp)
        return resp

    async def close(self, timeout_s: float = 3.0) -> None:
        if self._local is not None:
            self._local.close()
        await super().close(timeout_s)
