"""``RemotingServer``: asyncio remoting server used by the reference broker and name server.

Mirrors Java's ``NettyRemotingServer``: requests go to the processor registered for their code
(docs/protocol.md §1.5 rules in ``RequestDispatcher``), a malformed or oversized frame closes only its own
connection, idle connections are closed after ``idle_timeout_s`` (Java
``serverChannelMaxIdleTimeSeconds`` = 120), and a ``Channel`` can send requests to the client
over the client's own connection.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable

from rocketmq_sdk.exceptions import ClientStateError, IllegalArgumentError
from rocketmq_sdk.remoting.busy_poll import BusyPoller
from rocketmq_sdk.remoting.channel import BufferedChannel, Channel, RequestDispatcher, close_channels
from rocketmq_sdk.remoting.command import RemotingCommand
from rocketmq_sdk.remoting.frame import DEFAULT_MAX_FRAME_LENGTH

__all__ = ["RemotingServer", "RequestHook", "server_ssl_context"]

RequestHook = Callable[[Channel, RemotingCommand], "RemotingCommand | None"]

log = logging.getLogger("rocketmq_sdk.remoting.server")


def server_ssl_context(cert_path: str, key_path: str | None = None, *,
                       client_ca_path: str | None = None) -> ssl.SSLContext:
    """A TLS context for a server (Java ``tls.server.certPath`` / ``tls.server.keyPath``).

    Args:
        cert_path: PEM certificate chain of the server.
        key_path: PEM private key (None when it is inside ``cert_path``).
        client_ca_path: when given, clients must present a certificate signed by these CAs
            (Java ``tls.server.need.client.auth=require`` with ``tls.server.trustCertPath``).

    Raises:
        OSError, ssl.SSLError: unreadable or mismatched files.
    """
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert_path, key_path)
    if client_ca_path:
        ctx.load_verify_locations(client_ca_path)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class RemotingServer(RequestDispatcher):
    """Asyncio remoting server.

    Args:
        max_frame_length: largest accepted frame in bytes, length prefix included (default 16 MiB).
        idle_timeout_s: close connections with no read or write for this many seconds
            (default 120; 0 or None disables it).
        name: used in log messages.
        ssl_context: serve TLS only, with this context (Java ``tls.server.mode=enforcing``; the
            permissive mode that sniffs the first byte is not offered); None (default) for plain
            TCP. Read at :meth:`start`, so it may also be set as the ``ssl_context`` attribute
            before that. A plaintext client's connection is closed at its first bytes.
        busy_poll_us: keep the event loop polling for up to this many µs after a read whose
            requests were answered inline, instead of sleeping until the next request (adaptive, see
            :class:`~rocketmq_sdk.remoting.busy_poll.BusyPoller`); 0 (default) disables it. Worth
            it on virtual machines where waking an idle vCPU is dear, for a server whose loop has
            a process of its own; not a Java setting (Netty's epoll sleeps).

    Raises:
        IllegalArgumentError: negative ``busy_poll_us``.
    """

    def __init__(
        self,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        *,
        idle_timeout_s: float | None = 120.0,
        name: str = "remoting-server",
        ssl_context: ssl.SSLContext | None = None,
        busy_poll_us: float = 0,
    ) -> None:
        super().__init__()
        if busy_poll_us < 0:
            raise IllegalArgumentError(f"busy_poll_us must be >= 0, got {busy_poll_us!r}")
        self.busy_poll_us = busy_poll_us
        self.ssl_context = ssl_context
        self.idle_timeout_s = idle_timeout_s
        self.max_frame_length = max_frame_length
        self.name = name
        self.host: str | None = None
        self.port: int = 0
        self._server: asyncio.Server | None = None
        self._channels: set[Channel] = set()
        self._idle_task: asyncio.Task | None = None
        self._request_hooks: list[RequestHook] = []

    def add_request_hook(self, hook: RequestHook) -> None:
        """Run ``hook(channel, cmd)`` before a request goes to its processor (Java server RPC hook
        ``doBeforeRequest``, e.g. the broker's ACL check). A returned response is sent instead of
        running the processor (never for oneway requests); None lets the request through; an
        exception becomes ``SYSTEM_ERROR`` like a failing processor. Requests whose code has no
        processor are answered ``REQUEST_CODE_NOT_SUPPORTED`` without running hooks, as in Java."""
        self._request_hooks.append(hook)
        # only servers with hooks pay for them: the instance attribute shadows the plain dispatch
        self._on_request = self._on_request_hooked  # type: ignore[method-assign]

    def _on_request_hooked(self, channel: Channel, cmd: RemotingCommand) -> None:
        if cmd.code in self._processors or self.default_processor is not None:
            for hook in self._request_hooks:
                try:
                    refusal = hook(channel, cmd)
                except Exception as exc:
                    self._reply(channel, cmd, self._error_response(channel, cmd, exc))
                    return
                if refusal is not None:
                    self._reply(channel, cmd, refusal)
                    return
        RequestDispatcher._on_request(self, channel, cmd)  # the plain dispatch this shadows

    @property
    def channels(self) -> set[Channel]:
        """A snapshot of the open connections."""
        return {ch for ch in self._channels if not ch.closed}

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen on ``host:port`` and return the bound port (a free one with ``port=0``).

        Raises:
            ClientStateError: already started.
            OSError: the address cannot be bound.
        """
        if self._server is not None:
            raise ClientStateError(f"{self.name} already started on {self.host}:{self.port}")
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            # connections read with recv_into one buffer per loop thread (BufferedChannel)
            lambda: BufferedChannel(self, self.max_frame_length), host, port, reuse_address=True, backlog=1024,
            ssl=self.ssl_context)
        self.host = host
        self.port = self._server.sockets[0].getsockname()[1]
        if self.busy_poll_us:
            self.busy_poller = BusyPoller(loop, self.busy_poll_us)
        if self.idle_timeout_s:
            self._idle_task = loop.create_task(self._close_idle_channels(self.idle_timeout_s))
        log.info("%s listening on %s:%d%s%s", self.name, host, self.port, " (TLS)" if self.ssl_context else "",
                 f" (busy poll up to {self.busy_poll_us:g} µs after answers)" if self.busy_poll_us else "")
        return self.port

    async def stop(self, timeout_s: float = 3.0) -> None:
        """Stop listening, close every connection and cancel running processors. Idempotent.

        Args:
            timeout_s: how long queued data may take to reach the peers before the connections
                are aborted, in seconds.
        """
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        if self.busy_poller is not None:
            self.busy_poller.close()
            self.busy_poller = None
        if self._idle_task is not None:
            self._idle_task.cancel()
            self._idle_task = None
        channels = list(self._channels)
        self._cancel_tasks()
        await close_channels(channels, timeout_s)
        try:
            async with asyncio.timeout(timeout_s):
                await server.wait_closed()
        except TimeoutError:
            log.warning("%s: listener did not close within %.1f s", self.name, timeout_s)
        log.info("%s on %s:%s stopped", self.name, self.host, self.port)

    def _channel_opened(self, channel: Channel) -> None:
        self._channels.add(channel)
        log.debug("%s: connection from %s", self.name, channel.remote_addr)

    def _channel_closed(self, channel: Channel) -> None:
        self._channels.discard(channel)
        log.debug("%s: connection from %s closed", self.name, channel.remote_addr)
        super()._channel_closed(channel)

    async def _close_idle_channels(self, idle_s: float) -> None:
        period = min(max(idle_s / 4.0, 0.05), 10.0)
        while True:
            await asyncio.sleep(period)
            cutoff = time.monotonic() - idle_s
            for channel in list(self._channels):
                if channel.last_active < cutoff and not channel.closed:
                    log.info("%s: closing connection from %s, idle for %.0f s", self.name,
                             channel.remote_addr, idle_s)
                    channel.close()
