"""Send rates of the replication modes: ASYNC_MASTER vs SYNC_MASTER (each with a slave), and a
master without slave for reference (issue 20; docs/broker.md "Deployment modes").

For each mode (``2m``, ``2m-2s-async``, ``2m-2s-sync``; one process per broker,
``rocketmq_broker.embedded.start_dev_cluster(cluster=...)``) a topic with 4 queues is created
on broker-a only, so every send goes to one master (and its slave), and synchronous producers
send 128-byte messages (as the 4.9.8 capture's JBench run) for ``--seconds``: once with one
thread, once with ``--threads`` threads. Reported: messages/s, median and p99 send latency,
statuses other than SEND_OK. Results go to ``benchmarks/results/<date>-ha.{json,md}``.

    .venv/bin/python benchmarks/ha_send_rates.py [--seconds 5] [--threads 8] [--quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.admin import AdminClient

MODES = ("2m", "2m-2s-async", "2m-2s-sync")
TOPIC = "HaBench"
BODY = b"x" * 128


def _run(producer: Producer, threads: int, seconds: float) -> dict:
    lat: list[float] = []
    statuses: Counter = Counter()
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def worker() -> None:
        mine, st = [], Counter()
        while time.monotonic() < end:
            t = time.perf_counter()
            r = producer.send(Message(TOPIC, BODY))
            mine.append(time.perf_counter() - t)
            st[r.send_status.value] += 1
        with lock:
            lat.extend(mine)
            statuses.update(st)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.monotonic() - t0
    lat.sort()
    return {"threads": threads, "messages": len(lat), "seconds": round(elapsed, 2),
            "msg_per_s": round(len(lat) / elapsed, 1),
            "p50_ms": round(statistics.median(lat) * 1000, 2) if lat else None,
            "p99_ms": round(lat[int(len(lat) * 0.99) - 1] * 1000, 2) if lat else None,
            "statuses": dict(statuses)}


def bench_mode(mode: str, seconds: float, threads: int) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="rocketmq-ha-bench-") as tmp, \
            start_dev_cluster(tmp, cluster=mode, broker_config={"mappedFileSizeCommitLog": 64 * 1024 * 1024}) as c:
        admin = AdminClient(c.namesrv_addr)
        try:
            admin.create_topic(TOPIC, broker_addr=c.broker("broker-a").addr, read_queue_nums=4, write_queue_nums=4)
        finally:
            admin.close()
        producer = Producer("ha_bench_pg", c.namesrv_addr)
        producer.start()
        try:
            _run(producer, 1, min(1.0, seconds))  # warm-up (connections, routes, slave link)
            return [{"mode": mode, **_run(producer, n, seconds)} for n in (1, threads)]
        finally:
            producer.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--quick", action="store_true", help="1.5 s per scenario")
    args = p.parse_args()
    seconds = 1.5 if args.quick else args.seconds
    load_before = os.getloadavg()
    rows = []
    for mode in MODES:
        rows += bench_mode(mode, seconds, args.threads)
        print(json.dumps(rows[-2:]), flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    meta = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "commit": commit,
            "cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "load_before": load_before, "load_after": os.getloadavg(), "date": dt.datetime.now(dt.UTC).isoformat()}
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    stem = dt.date.today().isoformat() + ("-ha-quick" if args.quick else "-ha")
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    lines = [f"# Send rates by replication mode ({meta['date'][:16]}Z, commit {commit})", "",
             f"`{meta['command']}`; {meta['cores']} cores, Python {meta['python']}, load before "
             f"{', '.join(f'{x:.2f}' for x in load_before)}, after {', '.join(f'{x:.2f}' for x in meta['load_after'])}",
             "", "| mode | threads | msg/s | p50 ms | p99 ms | statuses |", "|---|---:|---:|---:|---:|---|"]
    lines += [f"| {r['mode']} | {r['threads']} | {r['msg_per_s']:,} | {r['p50_ms']} | {r['p99_ms']} | "
              f"{', '.join(f'{k} {v}' for k, v in sorted(r['statuses'].items()))} |" for r in rows]
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
