"""CPU per request of the reference broker's send path without sockets: SEND_MESSAGE_V2 frames
(100 B body, TAGS + UNIQ_KEY + WAIT properties, as ``Producer.send`` builds them) are fed to a
broker ``Channel`` whose transport only counts the bytes written, so this times frame decoding,
the send processor, the store put (CommitLog, consume queue, index), the response encoding and
the channel's write coalescing - everything but the event loop's socket work.

Usage: ``python benchmarks/profiling/broker_send_path.py [--count 20000] [--rounds 3] [--per-read 1]
[--profile]``. ``--per-read N`` feeds N frames per ``data_received`` call (1 = sync sends, more =
pipelined async sends). ``--profile`` prints the cProfile of one more round.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time

from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.protocol.headers import SendMessageRequestHeader
from rocketmq_sdk.protocol.message_codec import encode_properties
from rocketmq_sdk.protocol.msgid import create_uniq_id
from rocketmq_sdk.remoting import Channel, RemotingCommand


class CountingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = 0

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 50001) if name in ("peername", "sockname") else default

    def write(self, data) -> None:
        self.written += len(data)

    def writelines(self, list_of_data) -> None:
        for d in list_of_data:
            self.written += len(d)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def frames(n: int, topic: str) -> list[bytes]:
    out = []
    for i in range(n):
        props = encode_properties({"TAGS": "TagA", "UNIQ_KEY": create_uniq_id(), "WAIT": "true"})
        h = SendMessageRequestHeader(producer_group="bench_pg", topic=topic, default_topic="TBW102",
                                     default_topic_queue_nums=4, queue_id=i % 4, sys_flag=0,
                                     born_timestamp=int(time.time() * 1000), flag=0, properties=props,
                                     reconsume_times=0, unit_mode=False, max_reconsume_times=16, batch=False,
                                     bname="broker-a")
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_v2(), body=b"x" * 100)
        cmd.opaque = i + 1
        out.append(bytes(cmd.encode()))
    return out


async def run_round(broker, data: list[bytes], per_read: int) -> tuple[float, int]:
    ch = Channel(broker.server)
    tr = CountingTransport()
    ch.connection_made(tr)
    t0 = time.thread_time()
    for i in range(0, len(data), per_read):
        ch.data_received(b"".join(data[i:i + per_read]))
        await asyncio.sleep(0)  # let the channel flush its coalesced responses
    await asyncio.sleep(0)
    cpu = time.thread_time() - t0
    ch.connection_lost(None)
    return cpu, tr.written


def print_profile(loop: asyncio.AbstractEventLoop, coro, timer=None, top: tuple[int, int] = (30, 45)) -> None:
    """Run ``coro()`` on ``loop`` (another thread's) under cProfile (``timer``: its clock, e.g.
    ``time.thread_time``) and print the top lists by own and by cumulative time."""
    prof = cProfile.Profile(timer) if timer is not None else cProfile.Profile()

    async def profiled():
        prof.enable()
        try:
            return await coro()
        finally:
            prof.disable()

    asyncio.run_coroutine_threadsafe(profiled(), loop).result(300)
    st = pstats.Stats(prof)
    st.sort_stats("tottime").print_stats(top[0])
    st.sort_stats("cumulative").print_stats(top[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--per-read", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    with start_dev_cluster(in_process=True) as cluster:
        broker = next(s for s in cluster._servers if hasattr(s, "store"))
        data = frames(args.count, "BenchSendPath")
        warm = frames(200, "BenchSendPath")
        asyncio.run_coroutine_threadsafe(run_round(broker, warm, 1), cluster._loop).result(60)
        for r in range(args.rounds):
            cpu, written = asyncio.run_coroutine_threadsafe(run_round(broker, data, args.per_read),
                                                            cluster._loop).result(300)
            print(f"round {r + 1}: {cpu / args.count * 1e6:.2f} µs CPU per send ({args.per_read} per read), "
                  f"{written / args.count:.0f} response bytes per send")
        if args.profile:
            print_profile(cluster._loop, lambda: run_round(broker, data, args.per_read))

if __name__ == "__main__":
    main()
