"""A/B of the sync-call hop inside ``Producer.send``: ``EventLoopThread.run`` (plain-lock waiter)
against the previous ``run_coroutine_threadsafe(...).result()``, interleaved in one process
against one reference broker so machine load affects both alike.

Usage: ``python benchmarks/ab_sync_hop.py [--count 3000] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time

from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import Message, Producer


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with start_dev_cluster() as cluster:
        # the hop is what is compared: keep sync sends on the I/O loop
        p = Producer("ab_hop", cluster.namesrv_addr, sync_send_in_caller_thread=False)
        p.start()
        try:
            lt = p.instance.loop_thread
            new_run = lt.run

            def old_run(coro, timeout_s=None):
                return asyncio.run_coroutine_threadsafe(coro, lt.loop).result(timeout_s)

            body = b"x" * 100
            for _ in range(300):
                p.send(Message("AbTopic", body))
            for r in range(args.rounds):
                for name, fn in (("run_coroutine_threadsafe + Future.result", old_run),
                                 ("EventLoopThread.run (plain lock)", new_run)):
                    lt.run = fn
                    c0, t0 = cpu_s(), time.perf_counter()
                    for _ in range(args.count):
                        p.send(Message("AbTopic", body))
                    el, cpu = time.perf_counter() - t0, cpu_s() - c0
                    print(f"round {r} {name:42s} {args.count / el:7,.0f} sends/s  "
                          f"client CPU {cpu / args.count * 1e6:6.1f} µs/send")
            lt.run = new_run
        finally:
            p.shutdown()


if __name__ == "__main__":
    main()
