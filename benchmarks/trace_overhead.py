"""What message tracing (``enable_msg_trace``) costs on the send path.

Sync sends of 100-byte messages with keys to a reference broker in a child process, in
interleaved rounds: a producer without tracing, then one with it (its trace records go to
``RMQ_SYS_TRACE_TOPIC`` of the same broker through the dispatcher's own producer). Prints and
writes ``benchmarks/results/<date>-trace.md`` with the machine's load; not part of ``make bench``.

    .venv/bin/python benchmarks/trace_overhead.py [--rounds 5] [--seconds 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.producer import Producer
from rocketmq_sdk.protocol.message import Message

RESULTS = Path(__file__).resolve().parent / "results"


def one_round(namesrv: str, traced: bool, seconds: float, n: int) -> float:
    with Producer(f"trace_bench_{int(traced)}_{n}", namesrv, enable_msg_trace=traced) as p:
        for i in range(100):  # warm-up: routes, connections, the trace topic
            p.send(Message("TraceBench", b"x" * 100, keys=f"w{i}"))
        sent, t0 = 0, time.perf_counter()
        deadline = t0 + seconds
        while time.perf_counter() < deadline:
            p.send(Message("TraceBench", b"x" * 100, keys=f"k{sent}"))
            sent += 1
        return sent / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    load0 = os.getloadavg()
    rates: dict[bool, list[float]] = {False: [], True: []}
    with start_dev_cluster() as c:
        with AdminClient(c.namesrv_addr) as adm:
            adm.create_topic("TraceBench", broker_addr=c.broker_addr, read_queue_nums=4, write_queue_nums=4)
        for n in range(args.rounds):
            for traced in ((False, True) if n % 2 == 0 else (True, False)):
                rates[traced].append(one_round(c.namesrv_addr, traced, args.seconds, n))
    load1 = os.getloadavg()
    off, on = statistics.median(rates[False]), statistics.median(rates[True])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [
        f"# Message trace overhead, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"`{' '.join([Path(sys.executable).name, *sys.argv])}` at {commit}; {os.cpu_count()} cores, "
        f"{platform.python_implementation()} {platform.python_version()}, load {load0[0]:.2f} before, "
        f"{load1[0]:.2f} after.",
        "",
        "| producer | median sends/s | rounds | µs per send |",
        "|---|---:|---|---:|",
        f"| plain | {off:.0f} | {', '.join(f'{r:.0f}' for r in rates[False])} | {1e6 / off:.0f} |",
        f"| `enable_msg_trace=True` | {on:.0f} | {', '.join(f'{r:.0f}' for r in rates[True])} | {1e6 / on:.0f} |",
        "",
        f"Tracing adds {1e6 / on - 1e6 / off:.0f} µs per sync send (median of medians; other load on the "
        "machine shows up as noise).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{dt.datetime.now(dt.UTC):%Y-%m-%d}-trace.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
