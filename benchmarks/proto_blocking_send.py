"""Prototype behind a PROFILE.md proposal: a sync send done entirely in the caller's thread.

Usage: ``python benchmarks/proto_blocking_send.py [--count 5000] [--threads 1]``.

Today ``Producer.send`` hands every message to the client's asyncio I/O thread and waits for a
``concurrent.futures.Future``: two cross-thread wake-ups (self-pipe write + epoll, then a futex)
per message on top of the socket write and read. This prototype sends the very same
SEND_MESSAGE_V2 frames (``Producer._prepare`` + ``RemotingCommand.encode``) over a plain
blocking socket owned by the calling thread (one connection per thread) and reads the answer
there, to measure what the hop costs. It compares, against one reference broker subprocess:

* ``Producer.send`` (the SDK today);
* the blocking-socket path with the same header building, encoding and response decoding.

Client CPU is ``getrusage(RUSAGE_SELF)`` over the measured loop (all threads of this process).
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
from pathlib import Path

from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.remoting.command import RemotingCommand

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_send import cpu_self_s, recv_exact  # noqa: E402 - benchmarks/broker_send.py

_LEN = struct.Struct(">i")


def blocking_sender(p: Producer, broker_addr: str, topic: str, queue_ids: list[int], broker_name: str):
    host, port = broker_addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rr = [0]
    buf = bytearray()

    def send(msg: Message) -> int:
        prepared = p._prepare(msg)
        ext = dict(prepared.ext)
        q = queue_ids[rr[0] % len(queue_ids)]
        rr[0] += 1
        ext["e"] = str(q)
        ext["n"] = broker_name
        cmd = RemotingCommand.request(prepared.code, ext, prepared.body)
        sock.sendall(cmd.encode())
        (n,) = _LEN.unpack(recv_exact(sock, 4, buf))
        resp = RemotingCommand.decode(bytes(recv_exact(sock, n, buf)))
        if resp.opaque != cmd.opaque or resp.code != 0:
            raise RuntimeError(f"unexpected answer {resp!r}")
        return int(resp.ext_fields.get("queueOffset", -1))

    return send, sock


def measure(threads: int, count: int, make_send) -> tuple[float, float]:
    per = count // threads
    senders = [make_send() for _ in range(threads)]
    body = b"x" * 100

    def worker(send) -> None:
        for _ in range(per):
            send(Message("ProtoTopic", body))

    ths = [threading.Thread(target=worker, args=(s,)) for s in senders]
    c0, t0 = cpu_self_s(), time.perf_counter()
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    el, cpu = time.perf_counter() - t0, cpu_self_s() - c0
    return per * threads / el, cpu / (per * threads) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    with start_dev_cluster() as cluster:
        p = Producer("proto_blocking", cluster.namesrv_addr)
        p.start()
        try:
            p.send(Message("ProtoTopic", b"warm-up"))
            mqs = p.fetch_publish_queues("ProtoTopic")
            broker_name = mqs[0].broker_name
            qids = [mq.queue_id for mq in mqs]
            socks = []

            def make_blocking():
                send, sock = blocking_sender(p, cluster.broker_addr, "ProtoTopic", qids, broker_name)
                socks.append(sock)
                return send

            for name, make in (("Producer.send (I/O thread hop)", lambda: p.send),
                               ("blocking socket in the caller thread", make_blocking),
                               ("Producer.send (again)", lambda: p.send),
                               ("blocking socket (again)", make_blocking)):
                rate, us = measure(args.threads, args.count, make)
                print(f"{name:40s} threads={args.threads}: {rate:8,.0f} sends/s  client CPU {us:6.1f} µs/send")
            for s in socks:
                s.close()
        finally:
            p.shutdown()


if __name__ == "__main__":
    main()
