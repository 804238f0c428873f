"""Sync sends with the sending thread and the broker on one core, on two cores, or left to the
scheduler: the sending thread's user/system CPU per message and msg/s for each placement.

Usage: ``python benchmarks/profiling/sync_placement.py [--count 6000] [--rounds 2]`` (needs 2+ CPUs).

A reference broker (``start_dev_cluster``, child processes) and a producer in this process;
placements are set with ``os.sched_setaffinity`` on every thread of both (restored at the end).
Findings in ``benchmarks/profiling/LOG.md`` (2026-11-24, client send path, wave 3).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import Message, Producer


def _descendants(pid: int) -> list[int]:
    out = [pid]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out += _descendants(int(entry))
            except OSError:
                pass
    return out


def _pin(pids: list[int], cpus: set[int]) -> None:
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                os.sched_setaffinity(int(tid), cpus)
            except OSError:
                pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=6000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    everything = os.sched_getaffinity(0)
    with start_dev_cluster(broker_config={"flush_disk_type": "ASYNC_FLUSH"}) as cluster:
        broker = _descendants(cluster._proc.pid)
        p = Producer("placement_bench", cluster.namesrv_addr)
        p.start()
        try:
            for _ in range(200):
                p.send(Message("PlacementBench", b"x" * 100))
            for _ in range(args.rounds):
                for mode, mine, theirs in (("one core", {0}, {0}), ("two cores", {0}, {1}),
                                           ("free", everything, everything)):
                    _pin([os.getpid()], mine)
                    _pin(broker, theirs)
                    for _ in range(200):
                        p.send(Message("PlacementBench", b"x" * 100))
                    r0, t0 = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter()
                    for _ in range(args.count):
                        p.send(Message("PlacementBench", b"x" * 100))
                    el, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_THREAD)
                    n = args.count
                    print(f"{mode:<9} user {(r1.ru_utime - r0.ru_utime) / n * 1e6:5.1f} "
                          f"sys {(r1.ru_stime - r0.ru_stime) / n * 1e6:5.1f} µs/msg  {n / el:>7,.0f} msg/s",
                          flush=True)
        finally:
            _pin([os.getpid()], everything)
            _pin(broker, everything)
            p.shutdown()


if __name__ == "__main__":
    main()
