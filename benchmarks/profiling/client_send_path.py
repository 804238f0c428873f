"""Client CPU of the producer's send paths without a network: the broker's answers come from a
fake socket (sync sends in the caller thread) or a fake asyncio transport (async and oneway
sends on the I/O loop), so only the SDK's Python work is measured.

Usage: ``python benchmarks/profiling/client_send_path.py [--count 20000] [--modes sync,async,oneway,batch]
[--rounds 3] [--profile MODE]``.

A real reference broker (``start_dev_cluster``) serves the route lookup and the warm-up send;
then the calling thread's blocking connection and the I/O loop's channel to the broker are
swapped for fakes that answer every request at once with a canned SEND_MESSAGE response
carrying the request's opaque (the fake's own cost, ~2 µs per answer, is in every number).
Prints µs of process CPU (all threads, ``getrusage``) per message for each mode and round;
``--profile MODE`` prints a cProfile top list of one more run of that mode (caller thread only
for sync/batch; for async and oneway the loop thread is profiled too).

Compare two trees by running this script with ``PYTHONPATH`` pointing at each (interleave the
runs: the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import pstats
import re
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.remoting.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from profile_send import profile_with_loop  # noqa: E402 - benchmarks/profiling/profile_send.py

_OPAQUE = re.compile(rb'"opaque":(\d+)')
_FLAG = re.compile(rb'"flag":(\d+)')
TOPIC = "PathBench"


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _response_frames(data: bytes) -> list[bytes]:
    """Canned SEND_OK answers to every non-oneway request frame in ``data``."""
    out = []
    pos = 0
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        hlen = int.from_bytes(data[pos + 4:pos + 8], "big") & 0xFFFFFF
        header = data[pos + 8:pos + 8 + hlen]
        pos += 4 + length
        if int(_FLAG.search(header).group(1)) & FLAG_ONEWAY:
            continue
        opaque = int(_OPAQUE.search(header).group(1))
        resp = RemotingCommand(0, opaque=opaque, flag=FLAG_RESPONSE, ext_fields={
            "msgId": "7F00000100002A9F0000000000001234", "queueId": "1", "queueOffset": "123",
            "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
        out.append(resp.encode())
    return out


class FakeSocket:
    """Blocking-socket stand-in: ``sendall`` queues the answers that ``recv`` returns."""

    def __init__(self) -> None:
        self.pending: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.pending.extend(_response_frames(bytes(data)))

    def recv(self, _n: int) -> bytes:
        data = b"".join(self.pending)
        self.pending.clear()
        return data

    def setsockopt(self, *_a: Any) -> None:
        pass

    def fileno(self) -> int:
        return -1  # select() refuses it: the idle check never finds the fake closed

    def settimeout(self, _t: Any) -> None:
        pass

    def close(self) -> None:
        pass


class FakeTransport(asyncio.Transport):
    """asyncio transport stand-in: answers on the next loop iteration, as a socket read would."""

    def __init__(self, channel: Any, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.channel, self.loop = channel, loop

    def write(self, data: bytes) -> None:
        frames = _response_frames(bytes(data))
        if frames:
            self.loop.call_soon(self.channel.data_received, b"".join(frames))

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def install_fakes(p: Producer) -> None:
    inst = p.instance
    conns = inst.blocking._conns()
    for conn in conns.values():
        conn.sock = FakeSocket()
        conn.timeout_s = 3.0
    loop = inst.loop_thread.loop

    async def swap() -> None:
        for ch in inst.remoting._channels.values():
            if ch.pending_count == 0:
                ch._transport = FakeTransport(ch, loop)

    inst.run(swap(), 5)


def run_mode(p: Producer, mode: str, count: int) -> None:
    body = b"x" * 100
    if mode == "sync":
        for _ in range(count):
            p.send(Message(TOPIC, body))
    elif mode == "batch":
        for _ in range(count // 32):
            p.send_batch([Message(TOPIC, body) for _ in range(32)])
    elif mode == "oneway":
        for _ in range(count):
            p.send_oneway(Message(TOPIC, body))
        p.wait_for_in_flight(30)
    elif mode == "async":
        sem = threading.BoundedSemaphore(1000)

        def done(_f: Any) -> None:
            sem.release()

        for _ in range(count):
            sem.acquire()
            p.send_async(Message(TOPIC, body)).add_done_callback(done)
        p.wait_for_in_flight(30)
    else:
        raise ValueError(mode)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--modes", default="sync,async,oneway,batch")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", default="")
    args = ap.parse_args()
    with start_dev_cluster() as cluster:
        p = Producer("path_bench", cluster.namesrv_addr)
        p.start()
        try:
            for _ in range(20):  # route, blocking connection, loop channel
                p.send(Message(TOPIC, b"warm"))
                p.send_async(Message(TOPIC, b"warm")).result(10)
            install_fakes(p)
            modes = args.modes.split(",")
            for mode in modes:
                run_mode(p, mode, 2000)
            for r in range(args.rounds):
                for mode in modes:
                    c0, t0 = cpu_s(), time.perf_counter()
                    run_mode(p, mode, args.count)
                    cpu, el = cpu_s() - c0, time.perf_counter() - t0
                    print(f"round {r + 1} {mode:<7} {cpu / args.count * 1e6:6.2f} µs CPU/msg  "
                          f"{args.count / el:>9,.0f} msg/s", flush=True)
            if args.profile:
                profile(p, args.profile, args.count)
        finally:
            p.shutdown()


def profile(p: Producer, mode: str, count: int) -> None:
    main_prof, loop_prof = profile_with_loop(p, lambda: run_mode(p, mode, count))
    for name, prof in (("caller thread", main_prof), ("I/O loop thread", loop_prof)):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(30)
        print(f"### {name}, {mode} x {count} (tottime)\n{out.getvalue()[:9000]}")


if __name__ == "__main__":
    main()
