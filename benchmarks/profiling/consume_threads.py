"""Where a push consumer's CPU goes while it drains a backlog: CPU per message of each thread
(I/O loop, listener pool), user vs system time, context switches, frames per socket read and
socket writes per pull request.

Usage: ``python benchmarks/profiling/consume_threads.py [--count 200000] [--rounds 2]``. Starts a dev
cluster (ASYNC_FLUSH), fills topic ``CtBacklog`` with ``count`` 100 B messages (batches of 32),
then runs ``_worker.run_sdk_consume`` in this process ``rounds`` times, each with a new group.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import sys
import threading
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import run as suite  # noqa: E402


def thread_cpu_s() -> collections.Counter[str]:
    """CPU seconds (user + system) of this process's live threads, keyed by role."""
    out: collections.Counter[str] = collections.Counter()
    tick = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name for t in threading.enumerate()}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = names.get(int(tid), "?")
        role = "pool" if name.startswith("rocketmq-consume-") else "loop" if name.startswith("rocketmq-") else "other"
        out[role] += (int(fields[11]) + int(fields[12])) / tick
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk import PushConsumer
    from rocketmq_sdk.remoting import channel as ch
    from rocketmq_sdk.remoting import frame as fr

    reads: collections.Counter[int] = collections.Counter()
    writes = [0, 0]
    feed, flush = fr.FrameDecoder.feed, ch.Channel._flush

    def counting_feed(self, data):
        frames = feed(self, data)
        reads[len(frames)] += 1
        return frames

    def counting_flush(self):
        if self._wbuf:
            writes[0] += 1
            writes[1] += len(self._wbuf)
        flush(self)

    fr.FrameDecoder.feed, ch.Channel._flush = counting_feed, counting_flush
    split: dict[str, float] = {}
    shutdown = PushConsumer.shutdown

    def measuring_shutdown(self, *a, **k):  # the pool threads end at shutdown: read them first
        split.update(thread_cpu_s())
        return shutdown(self, *a, **k)

    PushConsumer.shutdown = measuring_shutdown
    import _worker as w

    with start_dev_cluster(broker_config={"flush_disk_type": "ASYNC_FLUSH"}) as cl:
        suite.run_worker({"client": "sdk", "scenario": "batch", "namesrv": cl.namesrv_addr, "topic": "CtBacklog",
                          "size": 100, "threads": 1, "batch": 32, "inflight": 1, "max_count": args.count,
                          "max_seconds": 300, "rate": 0, "group": "ct_fill"}, cl._proc.pid, 400)
        for r in range(args.rounds):
            reads.clear()
            writes[:] = [0, 0]
            before = thread_cpu_s()
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            res = w.run_sdk_consume({"topic": "CtBacklog", "group": f"ct_{r}", "namesrv": cl.namesrv_addr,
                                     "max_count": args.count, "max_seconds": 120})
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            n = res["count"]
            per = {k: (split.get(k, 0.0) - (before.get(k, 0.0) if k != "pool" else 0.0)) / n * 1e6
                   for k in ("loop", "pool")}
            print(f"round {r + 1}: {n / res['elapsed_s']:,.0f} msg/s; user {(r1.ru_utime - r0.ru_utime) / n * 1e6:.2f} + "
                  f"sys {(r1.ru_stime - r0.ru_stime) / n * 1e6:.2f} µs/msg; loop thread {per['loop']:.2f}, pool "
                  f"{per['pool']:.2f} µs/msg; context switches {(r1.ru_nvcsw + r1.ru_nivcsw - r0.ru_nvcsw - r0.ru_nivcsw) / n:.3f}"
                  f"/msg; frames per read {dict(sorted(reads.items()))}; {writes[1]} frames in {writes[0]} socket writes",
                  file=w._OUT, flush=True)


if __name__ == "__main__":
    main()
