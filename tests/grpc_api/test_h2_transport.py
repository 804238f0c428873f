"""The SDK's own HTTP/2 transport for unary gRPC calls (``rocketmq_sdk.grpc.unary``): the frames it
writes, interop with grpc.aio and sync ``grpc.server`` services, flow control with messages larger
than the windows, TLS, deadlines, GOAWAY, a server that goes away, hostile servers."""

from __future__ import annotations

import select
import threading
import time

import grpc
import pytest
from rocketmq_sdk.exceptions import RemotingConnectError, RemotingError, RemotingTimeoutError
from rocketmq_sdk.grpc import http2 as h
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.grpc.connection import GrpcConnection
from rocketmq_sdk.grpc.unary import GrpcStatusError, UnaryChannel

from .h2_servers import ECHO, FAIL, SLOW, AioEcho, RawConn, RawServer, SyncEcho

META = (("x-mq-client-id", "c1"), ("x-mq-request-id", "r-1"))


@pytest.fixture(params=["aio", "sync"])
def echo(request):
    server = AioEcho() if request.param == "aio" else SyncEcho()
    yield server
    server.stop()


def _handshake(conn: RawConn) -> list[tuple[int, int, int, bytes]]:
    """Read the client's preface, answer with SETTINGS; the frames read before the first request."""
    assert conn.preface() == h.PREFACE
    conn.send(h.settings({h.MAX_CONCURRENT_STREAMS: 100}))
    return []


# -- the wire ---------------------------------------------------------------------------------------
def test_request_frames_on_the_wire_and_ping_answered():
    seen: dict = {}

    def script(conn: RawConn, n: int) -> None:
        assert conn.preface() == h.PREFACE
        first = conn.frame()
        seen["settings"] = h.parse_settings(first[3]) if first[0] == h.SETTINGS else first
        conn.send(h.settings({}) + h.frame(h.PING, 0, 0, b"pingpong"))
        sid, headers, body, frames = conn.request()
        seen["request"] = (sid, headers, body, frames)
        while not any(f[0] == h.PING for f in frames):  # answered before or after the request was written
            frames.append(conn.frame())
        seen["pong"] = next((f[1], f[3]) for f in frames if f[0] == h.PING)
        conn.answer(sid, b"answer")
        conn.frame()

    server = RawServer(script)
    ch = UnaryChannel(server.target)
    try:
        assert ch.call("/apache.rocketmq.v2.MessagingService/SendMessage", b"hello", META, 5) == b"answer"
    finally:
        ch.close()
        server.close()
    assert seen["settings"][h.ENABLE_PUSH] == 0 and seen["settings"][h.INITIAL_WINDOW_SIZE] >= 1 << 20
    sid, headers, body, frames = seen["request"]
    assert sid == 1
    frames = [f for f in frames if f[0] not in (h.SETTINGS, h.PING)]  # the ACKs: before or after the request
    assert [f[0] for f in frames] == [h.WINDOW_UPDATE, h.HEADERS, h.DATA]
    assert h.u32(frames[0][3]) > 0  # the connection's receive window
    assert frames[1][1] == h.END_HEADERS and frames[2][1] == h.END_STREAM
    assert headers[:2] == [(":method", "POST"), (":scheme", "http")]
    assert dict(headers) | {} == {":method": "POST", ":scheme": "http", ":authority": server.target,
                                  ":path": "/apache.rocketmq.v2.MessagingService/SendMessage",
                                  "content-type": "application/grpc", "te": "trailers",
                                  "user-agent": "rocketmq-python-sdk", "grpc-timeout": dict(headers)["grpc-timeout"],
                                  "x-mq-client-id": "c1", "x-mq-request-id": "r-1"}
    assert 4900 <= int(dict(headers)["grpc-timeout"].rstrip("m")) <= 5000
    assert body == b"\0\0\0\0\x05hello"  # uncompressed, 4-byte big-endian length, the message
    assert seen["pong"] == (h.ACK, b"pingpong")


def test_the_5x_metadata_is_sent_as_over_grpcio():
    seen = []

    def script(conn: RawConn, n: int) -> None:
        _handshake(conn)
        while True:
            sid, headers, _, _ = conn.request()
            seen.append(headers)
            conn.answer(sid, v2.HeartbeatResponse(status=v2.Status(code=v2.OK)).SerializeToString())

    server = RawServer(script)
    conn = GrpcConnection(server.target, "host@c1", namespace="ns1", access_key="AK", secret_key="SK",
                          security_token="tok", transport="h2")
    try:
        assert conn.call("Heartbeat", v2.HeartbeatRequest(), 5).status.code == v2.OK
        expected = dict(conn.metadata())
        assert conn.call("Heartbeat", v2.HeartbeatRequest(), 5).status.code == v2.OK
    finally:
        conn.close()
        server.close()
    first, second = (dict(hs) for hs in seen)
    for got in (first, second):
        assert {k: v for k, v in got.items() if k.startswith("x-mq-") or k == "authorization"}.keys() == \
            expected.keys()
    assert first["authorization"].startswith("MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature=")
    assert first["x-mq-namespace"] == "ns1" and first["x-mq-session-token"] == "tok"
    assert first["x-mq-client-id"] == "host@c1" and first["x-mq-language"] == "PYTHON"
    ids = [first["x-mq-request-id"], expected["x-mq-request-id"], second["x-mq-request-id"]]
    assert len(set(ids)) == 3 and ids == sorted(ids)  # one request id per request, counting up
    if first["x-mq-date-time"] == second["x-mq-date-time"]:
        assert first["authorization"] == second["authorization"] == expected["authorization"]


# -- interop ----------------------------------------------------------------------------------------
def test_calls_from_several_threads_on_one_connection(echo):
    ch = UnaryChannel(echo.target)
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for i in range(40):
                msg = f"thread {t} call {i} ".encode() * (1 + i % 5)
                assert ch.call(ECHO, msg, META, 10) == msg[::-1]
        except BaseException as exc:  # noqa: BLE001 - checked below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    conn = ch._conn
    ch.close()
    assert not errors and conn is not None and conn._next_id == 1 + 2 * 240  # one connection, 240 streams


def test_large_messages_cross_the_flow_control_windows(echo):
    ch = UnaryChannel(echo.target)
    try:
        big = bytes(range(256)) * (20 * 4096 + 7)  # ~20 MiB: several times every window
        assert ch.call(ECHO, big, META, 60) == big[::-1]
        assert ch.call(ECHO, b"after", META, 10) == b"retfa"
    finally:
        ch.close()


def test_grpc_status_and_message_of_a_failed_call(echo):
    ch = UnaryChannel(echo.target)
    try:
        with pytest.raises(GrpcStatusError) as info:
            ch.call(FAIL, b"topic-x", META, 10)
        assert info.value.code == grpc.StatusCode.NOT_FOUND.value[0]
        assert info.value.details == "no such thing: topic-x é%"
        with pytest.raises(GrpcStatusError) as info:
            ch.call("/test.Echo/Missing", b"", META, 10)
        assert info.value.code == grpc.StatusCode.UNIMPLEMENTED.value[0]
    finally:
        ch.close()


def test_deadline_exceeded_then_the_connection_still_serves(echo):
    ch = UnaryChannel(echo.target)
    try:
        started = time.monotonic()
        with pytest.raises(GrpcStatusError) as info:
            ch.call(SLOW, b"x", META, 0.3)
        assert info.value.code == 4 and time.monotonic() - started < 3
        assert ch.call(ECHO, b"ab", META, 10) == b"ba"
    finally:
        ch.close()


def test_tls_with_alpn_h2(tmp_path):
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    creds = grpc.ssl_server_credentials([(cert.private_key_pem.bytes(),
                                          b"".join(b.bytes() for b in cert.cert_chain_pems))])
    server = SyncEcho(credentials=creds)
    try:
        ch = UnaryChannel(server.target, tls=True, root_certificates=ca.cert_pem.bytes())
        assert ch.call(ECHO, b"secret", META, 10) == b"terces"
        ch.close()
        untrusted = UnaryChannel(server.target, tls=True, root_certificates=trustme.CA().cert_pem.bytes())
        with pytest.raises(GrpcStatusError) as info:
            untrusted.call(ECHO, b"secret", META, 10)
        assert info.value.code == 14 and "CERTIFICATE_VERIFY_FAILED" in info.value.details
        plain = UnaryChannel(server.target)
        with pytest.raises(GrpcStatusError):
            plain.call(ECHO, b"secret", META, 3)
        plain.close()
    finally:
        server.stop()


# -- servers going away ------------------------------------------------------------------------------
def test_goaway_mid_run_sends_the_unprocessed_call_again_on_a_new_connection():
    def script(conn: RawConn, n: int) -> None:
        _handshake(conn)
        sid, _, body, _ = conn.request()
        if n == 0:
            conn.answer(sid, body[5:] + b"@0")
            sid, _, body, _ = conn.request()  # the second call: refused by a GOAWAY naming the first
            conn.send(h.goaway(sid - 2, h.NO_ERROR, b"restarting"))
            conn.read(1 << 30)
        else:
            while True:
                conn.answer(sid, body[5:] + b"@1")
                sid, _, body, _ = conn.request()

    server = RawServer(script)
    ch = UnaryChannel(server.target)
    try:
        assert ch.call(ECHO, b"a", META, 10) == b"a@0"
        assert ch.call(ECHO, b"b", META, 10) == b"b@1"  # not processed on the first: sent again
        assert ch.call(ECHO, b"c", META, 10) == b"c@1"
        assert server.accepted == 2 and not server.errors
    finally:
        ch.close()
        server.close()


def test_a_killed_server_fails_calls_fast_and_a_restarted_one_is_reconnected():
    server = SyncEcho()
    port = server.port
    conn = GrpcConnection(server.target, "c1", transport="h2")
    try:
        assert conn._h2.call(ECHO, b"ab", META, 10) == b"ba"
        server.stop(0)
        started = time.monotonic()
        with pytest.raises(RemotingConnectError):
            conn.call("QueryRoute", v2.QueryRouteRequest(), 5)
        assert time.monotonic() - started < 3
        server = SyncEcho(port)
        assert conn._h2.call(ECHO, b"cd", META, 10) == b"dc"
    finally:
        conn.close()
        server.stop(0)


def test_rst_stream_refused_is_sent_again_and_cancel_is_an_error():
    def script(conn: RawConn, n: int) -> None:
        _handshake(conn)
        sid, _, _, _ = conn.request()
        conn.send(h.rst_stream(sid, h.REFUSED_STREAM))  # not processed: the client may send it again
        sid, _, body, _ = conn.request()
        conn.answer(sid, body[5:] + b"!")
        sid, _, _, _ = conn.request()
        conn.send(h.rst_stream(sid, h.CANCEL))
        sid, _, body, _ = conn.request()
        conn.answer(sid, body[5:] + b"?")
        conn.read(1 << 30)

    server = RawServer(script)
    ch = UnaryChannel(server.target)
    try:
        assert ch.call(ECHO, b"a", META, 10) == b"a!"
        with pytest.raises(GrpcStatusError) as info:
            ch.call(ECHO, b"b", META, 10)
        assert info.value.code == 1 and "HTTP/2 error 8" in info.value.details  # CANCELLED
        assert ch.call(ECHO, b"c", META, 10) == b"c?"
        assert server.accepted == 1  # all on one connection
    finally:
        ch.close()
        server.close()


@pytest.mark.parametrize("goodbye", [b"", h.goaway(1, h.NO_ERROR)])
def test_a_server_restarted_between_calls_is_not_an_error(goodbye):
    def script(conn: RawConn, n: int) -> None:
        _handshake(conn)
        sid, _, body, frames = conn.request()
        conn.answer(sid, body[5:] + f"@{n}".encode())
        if n == 0:
            acked = any(f[:2] == (h.SETTINGS, h.ACK) for f in frames)  # before or after the request
            while not acked:  # the client's last write: nothing after this
                acked = conn.frame()[:2] == (h.SETTINGS, h.ACK)
            conn.send(goodbye)
            conn.sock.close()  # the proxy restarts: its connections are gone before the next call
            closed.set()
            return
        conn.read(1 << 30)

    closed = threading.Event()
    server = RawServer(script)
    ch = UnaryChannel(server.target)
    try:
        assert ch.call(ECHO, b"a", META, 10) == b"a@0"
        assert closed.wait(10)
        conn = ch._conn
        if conn.usable:  # (unless the GOAWAY came with the answer, already read)
            assert select.select([conn._sock], [], [], 5)[0]  # the FIN reached the client first: the case tested
        assert ch.call(ECHO, b"b", META, 10) == b"b@1"
        assert server.accepted == 2
    finally:
        ch.close()
        server.close()


def test_deadline_and_status_map_to_the_sdk_exceptions():
    def script(conn: RawConn, n: int) -> None:
        _handshake(conn)
        sid, _, _, _ = conn.request()
        conn.read(1 << 30)  # never answers

    server = RawServer(script)
    conn = GrpcConnection(server.target, "c1", transport="h2")
    try:
        with pytest.raises(RemotingTimeoutError):
            conn.call("SendMessage", v2.SendMessageRequest(), 0.3)
    finally:
        conn.close()
        server.close()


# -- hostile servers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("answer, what", [
    (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "not an HTTP/2"),
    (h.settings({}) + b"\xff\xff\xff\x00\x00\x00\x00\x00\x01" + b"x" * 64, "frame of 16777215 bytes"),
    (h.settings({}) + h.frame(h.HEADERS, h.END_HEADERS, 1, b"\xff\xff\xff\xff\xff\xff"), "broke HTTP/2"),
    (h.settings({}) + h.frame(h.WINDOW_UPDATE, 0, 0, b"\0\0\0\0"), "malformed WINDOW_UPDATE"),
    (h.settings({}) + h.frame(h.SETTINGS, 0, 0, b"12345"), "not a multiple of 6"),
])
def test_garbage_from_the_server_is_a_clear_error_not_a_hang(answer, what):
    def script(conn: RawConn, n: int) -> None:
        conn.preface()
        conn.send(answer)
        conn.read(1 << 30)

    server = RawServer(script)
    conn = GrpcConnection(server.target, "c1", transport="h2")
    try:
        started = time.monotonic()
        with pytest.raises(RemotingError) as info:
            conn.call("SendMessage", v2.SendMessageRequest(), 10)
        assert what in str(info.value) and time.monotonic() - started < 3
    finally:
        conn.close()
        server.close()


def _drain(conn: RawConn) -> None:
    try:
        conn.read(1 << 40)
    except OSError:
        pass


def test_a_server_that_only_pings_does_not_hold_the_caller_past_its_deadline():
    def script(conn: RawConn, n: int) -> None:
        _handshake(conn)
        conn.request()
        threading.Thread(target=_drain, args=(conn,), daemon=True).start()  # takes the client's ACKs
        pings = h.frame(h.PING, 0, 0, b"12345678") * 1000
        while True:  # never a pause in which the client would find nothing to read
            conn.send(pings)

    server = RawServer(script)
    ch = UnaryChannel(server.target)
    try:
        started = time.monotonic()
        with pytest.raises(GrpcStatusError) as info:
            ch.call(ECHO, b"x", META, 0.5)
        assert info.value.code == 4 and time.monotonic() - started < 3
    finally:
        ch.close()
        server.close()


def test_an_absurd_message_length_is_refused_before_it_is_read():
    def script(conn: RawConn, n: int) -> None:
        _handshake(conn)
        sid, _, _, _ = conn.request()
        head = conn.encoder.encode([(":status", "200"), ("content-type", "application/grpc")])
        conn.send(h.frame(h.HEADERS, h.END_HEADERS, sid, head) + h.frame(h.DATA, 0, sid, b"\0\xff\xff\xff\xffabc"))
        conn.read(1 << 30)

    server = RawServer(script)
    ch = UnaryChannel(server.target, max_message_bytes=1 << 20)
    try:
        with pytest.raises(GrpcStatusError) as info:
            ch.call(ECHO, b"x", META, 10)
        assert info.value.code == 8 and "4294967295 bytes" in info.value.details
    finally:
        ch.close()
        server.close()


def test_transport_switch():
    assert GrpcConnection("127.0.0.1:1", "c").transport == "h2"
    assert GrpcConnection("127.0.0.1:1", "c", transport="grpcio")._h2 is None
    with pytest.raises(ValueError, match="'h3' is not 'h2' or 'grpcio'"):
        GrpcConnection("127.0.0.1:1", "c", transport="h3")


def test_a_server_that_stops_reading_fails_the_write_after_the_write_timeout(monkeypatch):
    """The server grants 64 MiB of window and 16 MiB frames, then reads nothing: a write that
    cannot finish fails the call (UNAVAILABLE) after WRITE_TIMEOUT_S, not at the caller's deadline
    (nor when the server gives up after 8 s). A first write that blocks is sent again on a new
    connection (up to three); one that blocks after the first frame (when the server's SETTINGS
    arrived after the call was written) fails the call at once."""
    from rocketmq_sdk.grpc import h2_connection

    monkeypatch.setattr(h2_connection, "WRITE_TIMEOUT_S", 0.3)
    done = threading.Event()

    def script(conn: RawConn, n: int) -> None:
        assert conn.preface() == h.PREFACE
        conn.send(h.settings({h.INITIAL_WINDOW_SIZE: h.MAX_WINDOW, h.MAX_FRAME_SIZE: h.MAX_FRAME_LIMIT})
                  + h.window_update(0, 64 << 20))
        done.wait(8)  # reads nothing more (then closes: a client without a write timeout fails late)
        conn.sock.close()

    server = RawServer(script)
    ch = UnaryChannel(server.target)
    try:
        started = time.monotonic()
        with pytest.raises(GrpcStatusError) as info:
            ch.call(ECHO, b"x" * (40 << 20), META, 15)
        assert info.value.code == 14 and time.monotonic() - started < 6
        assert 1 <= server.accepted <= 3
    finally:
        done.set()
        ch.close()
        server.close()


def test_a_failed_call_after_answers_with_the_same_headers_is_still_an_error():
    """The client skips re-checking an answer whose header blocks are the very ones of the last
    OK answer: a failed call with the same response headers but other trailers must still fail."""
    def script(conn: RawConn, n: int) -> None:
        _handshake(conn)
        for status in (0, 0, 0, 5, 0):
            sid, _, body, _ = conn.request()
            conn.answer(sid, body[5:] + b"!", status)
        conn.read(1 << 30)

    server = RawServer(script)
    ch = UnaryChannel(server.target)
    try:
        assert [ch.call(ECHO, b"%d" % i, META, 10) for i in range(3)] == [b"0!", b"1!", b"2!"]
        with pytest.raises(GrpcStatusError) as info:
            ch.call(ECHO, b"3", META, 10)
        assert info.value.code == 5
        assert ch.call(ECHO, b"4", META, 10) == b"4!"
        assert server.accepted == 1 and not server.errors
    finally:
        ch.close()
        server.close()
