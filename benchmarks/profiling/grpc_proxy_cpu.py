"""Server CPU per gRPC sync send, by thread, with the proxy in local and in cluster mode, plus the
floor of the server itself (an echo of the same size on grpc.aio's server and on the proxy's own).

A name server, a 5.x broker and the proxy run in this process (the broker on the main loop, as
``dev``); each client of ``benchmarks/grpc_clients.py`` sends ``-n`` messages in a worker process
while ``/proc/self/task/*/stat`` gives each thread's CPU. Prints, per mode and client: send rate,
client CPU µs/msg, server CPU µs/msg per thread (``name/tid``: the main thread, tid = pid, runs the
broker's loop and in local mode the proxy; in cluster mode the proxy's loop thread is the busiest
other ``python`` thread; ``event_engine`` and the remaining ones are grpc's) and in total; then the echo floor (grpc.aio server CPU and sync-stub client CPU per call).

    .venv/bin/python benchmarks/profiling/grpc_proxy_cpu.py [-n 2000] [--clients sdk-grpc,sdk-grpcio,official]
        [--echo-only]

(``sdk-grpcio``: this SDK with ``ROCKETMQ_GRPC_TRANSPORT=grpcio``; the echo floor runs grpcio's sync
stub and this SDK's HTTP/2 ``UnaryChannel`` alternately. The proxy runs on the server chosen by
``ROCKETMQ_GRPC_SERVER``: own by default, grpcio for grpc.aio's.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import grpc_clients  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")
_ECHO = "/bench.Echo/Call"


def thread_cpu() -> dict[tuple[str, str], float]:
    """CPU seconds of each thread of this process, by (tid, name)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[(tid, name)] = (int(fields[11]) + int(fields[12])) / _TICK
    return out


async def start_broker(prefix: str) -> tuple:
    """A name server and a 5.x broker on the running loop (as ``dev``): ``(ns, broker, config)``."""
    from rocketmq_broker.broker.config import BrokerConfig
    from rocketmq_broker.broker.controller import BrokerController
    from rocketmq_broker.namesrv.server import NameServer, NamesrvConfig

    ns = NameServer(NamesrvConfig(listen_port=0))
    await ns.start()
    cfg = BrokerConfig(broker_name="b", listen_port=0, namesrv_addr=ns.addr, store_path_root_dir=tempfile.mkdtemp(
        prefix=prefix), broker_version="5.3.3")
    broker = BrokerController(cfg)
    await broker.start()
    return ns, broker, cfg


async def measure(mode: str, clients: list[str], n: int) -> None:
    from rocketmq_broker.proxy import GrpcProxy

    ns, broker, cfg = await start_broker("grpc-proxy-cpu-")
    if mode == "local":
        proxy = GrpcProxy(ns.addr, local_broker=(broker.server, cfg.broker_addr))
        await proxy.serve()
    else:
        proxy = GrpcProxy(ns.addr)
        proxy.start()
    loop = asyncio.get_running_loop()
    try:
        for kind in clients:
            topic = f"cpu_{mode}_{kind.replace('-', '_')}"
            await loop.run_in_executor(None, grpc_clients.run_worker, "send", kind, proxy.addr, ns.addr, topic, 200)
            before = thread_cpu()
            r = await loop.run_in_executor(None, grpc_clients.run_worker, "send", kind, proxy.addr, ns.addr, topic, n)
            after = thread_cpu()
            per = {k: (v - before.get(k, 0.0)) / (n + 200) * 1e6 for k, v in after.items()}  # + the warm-up
            busy = {k[1] + "/" + k[0]: round(v) for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v >= 5}
            print(f"{mode:7} {kind:12} {r['n'] / r['wall_s']:6.0f} msgs/s  client {r['cpu_s'] / r['n'] * 1e6:4.0f} "
                  f"µs/msg  server {sum(per.values()):4.0f} µs/msg {busy}", flush=True)
    finally:
        if mode == "local":
            await proxy.aclose()
        else:
            proxy.stop()
        await broker.stop()
        await ns.stop()


class _Context:
    """What the handler reads of a grpc.aio call context."""

    def invocation_metadata(self) -> tuple:
        return (("x-mq-client-id", "bench"),)

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    async def abort(self, code: object, details: str) -> None:
        raise RuntimeError(details)


async def path_without_grpc(n: int) -> None:
    from rocketmq_broker.proxy import GrpcProxy
    from rocketmq_sdk import Message, Producer

    ns, broker, cfg = await start_broker("grpc-proxy-cpu-")
    raw = Producer("bench_pg", endpoints="127.0.0.1:1", protocol="grpc")._request(
        [Message("cpu_path", b"x" * 128)])[0].SerializeToString()
    for mode in ("local", "cluster"):
        proxy = GrpcProxy(ns.addr, local_broker=(broker.server, cfg.broker_addr) if mode == "local" else None)
        await proxy.serve()
        call, ctx = proxy.service._unary("SendMessage"), _Context()
        for _ in range(300):
            await call(raw, ctx)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            await call(raw, ctx)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"path    {mode:7}      proxy + broker without grpc: {cpu / n * 1e6:4.0f} µs CPU "
              f"({wall / n * 1e6:.0f} µs wall) per send", flush=True)
        await proxy.aclose()
    await broker.stop()
    await ns.stop()


def echo_client(target: str, n: int, transport: str) -> None:
    md = tuple((f"x-mq-h{i}", "v" * 30) for i in range(8))
    if transport == "h2":
        from rocketmq_sdk.grpc.unary import UnaryChannel

        channel = UnaryChannel(target)

        def call(request: bytes, metadata: tuple, timeout: float) -> bytes:
            return channel.call(_ECHO, request, metadata, timeout)
    else:
        import grpc

        call = grpc.insecure_channel(target).unary_unary(_ECHO)
    for _ in range(300):
        call(b"x" * 300, metadata=md, timeout=3)
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(n):
        call(b"x" * 300, metadata=md, timeout=3)
    r1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    print(f"{n / wall:.0f} {cpu / n * 1e6:.0f}")


async def echo_floor(n: int) -> None:
    """The echo on grpc.aio's server and on the proxy's own (``rocketmq_broker.proxy.h2_server``)."""
    import grpc
    from rocketmq_broker.proxy.h2_calls import UNARY, Method
    from rocketmq_broker.proxy.h2_server import H2GrpcServer

    async def echo(req: bytes, ctx: object) -> bytes:
        return req

    aio = grpc.aio.server()
    aio.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "bench.Echo", {"Call": grpc.unary_unary_rpc_method_handler(echo)}),))
    aio_port = aio.add_insecure_port("127.0.0.1:0")
    await aio.start()
    own = H2GrpcServer({_ECHO: Method(UNARY, echo)})
    own_port = await own.start("127.0.0.1", 0)
    for transport in ("grpcio", "h2", "grpcio", "h2"):
        for server, port in (("grpc.aio", aio_port), ("own", own_port)):
            before = thread_cpu()
            out = await asyncio.get_running_loop().run_in_executor(None, lambda t=transport, p=port: subprocess.run(
                [sys.executable, __file__, "--echo-client", f"127.0.0.1:{p}", str(n), t], capture_output=True,
                text=True, timeout=300))
            after = thread_cpu()
            rate, client_us = out.stdout.split()
            server_us = sum(v - before.get(k, 0.0) for k, v in after.items()) / (n + 300) * 1e6
            client = "sync stub" if transport == "grpcio" else "the SDK's HTTP/2 UnaryChannel"
            print(f"echo    {transport:12} {rate:>6} calls/s client {client_us:>4} µs/call server {server_us:4.0f} "
                  f"µs/call ({server} server, {client}, 300 B, 8 headers)", flush=True)
    await aio.stop(0)
    await own.stop(0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--clients", default="sdk-grpc,sdk-grpcio,official")
    ap.add_argument("--echo-only", action="store_true", help="only the echo floor (grpcio stub vs HTTP/2 channel)")
    args = ap.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    if args.echo_only:
        asyncio.run(echo_floor(args.n))
        return 0
    clients = args.clients.split(",")
    for mode in ("cluster", "local", "cluster", "local"):
        asyncio.run(measure(mode, clients, args.n))
    asyncio.run(path_without_grpc(args.n))
    asyncio.run(echo_floor(args.n))
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--echo-client":
        echo_client(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        sys.exit(0)
    sys.exit(main())
