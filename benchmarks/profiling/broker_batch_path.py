"""CPU per message of the reference broker's batch send processor (SEND_BATCH_MESSAGE, 100 B
bodies with UNIQ_KEY, as ``Producer.send_batch`` builds them) called directly on the broker's
loop: batch decoding, properties, CommitLog append, consume queue and index - no sockets, no
frame decoding, no response encoding (``broker_send_path.py`` covers those for single sends).

Usage: ``python benchmarks/profiling/broker_batch_path.py [--batches 300] [--size 256] [--profile]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from broker_send_path import CountingTransport  # noqa: E402
from rocketmq_broker.embedded import start_dev_cluster  # noqa: E402
from rocketmq_sdk import Message  # noqa: E402
from rocketmq_sdk.protocol.codes import RequestCode  # noqa: E402
from rocketmq_sdk.protocol.headers import SendMessageRequestHeader  # noqa: E402
from rocketmq_sdk.protocol.message_codec import encode_batch  # noqa: E402
from rocketmq_sdk.protocol.msgid import create_uniq_id  # noqa: E402
from rocketmq_sdk.remoting import Channel, RemotingCommand  # noqa: E402


def requests(n: int, k: int) -> list[RemotingCommand]:
    out = []
    for i in range(n):
        msgs = [Message("BenchBatch", b"x" * 100) for _ in range(k)]
        for m in msgs:
            m.properties["UNIQ_KEY"] = create_uniq_id()
        h = SendMessageRequestHeader(producer_group="pg", topic="BenchBatch", default_topic="TBW102",
                                     default_topic_queue_nums=4, queue_id=i % 4, sys_flag=0,
                                     born_timestamp=int(time.time() * 1000), flag=0, properties="",
                                     reconsume_times=0, unit_mode=False, max_reconsume_times=16, batch=True,
                                     bname="broker-a")
        out.append(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, h.to_v2(), body=encode_batch(msgs)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=300)
    ap.add_argument("--size", type=int, default=256, help="messages per batch")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    with start_dev_cluster(in_process=True) as cluster:
        broker = next(s for s in cluster._servers if hasattr(s, "store"))
        cmds = requests(args.batches, args.size)

        async def run() -> None:
            ch = Channel(broker.server)
            ch.connection_made(CountingTransport())
            processor = broker.server._processors[RequestCode.SEND_BATCH_MESSAGE]
            prof = cProfile.Profile() if args.profile else None
            t0 = time.thread_time()
            if prof:
                prof.enable()
            for c in cmds:
                processor(ch, c)
            if prof:
                prof.disable()
            print(f"batch processor: {(time.thread_time() - t0) / (args.batches * args.size) * 1e6:.2f} µs "
                  f"CPU per message ({args.size} per batch)")
            if prof:
                pstats.Stats(prof).sort_stats("tottime").print_stats(25)
            ch.connection_lost(None)

        asyncio.run_coroutine_threadsafe(run(), cluster._loop).result(300)


if __name__ == "__main__":
    main()
