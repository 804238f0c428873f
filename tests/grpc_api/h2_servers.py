"""Servers for the tests of the SDK's HTTP/2 unary transport (``rocketmq_sdk.grpc.unary``): an echo
service on grpc.aio or a sync ``grpc.server``, and a scripted raw HTTP/2 server (frames written by
the test) for the wire format, GOAWAY and hostile answers."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from concurrent import futures

import grpc
import hpack
from rocketmq_sdk.grpc import http2 as h

ECHO = "/test.Echo/Echo"
SLOW = "/test.Echo/Slow"
FAIL = "/test.Echo/Fail"
OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024), ("grpc.max_send_message_length", 64 * 1024 * 1024)]


def _handlers(release: threading.Event) -> grpc.GenericRpcHandler:
    def echo(request: bytes, context) -> bytes:
        return request[::-1]

    def slow(request: bytes, context) -> bytes:
        release.wait(10)
        return request

    def fail(request: bytes, context) -> bytes:
        context.abort(grpc.StatusCode.NOT_FOUND, "no such thing: " + request.decode() + " é%")

    return grpc.method_handlers_generic_handler("test.Echo", {
        "Echo": grpc.unary_unary_rpc_method_handler(echo),
        "Slow": grpc.unary_unary_rpc_method_handler(slow),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
    })


class SyncEcho:
    """The echo service (Echo answers the request reversed) on a sync ``grpc.server``."""

    def __init__(self, port: int = 0, credentials: grpc.ServerCredentials | None = None) -> None:
        self.release = threading.Event()
        self.server = grpc.server(futures.ThreadPoolExecutor(8), handlers=[_handlers(self.release)], options=OPTIONS)
        addr = f"127.0.0.1:{port}"
        self.port = (self.server.add_secure_port(addr, credentials) if credentials
                     else self.server.add_insecure_port(addr))
        self.server.start()
        self.target = f"127.0.0.1:{self.port}"

    def stop(self, grace: float | None = None) -> None:
        self.release.set()
        self.server.stop(grace).wait(10)


class AioEcho:
    """The echo service on a grpc.aio server in a loop thread of its own."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start() -> int:
            self.server = grpc.aio.server(handlers=[_async_handlers(self.release)], options=OPTIONS)
            port = self.server.add_insecure_port("127.0.0.1:0")
            await self.server.start()
            return port

        self.port = asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        self.target = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.release.set()
        asyncio.run_coroutine_threadsafe(self.server.stop(0), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _async_handlers(release: threading.Event) -> grpc.GenericRpcHandler:
    async def echo(request: bytes, context) -> bytes:
        return request[::-1]

    async def slow(request: bytes, context) -> bytes:
        while not release.is_set():
            await asyncio.sleep(0.01)
        return request

    async def fail(request: bytes, context) -> bytes:
        await context.abort(grpc.StatusCode.NOT_FOUND, "no such thing: " + request.decode() + " é%")

    return grpc.method_handlers_generic_handler("test.Echo", {
        "Echo": grpc.unary_unary_rpc_method_handler(echo),
        "Slow": grpc.unary_unary_rpc_method_handler(slow),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
    })


class RawConn:
    """One accepted connection of :class:`RawServer`: frames in, frames out."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.encoder = hpack.Encoder()  # Huffman + dynamic table: what the client must decode
        self.decoder = hpack.Decoder()

    def read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("client closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def preface(self) -> bytes:
        return self.read(len(h.PREFACE))

    def frame(self) -> tuple[int, int, int, bytes]:
        """(type, flags, stream id, payload) of the next frame."""
        length, kind, flags, sid = h.parse_head(self.read(9))
        return kind, flags, sid, self.read(length)

    def request(self) -> tuple[int, list[tuple[str, str]], bytes, list[tuple[int, int, int, bytes]]]:
        """Frames up to a request's END_STREAM: (stream id, headers, body, every frame read)."""
        frames, headers, body = [], [], b""
        while True:
            f = self.frame()
            frames.append(f)
            kind, flags, sid, payload = f
            if kind == h.HEADERS:
                headers = [(k, v) for k, v in self.decoder.decode(payload)]
            elif kind == h.DATA:
                body += payload
            if kind in (h.HEADERS, h.DATA) and flags & h.END_STREAM:
                return sid, headers, body, frames

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def answer(self, sid: int, message: bytes, status: int = 0) -> None:
        """HEADERS, DATA (one gRPC message) and trailers."""
        head = self.encoder.encode([(":status", "200"), ("content-type", "application/grpc")])
        trailers = self.encoder.encode([("grpc-status", str(status)), ("grpc-message", "")])
        self.send(h.frame(h.HEADERS, h.END_HEADERS, sid, head)
                  + h.frame(h.DATA, 0, sid, b"\0" + len(message).to_bytes(4, "big") + message)
                  + h.frame(h.HEADERS, h.END_HEADERS | h.END_STREAM, sid, trailers))


class RawServer:
    """A listening socket on 127.0.0.1; ``script(conn, n)`` runs for the n-th accepted connection
    (0, 1 ...) in a daemon thread; what it raises is kept in ``errors``."""

    def __init__(self, script: Callable[[RawConn, int], None]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(10)
        self.target = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.script = script
        self.accepted = 0
        self.errors: list[BaseException] = []
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            sock.settimeout(10)
            self.conns.append(sock)
            n, self.accepted = self.accepted, self.accepted + 1
            threading.Thread(target=self._serve, args=(sock, n), daemon=True).start()

    def _serve(self, sock: socket.socket, n: int) -> None:
        try:
            self.script(RawConn(sock), n)
        except (ConnectionError, TimeoutError, OSError):
            pass
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)

    def close(self) -> None:
        self.listener.close()
        for sock in self.conns:
            try:
                sock.close()
            except OSError:
                pass
