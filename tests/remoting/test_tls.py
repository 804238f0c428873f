"""Optional TLS (Java ``useTLS`` / ``TlsSystemConfig``): remoting, the blocking send path, a whole
dev cluster, and the errors of a client and server that disagree about TLS.

Certificates are throwaway ones made by ``trustme`` in a temporary directory."""

from __future__ import annotations

import asyncio
import ssl
import threading
import time

import pytest
from rocketmq_sdk import Message, Producer, PushConsumer
from rocketmq_sdk.admin.client import AdminClient
from rocketmq_sdk.client.blocking import BlockingConnections
from rocketmq_sdk.exceptions import RemotingConnectError, RemotingError
from rocketmq_sdk.protocol.codes import ResponseCode
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand, RemotingServer
from rocketmq_sdk.remoting.client import client_ssl_context
from rocketmq_sdk.remoting.server import server_ssl_context

from tests.conftest import Received, run_async, wait_until
from tests.pki import server_pki

trustme = pytest.importorskip("trustme")
embedded = pytest.importorskip("rocketmq_broker.embedded")

pytestmark = pytest.mark.timeout(60)

ECHO = 1000


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA and a server certificate for 127.0.0.1, as PEM files and ready contexts."""
    p = server_pki(tmp_path_factory.mktemp("tls"))
    return {"ca": p.ca_path, "cert": p.cert_path, "key": p.key_path,
            "server": server_ssl_context(p.cert_path, p.key_path), "client": client_ssl_context(p.ca_path)}


def run(coro, timeout: float = 20.0):
    return run_async(coro, timeout)


def _echo_server(ssl_context: ssl.SSLContext | None) -> RemotingServer:
    server = RemotingServer(ssl_context=ssl_context, name="tls-test")
    server.register_processor(ECHO, lambda ch, cmd: cmd.response(ResponseCode.SUCCESS, body=cmd.body))
    return server



def test_request_and_response_over_tls(pki):
    async def main():
        server = _echo_server(pki["server"])
        port = await server.start()
        client = RemotingClient(ssl_context=pki["client"])
        try:
            addr = f"127.0.0.1:{port}"
            resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"k": "v"}, b"x" * 100_000), 5000)
            assert resp.code == ResponseCode.SUCCESS and resp.body == b"x" * 100_000
            ssl_object = (await client.get_channel(addr)).transport.get_extra_info("ssl_object")
            assert ssl_object is not None and ssl_object.version() in ("TLSv1.2", "TLSv1.3")
            assert all(ch.transport.get_extra_info("ssl_object") is not None for ch in server.channels)
        finally:
            await client.close()
            await server.stop()

    run(main())


def _refused_seconds(server_ctx: ssl.SSLContext | None, client_ctx: ssl.SSLContext | None,
                     match: str | None = None) -> float:
    """A RemotingClient with ``client_ctx`` invokes an echo server with ``server_ctx``: asserts
    RemotingConnectError (its message matching ``match``); returns how long the refusal took (s)."""
    async def main():
        server = _echo_server(server_ctx)
        port = await server.start()
        client = RemotingClient(ssl_context=client_ctx)
        try:
            started = time.monotonic()
            with pytest.raises(RemotingConnectError, match=match):
                await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO, {}, b"hi"), 5000)
            return time.monotonic() - started
        finally:
            await client.close()
            await server.stop()

    return run(main())


def test_plaintext_client_to_tls_server_is_a_connect_error(pki):
    assert _refused_seconds(pki["server"], None, "TLS") < 2.0  # closed at once, not a timeout


def test_plaintext_blocking_connection_to_tls_server_is_a_connect_error(pki):
    async def serve(started: threading.Event, stop: asyncio.Event, out: list):
        server = _echo_server(pki["server"])
        out.append(await server.start())
        started.set()
        await stop.wait()
        await server.stop()

    loop = asyncio.new_event_loop()
    started, out = threading.Event(), []
    stop = asyncio.Event()
    t = threading.Thread(target=loop.run_until_complete, args=(serve(started, stop, out),), daemon=True)
    t.start()
    try:
        assert started.wait(10)
        addr = f"127.0.0.1:{out[0]}"
        plain = BlockingConnections(3000)
        with pytest.raises(RemotingConnectError, match="TLS"):
            plain.invoke(addr, RemotingCommand.request(ECHO, {}, b"hi"), 5000)
        tls = BlockingConnections(3000, ssl_context=pki["client"])
        assert tls.invoke(addr, RemotingCommand.request(ECHO, {}, b"hello"), 5000).body == b"hello"
        plain.close()
        tls.close()
    finally:
        loop.call_soon_threadsafe(stop.set)
        t.join(10)


@pytest.mark.parametrize("kind", ["asyncio", "uvloop"])
def test_a_new_connection_is_proven_by_its_first_byte_on_every_loop(pki, kind):
    """A plaintext connection is not used by the Task-free paths (``ready_channel``) until its
    peer has sent a byte (a TLS-only server closes it without one: a connect error naming TLS).
    The watch is ``Channel.on_first_read``, not a method swapped on the instance (uvloop binds
    ``data_received`` once per ``set_protocol``, so a swap needed a re-bind)."""
    if kind == "uvloop":
        pytest.importorskip("uvloop")
    from rocketmq_sdk.remoting.loop import new_event_loop

    async def main():
        plain, tls = _echo_server(None), _echo_server(pki["server"])
        plain_port, tls_port = await plain.start(), await tls.start()
        client = RemotingClient()
        try:
            addr = f"127.0.0.1:{plain_port}"
            channel = await client.get_channel(addr)
            assert client.ready_channel(addr) is None and channel.on_first_read is not None
            resp = await client.invoke(addr, RemotingCommand.request(ECHO, {}, b"hi"), 5000)
            assert resp.body == b"hi" and client.ready_channel(addr) is channel and channel.on_first_read is None
            with pytest.raises(RemotingConnectError, match="TLS"):
                await client.invoke(f"127.0.0.1:{tls_port}", RemotingCommand.request(ECHO, {}, b"hi"), 5000)
        finally:
            await client.close()
            await plain.stop()
            await tls.stop()

    loop = new_event_loop(kind)
    try:
        loop.run_until_complete(asyncio.wait_for(main(), 20))
    finally:
        loop.close()


def test_tls_client_to_plaintext_server_is_a_connect_error(pki):
    assert _refused_seconds(None, pki["client"]) < 3.5


def test_untrusted_server_certificate_is_refused(pki):
    _refused_seconds(pki["server"], ssl.create_default_context(), "certificate verify failed")  # system CAs only


def test_client_certificates_when_the_server_requires_them(pki, tmp_path):
    ca = trustme.CA()
    client_cert = ca.issue_cert("client@example")
    client_pem = tmp_path / "client.pem"
    client_cert.private_key_and_cert_chain_pem.write_to_path(str(client_pem))
    ca_pem = tmp_path / "client-ca.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    server_ctx = server_ssl_context(pki["cert"], pki["key"], client_ca_path=str(ca_pem))

    async def main():
        server = _echo_server(server_ctx)
        port = await server.start()
        addr = f"127.0.0.1:{port}"
        with_cert = RemotingClient(ssl_context=client_ssl_context(pki["ca"], cert_path=str(client_pem)))
        without = RemotingClient(ssl_context=pki["client"])
        try:
            resp = await with_cert.invoke(addr, RemotingCommand.request(ECHO, {}, b"mtls"), 5000)
            assert resp.body == b"mtls"
            started = time.monotonic()
            with pytest.raises(RemotingError):  # refused during or right after the handshake
                await without.invoke(addr, RemotingCommand.request(ECHO, {}, b"no cert"), 5000)
            assert time.monotonic() - started < 3.0
        finally:
            await with_cert.close()
            await without.close()
            await server.stop()

    run(main())


@pytest.fixture(scope="module")
def tls_cluster(pki):
    with embedded.start_dev_cluster(in_process=True, ssl_context=pki["server"]) as c:
        yield c


def test_send_and_consume_end_to_end_over_tls(pki, tls_cluster):
    topic, n = "TlsTopic", 30
    with AdminClient(tls_cluster.namesrv_addr, ssl_context=pki["client"]) as admin:
        admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
    got = Received()
    consumer = PushConsumer("tls_cg", tls_cluster.namesrv_addr, instance_name="tls-c", ssl_context=pki["client"],
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET", rebalance_interval=500,
                            suspend_timeout=1000, pull_timeout=4000)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(got)
    consumer.start()
    try:
        with Producer("tls_pg", tls_cluster.namesrv_addr, instance_name="tls-p", ssl_context=pki["client"]) as p:
            for i in range(n):  # the first send fetches the route; the others take the blocking path
                p.send(Message(topic, f"m{i}"))
            p.send_async(Message(topic, b"async")).result(10)
            blocking = list(p.instance.blocking._all)
            assert blocking and all(isinstance(c.sock, ssl.SSLSocket) for c in blocking)
        wait_until(lambda: len(got.messages) >= n + 1, what="all messages consumed")
        assert sorted(got.bodies()) == sorted([f"m{i}".encode() for i in range(n)] + [b"async"])
    finally:
        consumer.shutdown()


def test_plaintext_producer_to_tls_cluster_fails_with_connect_error(tls_cluster):
    with Producer("plain_pg", tls_cluster.namesrv_addr, instance_name="plain-p") as p:
        started = time.monotonic()
        with pytest.raises(RemotingConnectError, match="use_tls"):
            p.send(Message("TlsTopic", b"x"), timeout_ms=5000)
        assert time.monotonic() - started < 3.0


def test_use_tls_verifies_against_system_trust_by_default(tls_cluster):
    with Producer("tls_default_pg", tls_cluster.namesrv_addr, instance_name="tls-d", use_tls=True) as p:
        with pytest.raises(RemotingConnectError, match="certificate verify failed"):
            p.send(Message("TlsTopic", b"x"), timeout_ms=5000)


def test_broker_and_namesrv_tls_config(pki):
    from rocketmq_broker.broker.config import BrokerConfig
    from rocketmq_broker.namesrv.server import NameServer, NamesrvConfig

    cfg = BrokerConfig.from_properties({"tlsEnable": "true", "tlsServerCertPath": pki["cert"],
                                        "tlsServerKeyPath": pki["key"], "tlsClientTrustCertPath": pki["ca"]})
    assert isinstance(cfg.tls_server_context(), ssl.SSLContext)
    assert cfg.tls_client_context().verify_mode == ssl.CERT_REQUIRED
    assert BrokerConfig().tls_server_context() is None and BrokerConfig().tls_client_context() is None
    with pytest.raises(ValueError, match="tlsServerCertPath"):
        BrokerConfig(tls_enable=True).tls_server_context()
    ns = NameServer(NamesrvConfig(tls_enable=True, tls_server_cert_path=pki["cert"], tls_server_key_path=pki["key"]))
    assert isinstance(ns.server.ssl_context, ssl.SSLContext)
    assert NameServer(NamesrvConfig()).server.ssl_context is None


def test_broker_and_namesrv_serve_tls_from_their_config(pki, tmp_path):
    """``tlsEnable`` + PEM paths in the broker and name server configs (no embedded helper): the
    broker registers over TLS, verifying the name server with ``tlsClientTrustCertPath``, and a
    TLS producer sends through both."""
    from rocketmq_broker.broker.config import BrokerConfig
    from rocketmq_broker.broker.controller import BrokerController
    from rocketmq_broker.namesrv.server import NameServer, NamesrvConfig

    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    servers: list = []

    def on_loop(coro, timeout=30):
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    async def start():
        ns = NameServer(NamesrvConfig(listen_port=0, tls_enable=True, tls_server_cert_path=pki["cert"],
                                      tls_server_key_path=pki["key"]))
        await ns.start()
        servers.append(ns)
        broker = BrokerController(BrokerConfig.from_properties({
            "listenPort": "0", "namesrvAddr": ns.addr, "storePathRootDir": str(tmp_path),
            "mappedFileSizeCommitLog": str(8 * 1024 * 1024), "tlsEnable": "true",
            "tlsServerCertPath": pki["cert"], "tlsServerKeyPath": pki["key"], "tlsClientTrustCertPath": pki["ca"]}))
        await broker.start()
        servers.append(broker)
        return ns.addr, broker

    try:
        namesrv, broker = on_loop(start())
        with Producer("tls_cfg_pg", namesrv, instance_name="tls-cfg", ssl_context=pki["client"]) as p:
            results = [p.send(Message("TlsCfgTopic", f"m{i}")) for i in range(3)]
        assert all(r.send_status.name == "SEND_OK" for r in results)
        assert sum(broker.store.get_max_offset_in_queue("TlsCfgTopic", q) for q in range(8)) == 3
    finally:
        async def stop():
            for s in reversed(servers):
                await s.stop()

        on_loop(stop())
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
