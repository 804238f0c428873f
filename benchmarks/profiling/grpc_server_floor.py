"""Where the gRPC proxy's server CPU per sync send goes (issue 31), and what a server of our own
would cost instead of grpc.aio.

1. ``split``: the local-mode proxy (name server, 5.x broker and proxy in this process, as ``dev``)
   serving this SDK's gRPC producer (``benchmarks/grpc_clients.py`` worker), alternately with its
   real SendMessage and with SendMessage answered by a canned response (``Producing.send`` replaced:
   grpc.aio, the service's generic handler, request parse and response serialisation still run;
   the proxy's send path and the broker's put do not). The difference is what the proxy + broker cost inside the serving
   process; the canned figure is grpc.aio's share. Per-thread CPU as ``grpc_proxy_cpu.py``.
2. ``floor``: the same sync grpcio echo client (300 B, 8 headers) against grpc.aio
   (``grpc_proxy_cpu.echo_floor``) and against :class:`_EchoH2`, a minimal asyncio HTTP/2 server
   answering unary gRPC calls (HPACK decoding by the ``hpack`` library): a measurement of the floor
   an HTTP/2 server of our own would have, NOT a server (no flow control beyond a connection
   window update, no streams but unary, no TLS, no limits), and :class:`_EchoH2Lib`, the same on
   the ``h2`` library (its state machine, HPACK and flow control).

    .venv/bin/python benchmarks/profiling/grpc_server_floor.py [-n 3000] [--rounds 2] [--only split|floor]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import grpc_clients  # noqa: E402
import grpc_proxy_cpu  # noqa: E402
from rocketmq_sdk.grpc.http2 import frame, literal  # noqa: E402

_U32 = struct.Struct(">I")


def _literal(headers: list[tuple[str, str]]) -> bytes:
    """A header block of literal fields without indexing (RFC 7541 §6.2.2, new names)."""
    return b"".join(literal(k, v) for k, v in headers)


class _EchoH2(asyncio.Protocol):
    """Unary gRPC echo over HTTP/2: the measurement prototype described in the module docstring."""

    def __init__(self) -> None:
        import hpack

        self.buf = bytearray()
        self.preface = False
        self.decoder = hpack.Decoder()
        self.bodies: dict[int, bytearray] = {}
        self.unacked = 0
        self.head = _literal([(":status", "200"), ("content-type", "application/grpc")])
        self.trailers = _literal([("grpc-status", "0")])

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        # SETTINGS (INITIAL_WINDOW_SIZE 1 MiB) and a connection window of 16 MiB
        transport.write(frame(4, 0, 0, struct.pack(">HI", 4, 1 << 20)) + frame(8, 0, 0, _U32.pack(1 << 24)))  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        if not self.preface:
            if len(buf) < 24:
                return
            del buf[:24]
            self.preface = True
        pos, n, out = 0, len(buf), []
        while n - pos >= 9:
            length = buf[pos] << 16 | buf[pos + 1] << 8 | buf[pos + 2]
            if n - pos < 9 + length:
                break
            kind, flags = buf[pos + 3], buf[pos + 4]
            sid = _U32.unpack_from(buf, pos + 5)[0] & 0x7FFFFFFF
            payload = bytes(buf[pos + 9:pos + 9 + length])
            pos += 9 + length
            if kind == 1:  # HEADERS
                self.decoder.decode(payload)
                self.bodies[sid] = bytearray()
            elif kind == 0:  # DATA
                self.bodies.setdefault(sid, bytearray()).extend(payload)
                self.unacked += length
            elif kind == 4 and not flags & 1:  # SETTINGS: ack
                out.append(frame(4, 1, 0))
            elif kind == 6 and not flags & 1:  # PING: ack
                out.append(frame(6, 1, 0, payload))
            if kind in (0, 1) and flags & 1:  # END_STREAM: answer
                body = bytes(self.bodies.pop(sid, b"")[5:])
                out += [frame(1, 4, sid, self.head), frame(0, 0, sid, b"\x00" + _U32.pack(len(body)) + body),
                        frame(1, 5, sid, self.trailers)]
        del buf[:pos]
        if self.unacked > 1 << 19:
            out.append(frame(8, 0, 0, _U32.pack(self.unacked)))
            self.unacked = 0
        if out:
            self.transport.write(b"".join(out))  # type: ignore[attr-defined]


class _EchoH2Lib(asyncio.Protocol):
    """The same echo on the ``h2`` library's connection state machine (frames, HPACK, flow control)."""

    def __init__(self) -> None:
        import h2.config
        import h2.connection

        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
        self.bodies: dict[int, bytearray] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window(1 << 24)
        transport.write(self.conn.data_to_send())  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        import h2.events as ev

        conn = self.conn
        for event in conn.receive_data(data):
            if isinstance(event, ev.RequestReceived):
                self.bodies[event.stream_id] = bytearray()
            elif isinstance(event, ev.DataReceived):
                self.bodies.setdefault(event.stream_id, bytearray()).extend(event.data)
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, ev.StreamEnded):
                sid = event.stream_id
                body = bytes(self.bodies.pop(sid, b"")[5:])
                conn.send_headers(sid, ((b":status", b"200"), (b"content-type", b"application/grpc")))
                conn.send_data(sid, b"\x00" + _U32.pack(len(body)) + body)
                conn.send_headers(sid, ((b"grpc-status", b"0"),), end_stream=True)
        out = conn.data_to_send()
        if out:
            self.transport.write(out)  # type: ignore[attr-defined]


def _echo_client_args(port: int, n: int) -> list[str]:
    args = [sys.executable, grpc_proxy_cpu.__file__, "--echo-client", f"127.0.0.1:{port}", str(n)]
    if "transport" in inspect.signature(grpc_proxy_cpu.echo_client).parameters:
        args.append("grpcio")
    return args


async def own_h2_floor(n: int, protocol: type[asyncio.Protocol] = _EchoH2) -> None:
    need = "hpack" if protocol is _EchoH2 else "h2"
    try:
        __import__(need)
    except ImportError:
        print(f"echo    skipped: {protocol.__name__} needs the {need} package (pip install {need})", flush=True)
        return
    loop = asyncio.get_running_loop()
    server = await loop.create_server(protocol, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    before = grpc_proxy_cpu.thread_cpu()
    out = await loop.run_in_executor(None, lambda: subprocess.run(_echo_client_args(port, n), capture_output=True,
                                                                  text=True, timeout=300))
    after = grpc_proxy_cpu.thread_cpu()
    server.close()
    rate, client_us = out.stdout.split()
    server_us = sum(v - before.get(k, 0.0) for k, v in after.items()) / (n + 300) * 1e6
    label, what = ("own-h2", "hand-framed") if protocol is _EchoH2 else ("h2-lib", "h2 library's")
    print(f"echo    {label:12} {rate:>6} calls/s client {client_us:>4} µs/call server {server_us:4.0f} µs/call "
          f"(asyncio HTTP/2 prototype, {what}, sync stub, 300 B, 8 headers)", flush=True)


async def split(n: int, canned: bool) -> None:
    from rocketmq_broker.proxy import GrpcProxy
    from rocketmq_broker.proxy.status import status
    from rocketmq_sdk.grpc import v2

    ns, broker, cfg = await grpc_proxy_cpu.start_broker("grpc-server-floor-")
    proxy = GrpcProxy(ns.addr, local_broker=(broker.server, cfg.broker_addr))
    await proxy.serve()
    assert proxy.service is not None
    topic = "floor_split"
    if canned:
        answer = v2.SendMessageResponse(status=status())
        entry = answer.entries.add(status=status(), message_id="0" * 32, offset=1)
        del entry
        real = proxy.service.producing.send

        async def send(req):  # the warm-up's route and topic creation go through
            return answer if canned_on else await real(req)

        proxy.service.producing.send = send  # type: ignore[method-assign]
    loop = asyncio.get_running_loop()
    try:
        canned_on = False
        await loop.run_in_executor(None, grpc_clients.run_worker, "send", "sdk-grpc", proxy.addr, ns.addr, topic, 200)
        canned_on = True
        before = grpc_proxy_cpu.thread_cpu()
        r = await loop.run_in_executor(None, grpc_clients.run_worker, "send", "sdk-grpc", proxy.addr, ns.addr, topic, n)
        after = grpc_proxy_cpu.thread_cpu()
        per = {k: (v - before.get(k, 0.0)) / (n + 200) * 1e6 for k, v in after.items()}
        main = sum(v for (tid, _), v in per.items() if int(tid) == os.getpid())
        label = "canned" if canned else "real"
        print(f"split   {label:12} {r['n'] / r['wall_s']:6.0f} msgs/s client {r['cpu_s'] / r['n'] * 1e6:4.0f} µs/msg "
              f"server {sum(per.values()):4.0f} µs/msg (main thread {main:4.0f}, grpc's threads "
              f"{sum(per.values()) - main:4.0f})", flush=True)
    finally:
        await proxy.aclose()
        await broker.stop()
        await ns.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", choices=("split", "floor"))
    args = ap.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores", flush=True)
    for _ in range(args.rounds):
        if args.only != "floor":
            asyncio.run(split(args.n, canned=False))
            asyncio.run(split(args.n, canned=True))
        if args.only != "split":
            asyncio.run(grpc_proxy_cpu.echo_floor(args.n))
            asyncio.run(own_h2_floor(args.n))
            asyncio.run(own_h2_floor(args.n, _EchoH2Lib))
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
