"""CPU per message of the push consumer's client-side path without a network: decoding a pull
body of 32 records (``decode_messages``), the pull loop's per-message work, the process queue and
the consume service (pool hand-off, listener call, settlement, offset update).

Usage: ``python benchmarks/profiling/consume_path.py [--lists 3000] [--rounds 3]``. Runs in one process;
the pull body is built once with ``encode_message_ext``.
"""

from __future__ import annotations

import argparse
import resource
import threading
import time
from types import SimpleNamespace

from rocketmq_sdk.consumer.consume_service import ConsumeMessageConcurrentlyService
from rocketmq_sdk.consumer.listener import ConsumeConcurrentlyStatus
from rocketmq_sdk.consumer.offset_store import OffsetTable
from rocketmq_sdk.consumer.process_queue import ProcessQueue
from rocketmq_sdk.protocol.message import MessageExt, MessageQueue
from rocketmq_sdk.protocol.message_codec import decode_messages, encode_message_ext


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def pull_body(n: int, start: int) -> bytes:
    recs = []
    for i in range(n):
        m = MessageExt(topic="BenchTopic", body=b"x" * 100, born_host="127.0.0.1:50123",
                       store_host="127.0.0.1:10911", queue_id=1, queue_offset=start + i,
                       commit_log_offset=1_000_000 + 250 * (start + i), store_timestamp=1_700_000_000_000,
                       born_timestamp=1_700_000_000_000)
        m.properties = {"UNIQ_KEY": f"7F0000012A2B18B4AAC2{start + i:012X}", "CLUSTER": "DefaultCluster"}
        recs.append(bytes(encode_message_ext(m)))
    return b"".join(recs)


def timed_decode(body: bytes, n: int = 2000) -> float:
    """Seconds per record of ``decode_messages`` on a 32-record body."""
    t0 = time.perf_counter()
    for _ in range(n):
        decode_messages(body)
    return (time.perf_counter() - t0) / n / 32


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lists", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    mq = MessageQueue("BenchTopic", "broker-a", 1)
    got = [0]
    done = threading.Event()
    lock = threading.Lock()

    def listener(msgs, ctx):
        with lock:
            got[0] += len(msgs)
            if got[0] >= target[0]:
                done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    ctx = SimpleNamespace(  # stands in for the consumer's ConsumeContext
        config=SimpleNamespace(consume_message_batch_max_size=1, consume_thread_max=20),
        group="bench", retry_topic="%RETRY%bench", clustering=True, offset_store=OffsetTable(), msg_trace=None,
        client_id="127.0.0.1@bench")
    bodies = [pull_body(32, 32 * k) for k in range(8)]
    best = min(timed_decode(bodies[0]) for _ in range(5))
    print(f"decode_messages alone: {best * 1e6:.2f} µs per 100 B record (best of 5)")
    target = [0]
    for r in range(args.rounds):
        svc = ConsumeMessageConcurrentlyService(ctx, listener)
        pq = ProcessQueue()
        got[0] = 0
        done.clear()
        target[0] = 32 * args.lists
        t0, c0 = time.perf_counter(), cpu_s()
        dec = 0.0
        for k in range(args.lists):
            d0 = time.perf_counter()
            msgs = decode_messages(bodies[k % 8])
            dec += time.perf_counter() - d0
            for m in msgs:  # as pull_loop: offsets must ascend for the process queue
                m.queue_offset += 256 * (k // 8)
                m.broker_name = "broker-a"
                m.properties["MIN_OFFSET"] = "0"
                m.properties["MAX_OFFSET"] = "1000"
            pq.put_messages(msgs)
            svc.submit(msgs, pq, mq)
        done.wait(60)
        el, cpu = time.perf_counter() - t0, cpu_s() - c0
        svc.shutdown(5)
        n = got[0]
        print(f"round {r + 1}: {n / el:,.0f} msg/s, CPU {cpu / n * 1e6:.2f} µs/msg "
              f"(decode {dec / n * 1e6:.2f} µs/msg wall), committed {ctx.offset_store.read_memory(mq)}")


if __name__ == "__main__":
    main()
