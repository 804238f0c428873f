"""CPU of one Celery ``apply_async`` on rocketmq:// by layer, in the producer process (issue 26).

Sends no-op tasks (``celery_bench_app``, no worker: they stay queued) and times, with the
calling thread's CPU clock, the calls each layer makes: kombu's ``Producer.publish``, the
transport's ``Channel.basic_publish`` / kombu's virtual ``basic_publish`` / ``Channel._put``,
``BrokerClient.send``, the SDK's ``Producer.send`` / ``MessagePreparer.prepare`` /
``BlockingConnections.invoke``, and the socket's ``sendall`` / ``recv`` (the two system calls of
a send). The numbers are inclusive (a layer includes those below it) and each wrapper adds
~1 µs; cProfile inflates this path ~3x (many small calls), these wrappers do not. The SDK's
background threads are idle here (the blocking send runs on the caller's thread), so the
process's CPU is the main thread's.

    .venv/bin/python benchmarks/profiling/celery_producer_layers.py [--tasks 3000] [--rounds 3]
        [--namesrv HOST:PORT]
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
from celery_tasks import app_for, make_env  # noqa: E402 - benchmarks/celery_tasks.py helpers

_tt = time.thread_time


def wrap(acc: dict[str, float], owner: Any, name: str, label: str) -> None:
    fn = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = _tt()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[label] += _tt() - t0

    setattr(owner, name, timed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--namesrv", default=None, help="a running name server (default: start a dev cluster)")
    args = ap.parse_args()
    import rocketmq_sdk.integrations.celery  # noqa: F401
    from kombu import messaging
    from kombu.transport.virtual import base as virtual
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk.client import blocking
    from rocketmq_sdk.integrations.celery import client, transport
    from rocketmq_sdk.producer import prepare, producer

    acc: dict[str, float] = defaultdict(float)
    for owner, name, label in [
            (messaging.Producer, "publish", "kombu Producer.publish"),
            (transport.Channel, "basic_publish", "Channel.basic_publish"),
            (virtual.Channel, "basic_publish", "virtual basic_publish"),
            (transport.Channel, "_put", "Channel._put"),
            (client.BrokerClient, "send", "BrokerClient.send"),
            (producer.Producer, "send", "Producer.send"),
            (prepare.MessagePreparer, "prepare", "prepare"),
            (blocking.BlockingConnections, "invoke", "invoke"),
            (socket.socket, "sendall", "sendall"),
            (socket.socket, "recv", "recv")]:
        wrap(acc, owner, name, label)
    cluster = None if args.namesrv else start_dev_cluster()
    try:
        namesrv = args.namesrv or cluster.namesrv_addr
        app = app_for(make_env(f"rocketmq://{namesrv}", Path(tempfile.mkdtemp()) / "mark", {}))
        noop = app.tasks["bench.noop"]
        with app.producer_or_acquire() as p:
            for _ in range(300):  # routes, connections, declarations
                noop.apply_async(producer=p)
            for r in range(args.rounds):
                acc.clear()
                t0 = _tt()
                for _ in range(args.tasks):
                    noop.apply_async(producer=p)
                total = _tt() - t0
                print(f"round {r}: apply_async {1e6 * total / args.tasks:.0f} µs/task; "
                      + ", ".join(f"{k} {1e6 * v / args.tasks:.0f}" for k, v in acc.items())
                      + f"  (load {os.getloadavg()[0]:.1f})", flush=True)
        app.close()
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
