"""``RemotingClient``: asyncio remoting client, one multiplexed connection per address.

Mirrors Java's ``NettyRemotingClient``: connections are opened lazily and shared by every caller
(``opaque`` matches responses to requests, many requests in flight at once); the broker may send
requests back over the same connection (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED...),
handled by processors registered with ``register_processor``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections.abc import Iterable
from functools import partial

from rocketmq_sdk.exceptions import (
    ClientStateError,
    IllegalArgumentError,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from rocketmq_sdk.protocol.codes import request_name
from rocketmq_sdk.remoting.channel import BufferedChannel, Channel, RequestDispatcher, close_channels
from rocketmq_sdk.remoting.command import FLAG_ONEWAY, RemotingCommand
from rocketmq_sdk.remoting.frame import DEFAULT_MAX_FRAME_LENGTH
from rocketmq_sdk.remoting.hooks import HookChain, RPCHook

__all__ = ["RPCHook", "RemotingClient", "client_ssl_context", "parse_addr", "peer_speaks_tls"]

log = logging.getLogger("rocketmq_sdk.remoting.client")


def parse_addr(addr: str) -> tuple[str, int]:
    """Split ``"host:port"`` (or ``"[v6]:port"``) into ``(host, port)``.

    Raises:
        IllegalArgumentError: no port, or a port that is not a number in 1..65535.
    """
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host:
        raise IllegalArgumentError(f"address {addr!r} is not host:port")
    try:
        port_no = int(port)
    except ValueError:
        raise IllegalArgumentError(f"address {addr!r} has an invalid port") from None
    if not 0 < port_no < 65536:
        raise IllegalArgumentError(f"address {addr!r} has an invalid port")
    return host.strip("[]"), port_no


split_addr = parse_addr

#: ``Channel.attributes`` key present until a plaintext connection's peer sends its first byte
_SILENT_PEER = "rocketmq.silent_peer"


def client_ssl_context(trust_cert_path: str | None = None, *, verify: bool = True, cert_path: str | None = None,
                       key_path: str | None = None) -> ssl.SSLContext:
    """A TLS context for clients (Java ``TlsSystemConfig`` client side).

    Args:
        trust_cert_path: PEM file of the CA(s) to trust (Java ``tls.client.trustCertPath``);
            default the system's trust store.
        verify: check the server certificate and host name (default True). Java's default
            (``tls.client.authServer=false``) does not; pass False to mirror it, e.g. against a
            broker with a throwaway self-signed certificate.
        cert_path / key_path: the client's own certificate chain and key (PEM), for servers that
            require client certificates (Java ``tls.client.certPath`` / ``tls.client.keyPath``).

    Raises:
        OSError, ssl.SSLError: unreadable or mismatched PEM files.
    """
    ctx = ssl.create_default_context(cafile=trust_cert_path)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_path:
        ctx.load_cert_chain(cert_path, key_path)
    return ctx


_TLS_REQUIRED = "the server requires TLS: set use_tls=True (or an ssl_context)"


def peer_speaks_tls(addr: str, timeout_s: float) -> bool:
    """Blocking probe: does ``addr`` complete a TLS handshake (certificate not checked)? Used
    only after a plaintext connection was closed without a byte, to name the cause."""
    host, port = parse_addr(addr)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw, \
                client_ssl_context(verify=False).wrap_socket(raw, server_hostname=host):
            return True
    except OSError:
        return False


async def _apeer_speaks_tls(addr: str, timeout_s: float) -> bool:
    """:func:`peer_speaks_tls` for the event loop."""
    host, port = parse_addr(addr)
    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(host, port, ssl=client_ssl_context(verify=False))
    except (OSError, TimeoutError):
        return False
    writer.transport.abort()
    return True


def _watch_first_byte(channel: Channel) -> None:
    """Mark ``channel`` until its peer sends a first byte (``Channel.on_first_read``: the
    steady state costs one attribute test per read): a plaintext client talking to a TLS-only
    server sees the connection closed without a single byte."""
    channel.attributes[_SILENT_PEER] = True
    channel.on_first_read = partial(channel.attributes.pop, _SILENT_PEER, None)


class RemotingClient(RequestDispatcher):
    """Asyncio remoting client. Use it from coroutines running on one event loop.

    Args:
        connect_timeout_ms: TCP connect timeout in milliseconds (default 3000, as Java's
            ``connectTimeoutMillis``).
        max_frame_length: largest accepted incoming frame in bytes, length prefix included
            (default 16 MiB).
        rpc_hooks: objects with ``before_request(addr, cmd)`` / ``after_response(addr, cmd, resp)``;
            a :class:`~rocketmq_sdk.remoting.hooks.HookChain` is shared as given (the client
            instance gives the same one to its blocking connections), a list is copied into a
            new chain; editable as ``client.rpc_hooks``.
        ssl_context: connect with TLS using this context (Java ``useTLS``); None (default)
            for plain TCP. The handshake counts against ``connect_timeout_ms``.
    """

    def __init__(
        self,
        connect_timeout_ms: float = 3000.0,
        *,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        rpc_hooks: Iterable[RPCHook] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__()
        self.connect_timeout_ms = connect_timeout_ms
        self.ssl_context = ssl_context
        self.max_frame_length = max_frame_length
        self.rpc_hooks = HookChain.of(rpc_hooks)
        self._channels: dict[str, Channel] = {}
        self._connect_locks: dict[str, asyncio.Lock] = {}
        self._closed = False

    # ------------------------------------------------------------------ connections

    async def get_channel(self, addr: str) -> Channel:
        """Return the open connection to ``addr``, connecting first if needed.

        Concurrent callers share one connection attempt (a lock per address).

        Raises:
            RemotingConnectError: the connection failed or took longer than ``connect_timeout_ms``.
            ClientStateError: the client is closed.
            IllegalArgumentError: ``addr`` is not ``host:port``.
        """
        channel = self._channels.get(addr)
        if channel is not None and not channel.closed:
            return channel
        if self._closed:
            raise ClientStateError("remoting client is closed")
        lock = self._connect_locks.get(addr)
        if lock is None:
            lock = self._connect_locks[addr] = asyncio.Lock()
        async with lock:
            channel = self._channels.get(addr)
            if channel is not None and not channel.closed:
                return channel
            channel = await self._connect(addr)
            if self._closed:
                channel.close()
                raise ClientStateError("remoting client is closed")
            self._channels[addr] = channel
            return channel

    def writable_channel(self, addr: str) -> Channel | None:
        """The connection to ``addr`` if a frame can be written to it right now (loop thread):
        open and not under backpressure, proven or not (what a oneway write needs: it waits for
        no answer); else None."""
        channel = self._channels.get(addr)
        if channel is None or channel.closed or channel.write_paused:
            return None
        return channel

    def ready_channel(self, addr: str) -> Channel | None:
        """The connection to ``addr`` if a request can be written to it right now (loop thread):
        open, not under backpressure (:attr:`Channel.write_paused`) and its peer proven (a
        plaintext connection that has not yet heard from the server may be refused by a TLS-only
        one); else None (use :meth:`get_channel` / :meth:`invoke`, which connect and wait)."""
        channel = self._channels.get(addr)
        if channel is None or channel.closed or channel.write_paused or _SILENT_PEER in channel.attributes:
            return None
        return channel

    async def _connect(self, addr: str) -> Channel:
        host, port = parse_addr(addr)
        loop = asyncio.get_running_loop()
        ctx = self.ssl_context
        try:
            async with asyncio.timeout(self.connect_timeout_ms / 1000.0):
                _, channel = await loop.create_connection(
                    lambda: BufferedChannel(self, self.max_frame_length), host, port, ssl=ctx)
        except TimeoutError:
            raise RemotingConnectError(addr, f"timed out after {self.connect_timeout_ms:.0f} ms"
                                       + (" (TLS handshake included; is the server TLS?)" if ctx else "")) from None
        except ssl.SSLError as exc:
            raise RemotingConnectError(addr, f"TLS handshake failed: {exc}") from exc
        except OSError as exc:
            raise RemotingConnectError(addr, f"TLS connection failed: {exc}" if ctx else str(exc)) from None
        if ctx is None:
            _watch_first_byte(channel)
        log.debug("connected to %s from %s%s", addr, channel.local_addr, " (TLS)" if ctx else "")
        return channel

    async def _requires_tls(self, addr: str, channel: Channel) -> bool:
        """After ``channel`` (plaintext) closed without a byte from the peer: probe once whether
        the server wants TLS (a TLS-only server closes plaintext connections at once)."""
        probe = channel.attributes.get("rocketmq.tls_probe")
        if probe is None:
            probe = channel.attributes["rocketmq.tls_probe"] = asyncio.ensure_future(
                _apeer_speaks_tls(addr, min(self.connect_timeout_ms / 1000.0, 3.0)))
        return await asyncio.shield(probe)

    def _channel_closed(self, channel: Channel) -> None:
        for addr, known in list(self._channels.items()):
            if known is channel:
                del self._channels[addr]
                log.debug("connection to %s closed", addr)
        super()._channel_closed(channel)

    def close_connection(self, addr: str) -> None:
        """Close the connection to ``addr`` (if any); its pending requests fail at once."""
        channel = self._channels.pop(addr, None)
        if channel is not None:
            channel.close()

    close_channel = close_connection

    @property
    def addresses(self) -> list[str]:
        """Addresses with an open connection."""
        return [a for a, ch in self._channels.items() if not ch.closed]

    # ------------------------------------------------------------------ requests

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_ms: float = 3000.0) -> RemotingCommand:
        """Send request ``cmd`` to ``addr`` and return the response.

        The timeout covers connecting and waiting, as in Java's ``invokeSync``.

        Args:
            addr: ``"host:port"``.
            cmd: the request.
            timeout_ms: total time allowed, in milliseconds (default 3000).

        Raises:
            RemotingConnectError: cannot connect (TLS handshake included), or the server closed a
                plaintext connection without sending a byte and turns out to require TLS.
            RemotingTimeoutError: no response in time (the waiter is removed).
            RemotingSendRequestError: the connection closed before the response arrived.
            ClientStateError: the client is closed.
        """
        start = time.monotonic()
        hooks = self.rpc_hooks
        if hooks:
            hooks.before_request(addr, cmd)
        channel = await self.get_channel(addr)
        remaining = timeout_ms - (time.monotonic() - start) * 1000.0
        if remaining <= 0:
            raise RemotingTimeoutError(addr, timeout_ms, request_name(cmd.code))
        try:
            resp = await channel.invoke(cmd, remaining)
        except RemotingSendRequestError as exc:
            if channel.closed and channel.attributes.get(_SILENT_PEER) and await self._requires_tls(addr, channel):
                raise RemotingConnectError(addr, _TLS_REQUIRED) from exc
            raise
        if hooks:
            hooks.after_response(addr, cmd, resp)
        return resp

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand, timeout_ms: float = 3000.0) -> None:
        """Send ``cmd`` to ``addr`` with the ONEWAY flag set; nothing waits for an answer.

        Raises:
            RemotingConnectError: cannot connect.
            RemotingSendRequestError: the connection is closed.
            RemotingTimeoutError: the socket buffer did not drain within ``timeout_ms``.
            ClientStateError: the client is closed.
        """
        cmd.flag |= FLAG_ONEWAY
        if self.rpc_hooks:
            self.rpc_hooks.before_request(addr, cmd)
        channel = await self.get_channel(addr)
        await channel.invoke_oneway(cmd, timeout_ms)

    async def close(self, timeout_s: float = 3.0) -> None:
        """Close every connection; pending requests fail with ``RemotingSendRequestError``.

        Args:
            timeout_s: how long queued data may take to reach a peer before the connection is
                aborted, in seconds.
        """
        self._closed = True
        channels = list(self._channels.values())
        self._channels.clear()
        self._cancel_tasks()
        await close_channels(channels, timeout_s)
