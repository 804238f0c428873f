"""Interleaved A/B, in one producer process, of h48a's cuts to the CPU of a Celery ``apply_async``
on rocketmq:// (issue 26; benchmarks/results/2026-11-29-celery-producer-cpu.md).

Blocks of ``--block`` no-op tasks (no worker: they stay queued) alternate A B B A between the
cuts on (this tree) and main's behaviour before them (86dcb71), restored by patching: kombu's
``uuid()`` delivery tag per publish, ``json.dumps`` of the envelope, the producer's span starter
through ``Producer._start_span``, and the registry's locked cache read with the namespace built
per lookup. One process, one connection, one clock (the thread's CPU time), so machine load
hits both alike; prints both medians and the median of the paired differences.

    .venv/bin/python benchmarks/profiling/celery_producer_ab.py [--blocks 30] [--block 300]
        [--namesrv HOST:PORT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
from celery_tasks import app_for, make_env  # noqa: E402 - benchmarks/celery_tasks.py helpers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=30, help="blocks per variant")
    ap.add_argument("--block", type=int, default=300, help="tasks per block")
    ap.add_argument("--namesrv", default=None, help="a running name server (default: start a dev cluster)")
    args = ap.parse_args()
    from kombu.transport.virtual.base import Channel as VirtualChannel
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk.integrations.celery import registry, transport

    new_tag, new_dumps = transport.Channel._next_delivery_tag, transport.dumps
    new_list, new_queue = registry.Registry._list, registry.Registry.queue

    def old_dumps(message: dict) -> bytes:
        return json.dumps(message).encode("utf-8")

    def old_list(self: Any, namespace: str, refresh: bool = False) -> dict[str, str]:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(namespace)
        if hit is not None and not refresh and now - hit[0] < self.cache_ttl:
            return hit[1]
        return new_list(self, namespace, True)

    def old_queue(self: Any, queue: str, refresh: bool = False) -> Any:
        ns = self._ns("queues")
        info = self._view(ns, "info", refresh, registry._queue_infos).get(queue)
        if info is None and not refresh:
            info = self._view(ns, "info", True, registry._queue_infos).get(queue)
        return info

    def use(new: bool, sdk_producer: Any) -> None:
        transport.Channel._next_delivery_tag = new_tag if new else VirtualChannel._next_delivery_tag
        transport.dumps = new_dumps if new else old_dumps
        registry.Registry._list = new_list if new else old_list
        registry.Registry.queue = new_queue if new else old_queue
        sdk_producer._preparer.start_span = sdk_producer._start_otel_span if new else sdk_producer._start_span

    cluster = None if args.namesrv else start_dev_cluster()
    try:
        namesrv = args.namesrv or cluster.namesrv_addr
        app = app_for(make_env(f"rocketmq://{namesrv}", Path(tempfile.mkdtemp()) / "mark", {}))
        noop = app.tasks["bench.noop"]
        res: dict[bool, list[float]] = {True: [], False: []}
        with app.producer_or_acquire() as p:
            for _ in range(300):  # routes, connections, declarations
                noop.apply_async(producer=p)
            sdk_producer = p.connection.transport.broker_client.producer
            for i in range(2 * args.blocks):
                new = bool(i % 2) ^ bool((i // 2) % 2)  # A B B A ...
                use(new, sdk_producer)
                t0 = time.thread_time()
                for _ in range(args.block):
                    noop.apply_async(producer=p)
                res[new].append(1e6 * (time.thread_time() - t0) / args.block)
            use(True, sdk_producer)
        app.close()
    finally:
        if cluster is not None:
            cluster.stop()
    saved = [a - b for a, b in zip(res[False], res[True], strict=True)]
    q_old, q_new = statistics.quantiles(res[False]), statistics.quantiles(res[True])
    print(f"main's behaviour {statistics.median(res[False]):.0f} µs/task (IQR {q_old[0]:.0f}-{q_old[2]:.0f}), "
          f"cuts on {statistics.median(res[True]):.0f} (IQR {q_new[0]:.0f}-{q_new[2]:.0f}); paired saving: median "
          f"{statistics.median(saved):.1f} µs/task ({args.blocks} x {args.block} tasks each, "
          f"load {os.getloadavg()[0]:.1f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
