"""Where a sync send's time goes: client components, cProfile of both SDK threads, and the broker.

Usage: ``python benchmarks/profiling/profile_send.py [--count 5000] [--part client,components,broker]
[--top 25]``. Numbers feed ``benchmarks/profiling/LOG.md``.

* ``components``: per-call cost (µs) of each step of ``Producer.send`` measured alone in this
  process: Message construction, UNIQ_KEY, properties string, V2 header, RemotingCommand encode,
  response decode, the thread hop (``EventLoopThread.run`` of an empty coroutine), a local
  TCP echo round trip over asyncio.
* ``client``: ``count`` sync sends against a reference broker subprocess, with one cProfile in
  the caller thread and one in the I/O loop thread; prints both top lists (tottime).
* ``broker``: runs the broker under ``python -m cProfile`` (its main thread: the asyncio loop),
  drives ``count`` SDK sync sends, stops it with SIGTERM and prints the broker's top list.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any


def per_call_us(fn: Callable[[], Any], n: int = 20_000) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def profile_with_loop(p: Any, work: Callable[[], object]) -> tuple[cProfile.Profile, cProfile.Profile]:
    """Run ``work()`` with one cProfile in this (the caller) thread and one in the I/O loop thread
    of producer ``p``; returns (caller thread profile, loop thread profile)."""
    main_prof, loop_prof = cProfile.Profile(), cProfile.Profile()
    loop = p.instance.loop_thread.loop
    ev = threading.Event()
    loop.call_soon_threadsafe(lambda: (loop_prof.enable(), ev.set()))
    ev.wait(5)
    main_prof.enable()
    work()
    main_prof.disable()
    ev.clear()
    loop.call_soon_threadsafe(lambda: (loop_prof.disable(), ev.set()))
    ev.wait(5)
    return main_prof, loop_prof


def components() -> None:
    from rocketmq_sdk import Message
    from rocketmq_sdk.config import ProducerConfig
    from rocketmq_sdk.producer.prepare import MessagePreparer
    from rocketmq_sdk.protocol.message_codec import encode_properties
    from rocketmq_sdk.protocol.msgid import create_uniq_id
    from rocketmq_sdk.remoting.command import RemotingCommand
    from rocketmq_sdk.remoting.loop import EventLoopThread

    body = b"x" * 100
    # what Producer("bench_components") prepares: no network needed
    p = MessagePreparer("bench_components", ProducerConfig.from_kwargs(namesrv_addr="127.0.0.1:9"))
    msg = Message("BenchTopic", body)
    props = dict(msg.properties)
    props["UNIQ_KEY"] = create_uniq_id()
    prepared = p.prepare(Message("BenchTopic", body))
    ext = dict(prepared.ext, e="1", n="broker-a")
    req = RemotingCommand.request(310, ext, body)
    frame = req.encode()
    resp = RemotingCommand.response_command(0, None) if hasattr(RemotingCommand, "response_command") else None
    resp = req.response(0, ext_fields={"msgId": "7F00000100002A9F0000000000000000", "queueId": "1",
                                       "queueOffset": "123", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
    resp.opaque = req.opaque
    resp_inner = resp.encode()[4:]
    req_inner = frame[4:]
    rows = [
        ("Message(topic, body)", per_call_us(lambda: Message("BenchTopic", body))),
        ("create_uniq_id()", per_call_us(create_uniq_id)),
        ("encode_properties(UNIQ_KEY, WAIT)", per_call_us(lambda: encode_properties(props))),
        ("MessagePreparer.prepare (check + uniq id + props + header)", per_call_us(
            lambda: p.prepare(Message("BenchTopic", body)))),
        ("  of which MessagePreparer.header", per_call_us(
            lambda: p.header("BenchTopic", 0, 0, "UNIQ_KEY\x01X\x02WAIT\x01true", False))),
        ("RemotingCommand.request(...)", per_call_us(lambda: RemotingCommand.request(310, ext, body))),
        ("RemotingCommand.encode() (request)", per_call_us(req.encode)),
        ("RemotingCommand.decode() (send response)", per_call_us(lambda: RemotingCommand.decode(resp_inner))),
        ("RemotingCommand.decode() (send request, broker side)", per_call_us(lambda: RemotingCommand.decode(req_inner))),
        ("RemotingCommand.encode() (send response, broker side)", per_call_us(resp.encode)),
    ]
    lt = EventLoopThread("bench-hop")

    async def noop() -> None:
        return None

    rows.append(("thread hop: EventLoopThread.run(noop()) round trip", per_call_us(lambda: lt.run(noop(), 5), 5_000)))
    c0 = cpu_s()
    n = 5_000
    for _ in range(n):
        lt.run(noop(), 5)
    rows.append(("  CPU (both threads) per hop", (cpu_s() - c0) / n * 1e6))
    lt.stop()
    rows += tcp_echo()
    print("| step | µs per call |\n|---|---:|")
    for name, us in rows:
        print(f"| {name} | {us:.2f} |")


def tcp_echo() -> list[tuple[str, float]]:
    """A 400-byte request/response over asyncio TCP on 127.0.0.1 (both ends in one loop)."""

    class Echo(asyncio.Protocol):
        def connection_made(self, t: Any) -> None:
            self.t = t

        def data_received(self, data: bytes) -> None:
            self.t.write(data)

    async def run(n: int) -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        waiter: list[asyncio.Future] = []

        class Client(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                waiter[0].set_result(data)

        t, _ = await loop.create_connection(Client, "127.0.0.1", port)
        payload = b"x" * 400
        c0, t0 = cpu_s(), time.perf_counter()
        for _ in range(n):
            waiter[:] = [loop.create_future()]
            t.write(payload)
            await waiter[0]
        el, cpu = time.perf_counter() - t0, cpu_s() - c0
        t.close()
        server.close()
        return el / n * 1e6, cpu / n * 1e6

    wall, cpu = asyncio.run(run(5_000))
    return [("asyncio TCP echo round trip, 400 B, both ends in one loop (wall)", wall),
            ("  CPU per round trip (client + echo server)", cpu)]


def top(prof: cProfile.Profile | pstats.Stats, n: int, title: str) -> None:
    out = io.StringIO()
    st = prof if isinstance(prof, pstats.Stats) else pstats.Stats(prof, stream=out)
    st.stream = out
    st.sort_stats("tottime").print_stats(n)
    print(f"### {title}\n```")
    print("\n".join(ln for ln in out.getvalue().splitlines() if ln.strip())[:12000])
    print("```")


def client(count: int, n_top: int) -> None:
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk import Message, Producer

    with start_dev_cluster() as cluster:
        p = Producer("bench_profile", cluster.namesrv_addr)
        p.start()
        body = b"x" * 100
        for _ in range(200):
            p.send(Message("ProfTopic", body))
        # unprofiled reference
        c0, t0 = cpu_s(), time.perf_counter()
        for _ in range(count):
            p.send(Message("ProfTopic", body))
        el, cpu = time.perf_counter() - t0, cpu_s() - c0
        print(f"unprofiled: {count / el:,.0f} sends/s, client CPU {cpu / count * 1e6:.1f} µs/send, "
              f"wall {el / count * 1e6:.1f} µs/send")

        def sends() -> None:
            for _ in range(count):
                p.send(Message("ProfTopic", body))

        main_prof, loop_prof = profile_with_loop(p, sends)
        p.shutdown()
    top(main_prof, n_top, f"caller thread, {count} sync sends (tottime)")
    top(loop_prof, n_top, f"I/O loop thread, {count} sync sends (tottime)")


def broker(count: int, n_top: int) -> None:
    from rocketmq_sdk import Message, Producer

    store = tempfile.mkdtemp(prefix="bench-prof-store-")
    out = os.path.join(store, "broker.prof")
    proc = subprocess.Popen([sys.executable, "-m", "cProfile", "-o", out, "-m", "rocketmq_broker", "dev",
                             "--store-dir", store, "--commit-log-file-size", str(256 * 1024 * 1024)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        lines: dict[str, str] = {}
        deadline = time.monotonic() + 30
        assert proc.stdout is not None
        while time.monotonic() < deadline and "READY" not in lines:
            kind, _, value = proc.stdout.readline().strip().partition(" ")
            lines[kind] = value
        p = Producer("bench_profile_b", lines["NAMESRV"])
        p.start()
        body = b"x" * 100
        t0 = time.perf_counter()
        for _ in range(count):
            p.send(Message("ProfTopic", body))
        el = time.perf_counter() - t0
        p.shutdown()
        print(f"broker under cProfile: {count / el:,.0f} sends/s")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    if os.path.exists(out):
        top(pstats.Stats(out), n_top, f"broker main thread, {count} sync sends (tottime)")
    else:
        print("broker profile not written (the broker did not exit normally)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--part", default="components,client,broker")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    parts = args.part.split(",")
    if "components" in parts:
        components()
    if "client" in parts:
        client(args.count, args.top)
    if "broker" in parts:
        broker(args.count, args.top)


if __name__ == "__main__":
    main()
