"""``GrpcProxy``: the 5.x gRPC endpoint of the reference broker (Apache RocketMQ's proxy): in
cluster mode a gRPC server (our own HTTP/2 server, ``h2_server.py``, or grpc.aio's: ``server``,
``ROCKETMQ_GRPC_SERVER``) on a loop thread of its own, speaking remoting to the name servers
and brokers behind it; in local mode (``dev --grpc-port``) on the loop of the broker it is
embedded in, whose sends skip the connection (``proxy/local.py``)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any

import grpc
from rocketmq_sdk.client.mq_client_api import MQClientAPI
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.protocol.acl import AclClientRPCHook
from rocketmq_sdk.remoting import RemotingClient
from rocketmq_sdk.remoting.loop import EventLoopThread

from .auth import ProxyAcl
from .consuming import Consuming
from .h2_server import H2GrpcServer, Limits
from .local import LocalBrokerClient
from .offsets import Offsets
from .producing import Producing
from .recall import Recall
from .routes import RouteCache
from .service import MessagingService
from .sessions import Sessions

log = logging.getLogger("rocketmq_broker.proxy")

#: room for a message of the largest body plus its properties and the request's framing
_MESSAGE_OVERHEAD = 64 * 1024
HEARTBEAT_INTERVAL_S = 10.0
#: the gRPC servers a proxy can run on, and the environment variable choosing one
SERVERS = ("own", "grpcio")
SERVER_ENV = "ROCKETMQ_GRPC_SERVER"
DEFAULT_SERVER = "own"


def server_kind(server: str | None) -> str:
    """``server``, else ``$ROCKETMQ_GRPC_SERVER``, else ``"own"``.

    Raises:
        ValueError: not one of :data:`SERVERS`.
    """
    kind = server or os.environ.get(SERVER_ENV) or DEFAULT_SERVER
    if kind not in SERVERS:
        raise ValueError(f"gRPC server {kind!r}: expected one of {', '.join(SERVERS)} (argument or ${SERVER_ENV})")
    return kind


def endpoints_of(host: str, port: int) -> Any:
    """``v2.Endpoints`` of one ``host:port``."""
    ep = v2.Endpoints()
    try:
        socket.inet_pton(socket.AF_INET, host)
        ep.scheme = v2.IPv4
    except OSError:
        try:
            socket.inet_pton(socket.AF_INET6, host)
            ep.scheme = v2.IPv6
        except OSError:
            ep.scheme = v2.DOMAIN_NAME
    ep.addresses.add(host=host, port=port)
    return ep


class GrpcProxy:
    """The gRPC endpoint (``apache.rocketmq.v2.MessagingService``) in front of a name server.

    Args:
        namesrv_addr: name server address(es), ``host:port[;host:port]``.
        host: address to bind (default 127.0.0.1).
        port: port to bind (0: a free one).
        max_body: largest message body accepted, bytes (default 4 MiB, the broker's
            ``maxMessageSize``).
        tls: a ``(private_key_pem, certificate_chain_pem)`` pair to serve TLS only, or None.
        local_broker: local mode: ``(dispatcher, address)`` of the broker in this process (its
            ``BrokerController.server`` and ``config.broker_addr``); sends to it skip the
            connection. Needs :meth:`serve` on that broker's event loop.
        acl: check 5.x request signatures and permissions (``proxy/auth.py``) against this
            ``plain_acl.yml`` (a path, or a broker's ``PlainAccessValidator`` to share); None
            (default): no checks.
        credentials: ``(access_key, secret_key)`` the proxy signs its own remoting requests with,
            for brokers with ``aclEnable`` (an account allowed what the proxy forwards); None:
            unsigned.
        auto_renew_ms: ``(invisible, ahead)`` ms of ``auto_renew`` receives (the 5.x push
            consumers'): their messages are invisible for ``invisible`` and renewed ``ahead``
            before it ends while the client holds them (``proxy/renew.py``; Apache's 60 s, 10 s).
        server: ``"own"`` (the default): the proxy's own asyncio HTTP/2 server (``h2_server.py``);
            ``"grpcio"``: grpc.aio's. None: ``$ROCKETMQ_GRPC_SERVER``, else ``"own"``.

    Raises:
        ValueError: an unknown ``server``.
        AclConfigError: ``acl`` names an invalid ACL file. OSError: it cannot be read.

    ``start()`` (cluster mode) blocks until the server listens on a loop thread of its own and
    returns its port; ``await serve()`` does the same on the running loop. ``stop()`` /
    ``await aclose()`` end every call and stream (clients reconnect to a restarted proxy on the
    same port).
    """

    def __init__(self, namesrv_addr: str, host: str = "127.0.0.1", port: int = 0,
                 max_body: int = 4 * 1024 * 1024, tls: tuple[bytes, bytes] | None = None,
                 local_broker: tuple[Any, str] | None = None, acl: Any = None,
                 credentials: tuple[str, str] | None = None,
                 auto_renew_ms: tuple[int, int] = (60_000, 10_000), server: str | None = None) -> None:
        self.server_kind = server_kind(server)
        self.namesrv_addr = namesrv_addr
        self.host = host
        self.port = port
        self.max_body = max_body
        self.tls = tls
        self.local_broker = local_broker
        self.acl: ProxyAcl | None = None
        if acl is not None:  # a bad file fails here, before anything listens
            self.acl = ProxyAcl.from_file(acl) if isinstance(acl, str) else ProxyAcl(acl)
        self.credentials = credentials
        self.auto_renew_ms = auto_renew_ms
        self._io: EventLoopThread | None = None
        self._server: grpc.aio.Server | H2GrpcServer | None = None
        self._remoting: RemotingClient | None = None
        self._tasks: list[asyncio.Task] = []
        self.service: MessagingService | None = None

    @property
    def local_requests(self) -> int:
        """Requests answered by the local broker without a connection (0 in cluster mode)."""
        remoting = self._remoting
        return remoting.local_requests if isinstance(remoting, LocalBrokerClient) else 0

    @property
    def addr(self) -> str:
        """``host:port`` the proxy listens on."""
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> int:
        """Bind and serve; returns the port.

        Raises:
            OSError: the port cannot be bound.
            RuntimeError: local mode (use :meth:`serve` on the broker's loop).
        """
        if self.local_broker is not None:
            raise RuntimeError("a local-mode proxy serves on its broker's event loop: await serve()")
        self._io = EventLoopThread("rocketmq-grpc-proxy", event_loop="asyncio")
        try:
            return self._io.run(self._start(), timeout_s)
        except BaseException:
            self._io.stop()
            self._io = None
            raise

    async def serve(self) -> int:
        """:meth:`start` on the running event loop (local mode: the broker's); returns the port.

        Raises:
            OSError: the port cannot be bound.
        """
        return await self._start()

    async def aclose(self, grace_s: float = 1.0) -> None:
        """:meth:`stop` of a proxy started by :meth:`serve` (idempotent)."""
        await self._stop(grace_s)

    def _remoting_client(self) -> RemotingClient:
        hooks = [AclClientRPCHook(*self.credentials)] if self.credentials else None
        if self.local_broker is None:
            return RemotingClient(rpc_hooks=hooks)
        dispatcher, broker_addr = self.local_broker
        return LocalBrokerClient(dispatcher, broker_addr, f"{self.host}:{self.port}", rpc_hooks=hooks)

    async def _start(self) -> int:
        self._remoting = self._remoting_client()
        api = MQClientAPI(self._remoting, [a.strip() for a in self.namesrv_addr.split(";") if a.strip()])
        routes = RouteCache(api)
        sessions = Sessions()
        limit = self.max_body + _MESSAGE_OVERHEAD
        bind = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        server: grpc.aio.Server | H2GrpcServer
        if self.server_kind == "own":
            server = H2GrpcServer({}, Limits(max_message=limit), self.tls)
            port = await server.start(self.host, self.port)
        else:
            server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                              ("grpc.max_send_message_length", limit),
                                              ("grpc.so_reuseport", 0)])
            if self.tls is not None:
                port = server.add_secure_port(bind, grpc.ssl_server_credentials([self.tls]))
            else:
                port = server.add_insecure_port(bind)
            if port == 0:
                raise OSError(f"cannot bind the gRPC proxy to {bind}")
        self.port = port
        if isinstance(self._remoting, LocalBrokerClient):
            self._remoting.peer_addr = self.addr
        producing = Producing(api, routes, sessions, f"grpc-proxy@{self.host}:{port}@{os.getpid()}",
                              self.max_body)
        consuming = Consuming(api, routes, auto_renew_ms=self.auto_renew_ms)
        consuming.renewals.alive = lambda client_id: sessions.get(client_id) is not None
        self.service = MessagingService(routes, producing, consuming, sessions,
                                        endpoints_of(self.host, port), Offsets(api, routes),
                                        Recall(api, routes))
        self.service.acl = self.acl
        if isinstance(server, H2GrpcServer):
            server.methods.update(self.service.methods())
        else:
            server.add_generic_rpc_handlers((self.service.handler(),))
            await server.start()
        self._server = server
        self._tasks.append(asyncio.get_running_loop().create_task(self._heartbeats(producing, sessions)))
        self._tasks.append(asyncio.get_running_loop().create_task(consuming.renewals.run()))
        log.info("gRPC proxy listening on %s (name server %s, %s server)", self.addr, self.namesrv_addr,
                 self.server_kind)
        return port

    async def _heartbeats(self, producing: Producing, sessions: Sessions) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)
            sessions.expire()
            try:
                await producing.heartbeat_all()
            except Exception:  # noqa: BLE001 - the next round retries
                log.exception("proxy heartbeat round failed")

    def stop(self, grace_s: float = 1.0) -> None:
        """Stop serving (idempotent): open streams end, then the remoting connections close.

        Raises:
            RuntimeError: a proxy started by :meth:`serve` (stop it with ``await aclose()`` on its loop).
        """
        io, self._io = self._io, None
        if io is None:
            if self._server is not None:
                raise RuntimeError("this proxy serves on its broker's event loop: await aclose() there")
            return
        try:
            io.run(self._stop(grace_s), grace_s + 5.0)
        finally:
            io.stop()

    async def _stop(self, grace_s: float) -> None:
        for t in self._tasks:
            t.cancel()
        self._tasks.clear()
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None
        if self._remoting is not None:
            await self._remoting.close()
            self._remoting = None
