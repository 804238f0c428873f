"""The proxy's own HTTP/2 gRPC server (``rocketmq_broker.proxy.h2_server``): frames on the wire
read by a raw socket client, and grpcio's clients (unary, server streaming, bidi) on a test
service: flow control both ways, SETTINGS/PING, RST_STREAM, GOAWAY on shutdown, deadlines, status
trailers, compression refused, TLS with ALPN h2, limits, and garbage from a client."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time

import pytest

grpc = pytest.importorskip("grpc", reason="the grpc extra (grpcio, protobuf) is not installed")
hpack = pytest.importorskip("hpack")

from rocketmq_broker.proxy.h2_calls import BIDI_STREAMING, SERVER_STREAMING, UNARY, Method  # noqa: E402
from rocketmq_broker.proxy.h2_server import H2GrpcServer, Limits  # noqa: E402
from rocketmq_sdk.grpc import http2 as h  # noqa: E402
from rocketmq_sdk.grpc.unary import UnaryChannel  # noqa: E402

MiB = 1024 * 1024


class Service:
    """Test methods; what handlers saw is kept for the tests to check."""

    def __init__(self) -> None:
        self.seen: dict[str, object] = {}
        self.cancelled: asyncio.Event | None = None
        self.release: asyncio.Event | None = None

    async def echo(self, request: bytes, context) -> bytes:
        self.seen["metadata"] = context.invocation_metadata()
        self.seen["peer"] = context.peer()
        self.seen["remaining"] = context.time_remaining()
        return request[::-1]

    async def big(self, request: bytes, context) -> bytes:
        return bytes(range(256)) * (int(request) // 256)

    async def fail(self, request: bytes, context) -> bytes:
        await context.abort(grpc.StatusCode.NOT_FOUND, "no such thing: " + request.decode() + " é%\n")
        return b""

    async def crash(self, request: bytes, context) -> bytes:
        raise RuntimeError("a bug")

    async def slow(self, request: bytes, context) -> bytes:
        self.cancelled, self.release = asyncio.Event(), asyncio.Event()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return request

    async def count(self, request: bytes, context):
        for i in range(int(request)):
            yield str(i).encode()

    async def chat(self, requests, context):
        async for r in requests:
            yield b"re:" + r


@contextlib.contextmanager
def running(server: H2GrpcServer):
    """``(loop, port)`` of ``server`` listening on a loop thread of its own; stopped after."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop, asyncio.run_coroutine_threadsafe(server.start("127.0.0.1", 0), loop).result(10)
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(0), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@pytest.fixture(scope="module")
def served():
    """(server, service, loop, port): an H2GrpcServer on a loop thread of its own."""
    svc = Service()
    methods = {"/t.S/Echo": Method(UNARY, svc.echo), "/t.S/Big": Method(UNARY, svc.big),
               "/t.S/Fail": Method(UNARY, svc.fail), "/t.S/Crash": Method(UNARY, svc.crash),
               "/t.S/Slow": Method(UNARY, svc.slow), "/t.S/Count": Method(SERVER_STREAMING, svc.count),
               "/t.S/Chat": Method(BIDI_STREAMING, svc.chat)}
    server = H2GrpcServer(methods, Limits(max_message=24 * MiB, max_streams=4, max_header_list=4096))
    with running(server) as (loop, port):
        yield server, svc, loop, port


def on_loop(loop, fn, timeout: float = 10):
    async def call():
        return fn()
    return asyncio.run_coroutine_threadsafe(call(), loop).result(timeout)


def channel(port: int, **options) -> grpc.Channel:
    opts = [("grpc.max_receive_message_length", 64 * MiB), ("grpc.max_send_message_length", 64 * MiB)]
    return grpc.insecure_channel(f"127.0.0.1:{port}", options=opts + list(options.items()))


class Raw:
    """A raw HTTP/2 client: frames out, frames in, every read bounded by a deadline."""

    def __init__(self, port: int, preface: bytes = h.PREFACE + h.settings({})) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        self.decoder = hpack.Decoder()
        if preface:
            self.sock.sendall(preface)

    def send(self, *frames: bytes) -> None:
        self.sock.sendall(b"".join(frames))

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the server")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def frame(self) -> tuple[int, int, int, bytes]:
        length, kind, flags, sid = h.parse_head(self._read(9))
        return kind, flags, sid, self._read(length)

    def until(self, kind: int, sid: int | None = None, flags: int = 0) -> tuple[list, tuple[int, int, int, bytes]]:
        """Frames read up to the first of ``kind`` (on ``sid``, with ``flags``): (before, that one)."""
        before = []
        while True:
            f = self.frame()
            if f[0] == kind and (sid is None or f[2] == sid) and f[1] & flags == flags:
                return before, f
            before.append(f)

    def headers(self, payload: bytes) -> dict[str, str]:
        return dict(self.decoder.decode(payload))

    def closed(self) -> bool:
        try:
            while True:
                self.frame()
        except ConnectionError:
            return True

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_for(raw: Raw, ready) -> None:
    """Until ``ready()`` (a PING answered per check: the server has read what came before), 10 s at most."""
    deadline = time.monotonic() + 10
    while not ready():
        assert time.monotonic() < deadline, "the server's handler did not start"
        raw.send(h.frame(h.PING, 0, 0, b"waiting!"))
        raw.until(h.PING, flags=h.ACK)


def request_block(path: str, *extra: tuple[str, str]) -> bytes:
    return (h.METHOD_POST + h.SCHEME_HTTP + h.literal(h.PATH, path) + h.literal(h.AUTHORITY, "t")
            + h.literal(h.CONTENT_TYPE, "application/grpc") + h.literal("te", "trailers")
            + b"".join(h.literal(k, v) for k, v in extra))


def call_frames(sid: int, path: str, message: bytes, *extra: tuple[str, str], end: bool = True) -> bytes:
    return (h.frame(h.HEADERS, h.END_HEADERS, sid, request_block(path, *extra))
            + h.frame(h.DATA, h.END_STREAM if end else 0, sid, h.grpc_message(message)))


# -- the wire ----------------------------------------------------------------------------------------
def test_settings_ping_and_a_unary_call_on_the_wire(served):
    _, _, _, port = served
    with Raw(port) as raw:
        kind, flags, sid, payload = raw.frame()
        assert (kind, flags, sid) == (h.SETTINGS, 0, 0)  # the server's SETTINGS come first
        assert h.parse_settings(payload) == {h.MAX_CONCURRENT_STREAMS: 4, h.INITIAL_WINDOW_SIZE: 4 * MiB,
                                             h.MAX_FRAME_SIZE: MiB, h.MAX_HEADER_LIST_SIZE: 4096}
        assert raw.frame() == (h.WINDOW_UPDATE, 0, 0, (4 * MiB - 65535).to_bytes(4, "big"))
        raw.send(h.frame(h.PING, 0, 0, b"12345678"))
        before, ack = raw.until(h.PING)
        assert ack == (h.PING, h.ACK, 0, b"12345678")
        assert (h.SETTINGS, h.ACK, 0, b"") in before  # our SETTINGS acknowledged
        raw.send(call_frames(1, "/t.S/Echo", b"hello", ("grpc-timeout", "5S"), ("x-mq-client-id", "c1")))
        kind, flags, sid, head = raw.frame()
        assert (kind, flags, sid) == (h.HEADERS, h.END_HEADERS, 1)
        assert raw.headers(head) == {":status": "200", "content-type": "application/grpc"}
        assert raw.frame() == (h.DATA, 0, 1, b"\0\0\0\0\x05olleh")
        kind, flags, sid, tail = raw.frame()
        assert (kind, flags, sid) == (h.HEADERS, h.END_HEADERS | h.END_STREAM, 1)
        assert raw.headers(tail) == {"grpc-status": "0"}
    svc = served[1]
    assert ("x-mq-client-id", "c1") in svc.seen["metadata"]
    assert svc.seen["peer"].startswith("ipv4:127.0.0.1:")
    assert 4.0 < svc.seen["remaining"] <= 5.0


def test_a_failed_call_has_its_status_and_percent_encoded_message_in_trailers_only(served):
    _, _, _, port = served
    with Raw(port) as raw:
        raw.send(call_frames(1, "/t.S/Fail", b"x"))
        _, (kind, flags, sid, block) = raw.until(h.HEADERS, 1)
        assert flags & h.END_STREAM  # trailers-only
        assert raw.headers(block) == {":status": "200", "content-type": "application/grpc", "grpc-status": "5",
                                      "grpc-message": "no such thing: x %C3%A9%25%0A"}
    with channel(port) as ch:
        with pytest.raises(grpc.RpcError) as info:
            ch.unary_unary("/t.S/Fail")(b"y", timeout=10)
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        assert info.value.details() == "no such thing: y é%\n"
        with pytest.raises(grpc.RpcError) as info:
            ch.unary_unary("/t.S/Crash")(b"y", timeout=10)
        assert info.value.code() == grpc.StatusCode.UNKNOWN
        with pytest.raises(grpc.RpcError) as info:
            ch.unary_unary("/t.S/Nope")(b"y", timeout=10)
        assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


# -- grpcio clients ---------------------------------------------------------------------------------
def test_grpcio_unary_server_streaming_and_bidi(served):
    _, _, _, port = served
    with channel(port) as ch:
        assert ch.unary_unary("/t.S/Echo")(b"abc", timeout=10) == b"cba"
        assert [m for m in ch.unary_stream("/t.S/Count")(b"50", timeout=10)] == [str(i).encode() for i in range(50)]
        # bidi: each answer arrives before the next request is sent (a true stream, not batched)
        sent: list[bytes] = []
        cond = threading.Condition()

        def requests():
            for i in range(20):
                with cond:
                    sent.append(str(i).encode())
                    yield sent[-1]
                    assert cond.wait_for(lambda i=i: len(got) > i, 10)

        got: list[bytes] = []
        for answer in ch.stream_stream("/t.S/Chat")(requests(), timeout=20):
            with cond:
                got.append(answer)
                cond.notify_all()
        assert got == [b"re:" + s for s in sent] and len(got) == 20


def test_20_mib_each_way_with_grpcio_and_the_sdk_transport(served):
    _, _, _, port = served
    body = bytes(range(256)) * (20 * MiB // 256)
    with channel(port) as ch:
        assert ch.unary_unary("/t.S/Echo")(body, timeout=60) == body[::-1]
        assert len(ch.unary_unary("/t.S/Big")(str(20 * MiB).encode(), timeout=60)) == 20 * MiB
    ours = UnaryChannel(f"127.0.0.1:{port}")
    try:
        assert ours.call("/t.S/Echo", body, (), 60) == body[::-1]
    finally:
        ours.close()


def test_the_answer_waits_for_the_clients_flow_control_window(served):
    """A client granting only the default 65,535 bytes gets no more until it sends WINDOW_UPDATE."""
    _, _, _, port = served
    with Raw(port) as raw:
        raw.send(call_frames(1, "/t.S/Big", str(200_000).encode()))
        got = 0
        while got < 65_535:
            kind, flags, sid, payload = raw.frame()
            if kind == h.DATA:
                got += len(payload)
        assert got == 65_535
        raw.send(h.frame(h.PING, 0, 0, b"probe..."))  # nothing more before the PING's answer
        before, _ = raw.until(h.PING, flags=h.ACK)
        assert not [f for f in before if f[0] == h.DATA]
        raw.send(h.window_update(0, 1 << 20), h.window_update(1, 1 << 20))
        while True:
            kind, flags, sid, payload = raw.frame()
            if kind == h.DATA:
                got += len(payload)
            if kind == h.HEADERS and flags & h.END_STREAM:
                break
        assert got == 5 + 200_000 - 200_000 % 256


def test_a_client_overrunning_the_receive_window_gets_goaway_flow_control_error(served, monkeypatch):
    from rocketmq_broker.proxy import h2_server

    monkeypatch.setattr(h2_server, "RECV_WINDOW", 65_535)  # (frames of up to 1 MiB are still allowed)
    _, _, _, port = served
    with Raw(port) as raw:
        raw.send(h.frame(h.HEADERS, h.END_HEADERS, 1, request_block("/t.S/Echo")),
                 h.frame(h.DATA, 0, 1, bytes(70_000)))
        _, (_, _, _, payload) = raw.until(h.GOAWAY)
        assert h.u32(payload, 4) == h.FLOW_CONTROL_ERROR
        assert raw.closed()


def test_rst_stream_from_the_client_cancels_the_handler(served):
    _, svc, loop, port = served
    with Raw(port) as raw:
        raw.send(call_frames(1, "/t.S/Slow", b"x"))
        wait_for(raw, lambda: svc.cancelled is not None)
        raw.send(h.rst_stream(1, h.CANCEL))
        assert asyncio.run_coroutine_threadsafe(asyncio.wait_for(svc.cancelled.wait(), 10), loop).result(11) is True
        raw.send(call_frames(3, "/t.S/Echo", b"still"))  # the connection goes on
        _, (_, _, _, data) = raw.until(h.DATA, 3)
        assert data[5:] == b"llits"


def test_grpc_timeout_ends_the_call_with_deadline_exceeded(served):
    _, svc, _, port = served
    with channel(port) as ch:
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as info:
            ch.unary_unary("/t.S/Slow")(b"x", timeout=0.3)
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED and time.monotonic() - t0 < 5
    with Raw(port) as raw:
        raw.send(call_frames(1, "/t.S/Slow", b"x", ("grpc-timeout", "200m")))
        _, (_, flags, _, block) = raw.until(h.HEADERS, 1)
        assert flags & h.END_STREAM and raw.headers(block)["grpc-status"] == "4"
        raw.send(call_frames(3, "/t.S/Echo", b"x", ("grpc-timeout", "soon")))
        _, (_, _, _, block) = raw.until(h.HEADERS, 3)
        assert raw.headers(block)["grpc-status"] == "13"


def test_compressed_requests_are_refused_as_grpc_does(served):
    _, _, _, port = served
    with Raw(port) as raw:
        raw.send(call_frames(1, "/t.S/Echo", b"x", ("grpc-encoding", "gzip")))
        _, (_, _, _, block) = raw.until(h.HEADERS, 1)
        assert raw.headers(block)["grpc-status"] == "12"  # UNIMPLEMENTED
        raw.send(h.frame(h.HEADERS, h.END_HEADERS, 3, request_block("/t.S/Echo"))
                 + h.frame(h.DATA, h.END_STREAM, 3, b"\x01\0\0\0\x01x"))  # compressed flag, no encoding
        _, (_, _, _, block) = raw.until(h.HEADERS, 3)
        assert raw.headers(block)["grpc-status"] == "13"  # INTERNAL


# -- limits --------------------------------------------------------------------------------------------
def test_limits_streams_header_list_and_message_size(served):
    _, svc, _, port = served
    with Raw(port) as raw:
        for sid in (1, 3, 5, 7):  # max_streams=4 calls held open
            raw.send(h.frame(h.HEADERS, h.END_HEADERS, sid, request_block("/t.S/Echo")))
        raw.send(h.frame(h.HEADERS, h.END_HEADERS, 9, request_block("/t.S/Echo")))
        _, (_, _, _, payload) = raw.until(h.RST_STREAM, 9)
        assert h.u32(payload) == h.REFUSED_STREAM
        raw.send(h.rst_stream(1, h.CANCEL))
        raw.send(call_frames(11, "/t.S/Echo", b"x", ("x-big", "v" * 5000)))  # header list over 4096
        _, (_, _, _, block) = raw.until(h.HEADERS, 11)
        assert raw.headers(block)["grpc-status"] == "8"  # RESOURCE_EXHAUSTED
        raw.send(call_frames(13, "/t.S/Echo", b"ok"))
        _, (_, _, _, data) = raw.until(h.DATA, 13)
        assert data[5:] == b"ko"
    with channel(port) as ch:
        with pytest.raises(grpc.RpcError) as info:
            ch.unary_unary("/t.S/Echo")(bytes(25 * MiB), timeout=60)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        with pytest.raises(grpc.RpcError) as info:
            ch.unary_unary("/t.S/Big")(str(25 * MiB).encode(), timeout=60)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert ch.unary_unary("/t.S/Echo")(b"after", timeout=10) == b"retfa"


@pytest.mark.parametrize("garbage, code", [
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", h.PROTOCOL_ERROR),
    (h.PREFACE + h.frame(h.HEADERS, h.END_HEADERS, 0, b"\x82"), h.PROTOCOL_ERROR),  # HEADERS on stream 0
    (h.PREFACE + h.frame(h.HEADERS, h.END_HEADERS, 2, b"\x82"), h.PROTOCOL_ERROR),  # an even (server) id
    (h.PREFACE + h.frame(h.DATA, 0, 0, b"x"), h.PROTOCOL_ERROR),
    (h.PREFACE + h.frame(h.HEADERS, h.END_HEADERS, 1, b"\xff\xff\xff\xff\x0f"), h.COMPRESSION_ERROR),
    (h.PREFACE + h.frame(h.SETTINGS, 0, 0, b"12345"), h.PROTOCOL_ERROR),
    (h.PREFACE + h.frame(h.PING, 0, 0, b"1234"), h.FRAME_SIZE_ERROR),
    (h.PREFACE + b"\x7f\xff\xff\x00\x00\x00\x00\x00\x01", h.FRAME_SIZE_ERROR),  # an 8 MiB frame announced
    (h.PREFACE + h.frame(h.HEADERS, 0, 1, b"\x82") + h.frame(h.PING, 0, 0, b"12345678"), h.PROTOCOL_ERROR),
    (h.PREFACE + h.frame(h.WINDOW_UPDATE, 0, 0, b"\x7f\xff\xff\xff"), h.FLOW_CONTROL_ERROR),
    (h.PREFACE + h.frame(h.HEADERS, h.END_HEADERS, 1, b"\x00\x01x\x01\xff"), h.COMPRESSION_ERROR),  # not UTF-8
])
def test_garbage_from_a_client_gets_goaway_and_the_server_goes_on(served, garbage, code):
    _, _, _, port = served
    with Raw(port, preface=b"") as raw:
        raw.send(garbage)
        _, (_, _, sid, payload) = raw.until(h.GOAWAY)
        assert sid == 0 and h.u32(payload, 4) == code
        assert raw.closed()
    with channel(port) as ch:
        assert ch.unary_unary("/t.S/Echo")(b"fine", timeout=10) == b"enif"


def test_a_client_sending_no_preface_is_closed(served, monkeypatch):
    from rocketmq_broker.proxy import h2_server

    monkeypatch.setattr(h2_server, "PREFACE_TIMEOUT_S", 0.2)
    _, _, _, port = served
    with Raw(port, preface=b"PRI * HTTP/2.0") as raw:  # the start of it, then nothing
        t0 = time.monotonic()
        assert raw.closed() and time.monotonic() - t0 < 5


def test_requests_a_bidi_handler_does_not_read_are_bounded():
    async def deaf(requests, context):
        await asyncio.Event().wait()
        yield b""

    server = H2GrpcServer({"/t.S/Deaf": Method(BIDI_STREAMING, deaf)}, Limits(max_message=64 * 1024))
    with running(server) as (_, port), Raw(port) as raw:
        raw.send(h.frame(h.HEADERS, h.END_HEADERS, 1, request_block("/t.S/Deaf")))
        for _ in range(10):  # 100 KiB of requests, none read
            raw.send(h.frame(h.DATA, 0, 1, h.grpc_message(bytes(10 * 1024))))
        _, (_, flags, _, block) = raw.until(h.HEADERS, 1)
        assert flags & h.END_STREAM and raw.headers(block)["grpc-status"] == "8"  # RESOURCE_EXHAUSTED


# -- shutdown, TLS -------------------------------------------------------------------------------------
def test_goaway_on_shutdown_lets_the_call_in_flight_finish():
    svc = Service()
    server = H2GrpcServer({"/t.S/Slow": Method(UNARY, svc.slow), "/t.S/Echo": Method(UNARY, svc.echo)})
    with running(server) as (loop, port), Raw(port) as raw:
        raw.send(call_frames(1, "/t.S/Slow", b"in flight"))
        wait_for(raw, lambda: svc.release is not None)
        stopping = asyncio.run_coroutine_threadsafe(server.stop(10), loop)
        _, (_, _, _, payload) = raw.until(h.GOAWAY)
        assert (h.u32(payload), h.u32(payload, 4)) == (1, h.NO_ERROR)  # stream 1 will still be answered
        raw.send(call_frames(3, "/t.S/Echo", b"late"))
        _, (_, _, _, code) = raw.until(h.RST_STREAM, 3)
        assert h.u32(code) == h.REFUSED_STREAM
        on_loop(loop, svc.release.set)
        _, (_, _, _, data) = raw.until(h.DATA, 1)
        assert data[5:] == b"in flight"
        _, (_, flags, _, block) = raw.until(h.HEADERS, 1)
        assert flags & h.END_STREAM and raw.headers(block) == {"grpc-status": "0"}
        assert raw.closed()
        stopping.result(10)


def test_tls_with_alpn_h2():
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    svc = Service()
    tls = (cert.private_key_pem.bytes(), b"".join(b.bytes() for b in cert.cert_chain_pems))
    server = H2GrpcServer({"/t.S/Echo": Method(UNARY, svc.echo)}, tls=tls)
    with running(server) as (_, port):
        creds = grpc.ssl_channel_credentials(ca.cert_pem.bytes())
        with grpc.secure_channel(f"localhost:{port}", creds) as ch:
            assert ch.unary_unary("/t.S/Echo")(b"secret", timeout=10) == b"terces"
        ours = UnaryChannel(f"127.0.0.1:{port}", tls=True, root_certificates=ca.cert_pem.bytes())
        assert ours.call("/t.S/Echo", b"sdk", (), 10) == b"kds"
        ours.close()
        import ssl

        ctx = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
        ctx.set_alpn_protocols(["http/1.1"])  # TLS without h2: closed before any frame
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                             server_hostname="localhost") as tls_sock:
            tls_sock.sendall(h.PREFACE + h.settings({}))
            assert tls_sock.recv(65536) == b""
        with channel(port) as plain:  # plaintext to a TLS port: refused
            with pytest.raises(grpc.RpcError) as info:
                plain.unary_unary("/t.S/Echo")(b"x", timeout=3)
            assert info.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def test_the_proxy_server_switch(monkeypatch):
    from rocketmq_broker.proxy import GrpcProxy

    monkeypatch.delenv("ROCKETMQ_GRPC_SERVER", raising=False)
    assert GrpcProxy("127.0.0.1:1").server_kind == "own"
    assert GrpcProxy("127.0.0.1:1", server="grpcio").server_kind == "grpcio"
    monkeypatch.setenv("ROCKETMQ_GRPC_SERVER", "grpcio")
    assert GrpcProxy("127.0.0.1:1").server_kind == "grpcio"
    monkeypatch.setenv("ROCKETMQ_GRPC_SERVER", "nghttp2")
    with pytest.raises(ValueError, match="expected one of own, grpcio"):
        GrpcProxy("127.0.0.1:1")


def test_the_cli_option_chooses_the_server(monkeypatch, tmp_path):
    from click.testing import CliRunner
    from rocketmq_broker import __main__ as cli

    seen: list[str | None] = []
    monkeypatch.setattr(cli, "_run_dev", lambda *a, **k: seen.append(os.environ.get("ROCKETMQ_GRPC_SERVER")))
    monkeypatch.setenv("ROCKETMQ_GRPC_SERVER", "own")  # restored after: the option sets it for the process
    args = ["dev", "--store", str(tmp_path), "--grpc-port", "0"]
    assert CliRunner().invoke(cli.main, args + ["--grpc-server", "grpcio"]).exit_code == 0
    assert seen == ["grpcio"]  # what GrpcProxy reads in the dev process (and its cluster-mode thread)
    bad = CliRunner().invoke(cli.main, args + ["--grpc-server", "nghttp2"])
    assert bad.exit_code == 2 and "nghttp2" in bad.output


def test_a_proxy_on_grpcio_s_server_still_serves_sends_and_receives(grpc_cluster):
    """The switch back (``server="grpcio"``): this SDK's sends (own unary transport and grpcio's
    async path) and a SimpleConsumer's long-polling receive over grpc.aio's server."""
    from rocketmq_broker.proxy import GrpcProxy
    from rocketmq_sdk import Message, Producer, SimpleConsumer

    from .conftest import unique

    cluster, _ = grpc_cluster
    proxy = GrpcProxy(cluster.namesrv_addr, server="grpcio")
    proxy.start()
    try:
        assert type(proxy._server).__module__.startswith("grpc")
        topic, group = unique("sw"), unique("cg")
        with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p:
            sent = {p.send(Message(topic, b"sync")).msg_id, p.send_async(Message(topic, b"async")).result(10).msg_id}
        consumer = SimpleConsumer(group, endpoints=proxy.addr, protocol="grpc", await_duration=1)
        consumer.subscribe(topic, "*")
        with consumer as c:
            got: set[str] = set()
            deadline = time.monotonic() + 30
            while got != sent and time.monotonic() < deadline:
                for m in c.receive(16, 30):
                    got.add(m.msg_id)
                    c.ack(m)
        assert got == sent
    finally:
        proxy.stop()


def test_the_fast_header_path_matches_hpack_and_leaves_the_rest_to_it():
    from rocketmq_sdk.grpc.unary import UnaryChannel as _  # noqa: F401 - the SDK's requests are what it serves

    block = request_block("/t.S/Echo", ("grpc-timeout", "2999m"), ("x-mq-client-id", "c" * 300), ("é-x", "ü"))
    assert h.decode_literals(block) == hpack.Decoder().decode(block)
    assert h.decode_literals(h.literal("x-never", "v").replace(b"\x00", b"\x10", 1)) == [("x-never", "v")]
    encoder = hpack.Encoder()  # grpcio's way: Huffman, the dynamic table: not the fast path's
    assert h.decode_literals(encoder.encode([(":method", "POST"), ("x-a", "b")])) is None
    for bad in (b"\x00", b"\x00\x05ab", b"\xff", b"\x00\x01x\x01\xff", b"\xc0", b"\x20"):
        assert h.decode_literals(bad) is None
