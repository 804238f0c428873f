"""Spark streaming latency: message stored → row in the sink, for a continuous stream.

Usage: ``python benchmarks/spark_latency.py [--rate 5000] [--seconds 30] [--out-dir benchmarks/results]``

A reference broker (child process on 127.0.0.1) and a ``local[2]`` Spark session are started; a
producer thread sends small messages to an 8-queue topic at ``--rate`` messages/s (batches of
50 every 10 ms, paced by the clock), while ``spark.readStream.format("rocketmq")`` reads the
topic from ``latest`` with ``trigger(processingTime="0 seconds")`` (the producer starts once the
query has run its first trigger) into a ``foreachBatch`` sink
that takes, for every row, the time it reaches the sink (on the driver, when the micro-batch's
rows are collected) minus its ``store_timestamp`` (the broker's clock: the same machine). The
first 5 s are a warm-up and not counted. Writes ``<out-dir>/<date>-spark-latency.json`` / ``.md``
with p50, p90, p99 and max in ms, the rows measured and the machine's load.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "examples"))

from flights_kit.data import build_spark  # noqa: E402
from flights_kit.topic import create_topic  # noqa: E402
from harness import parse_args_and_log  # noqa: E402

QUEUES = 8
WARM_UP_S = 5.0


def produce(namesrv: str, topic: str, rate: int, stop: threading.Event, sent: list[int]) -> None:
    """Send ``rate`` messages/s in batches of 50 every 50/rate s until ``stop``."""
    from rocketmq_sdk import Message, Producer

    per_tick, tick = 50, 50 / rate
    with Producer("bench_spark_latency", namesrv) as producer:
        queues = producer.fetch_publish_queues(topic)
        next_at, i = time.monotonic(), 0
        while not stop.is_set():
            msgs = [Message(topic, b'{"n":%d}' % (i + k)) for k in range(per_tick)]
            producer.send_batch(msgs, mq=queues[(i // per_tick) % len(queues)])
            i += per_tick
            sent[0] = i
            next_at += tick
            delay = next_at - time.monotonic()
            if delay > 0:
                stop.wait(delay)  # pacing the send rate, not synchronisation


def percentile(sorted_ms: list[float], p: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(p / 100 * len(sorted_ms)))] if sorted_ms else float("nan")


def trigger_breakdown(progress: list) -> dict:
    """Median and max of each ``durationMs`` entry and of the rows over the triggers in ``progress``."""
    import statistics

    if not progress:
        return {}
    keys = sorted({k for p in progress for k in (p.durationMs or {})})
    return {"count": len(progress),
            "median_ms": {k: statistics.median((p.durationMs or {}).get(k, 0) for p in progress) for k in keys},
            "max_ms": {k: max((p.durationMs or {}).get(k, 0) for p in progress) for k in keys},
            "rows_median": statistics.median(p.numInputRows for p in progress),
            "rows_max": max(p.numInputRows for p in progress)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=5000, help="messages per second (default 5000)")
    ap.add_argument("--seconds", type=float, default=30.0, help="measured seconds after the warm-up")
    args = parse_args_and_log(ap, HERE / "results")
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk.integrations.spark import register_data_source

    started, load_before = dt.datetime.now(dt.UTC), os.getloadavg()
    latencies: list[float] = []
    counted = {"from": 0.0}
    with tempfile.TemporaryDirectory(prefix="bench-spark-latency-") as tmp_name:
        tmp = Path(tmp_name)
        cluster = start_dev_cluster()
        spark = None
        stop = threading.Event()
        sent = [0]
        try:
            spark = build_spark(tmp / "spark", app_name="rocketmq-bench-spark-latency")
            register_data_source(spark)
            create_topic(cluster.namesrv_addr, cluster.broker_addr, "latency", QUEUES)

            def sink(batch_df, batch_id: int) -> None:
                stored = [r["ts"] for r in batch_df.selectExpr("unix_micros(store_timestamp) AS ts").collect()]
                now_us = time.time() * 1e6
                if time.monotonic() >= counted["from"]:
                    latencies.extend((now_us - ts) / 1000.0 for ts in stored)

            stream = (spark.readStream.format("rocketmq").option("nameServer", cluster.namesrv_addr)
                      .option("topic", "latency").option("startingOffsets", "latest").load())
            query = (stream.writeStream.foreachBatch(sink).trigger(processingTime="0 seconds")
                     .option("checkpointLocation", str(tmp / "chk")).start())
            ready_by = time.monotonic() + 180
            while not query.recentProgress and query.exception() is None and time.monotonic() < ready_by:
                query.awaitTermination(0.5)  # the query's first (empty) trigger: started, positions taken
            producer = threading.Thread(target=produce, args=(cluster.namesrv_addr, "latency", args.rate, stop, sent),
                                        daemon=True)
            producer.start()
            counted["from"] = time.monotonic() + WARM_UP_S
            deadline = counted["from"] + args.seconds
            while time.monotonic() < deadline and query.exception() is None:
                query.awaitTermination(1.0)  # the query runs until the measured time is over
            stop.set()
            producer.join(30)
            progress = [p for p in query.recentProgress if p.numInputRows]
            query.stop()
        finally:
            stop.set()
            if spark is not None:
                spark.stop()
            cluster.stop()
    ms = sorted(latencies)
    triggers = trigger_breakdown(progress if "progress" in locals() else [])
    doc = {"started_utc": started.isoformat(timespec="seconds"), "command": " ".join(["python", *sys.argv]),
           "rate": args.rate, "seconds": args.seconds, "messages_sent": sent[0], "rows_measured": len(ms),
           "p50_ms": percentile(ms, 50), "p90_ms": percentile(ms, 90), "p99_ms": percentile(ms, 99),
           "max_ms": ms[-1] if ms else float("nan"), "triggers": triggers,
           "machine": {"cores": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": os.getloadavg()}}
    md = "\n".join([
        f"# Spark streaming latency {doc['started_utc']}", "",
        f"Command: `{doc['command']}`; {os.cpu_count()} cores, load average before/after "
        f"{load_before[0]:.1f}/{os.getloadavg()[0]:.1f}. `local[2]`, reference broker (child process), "
        f"8-queue topic, {args.rate:,} msg/s sent, `trigger(processingTime='0 seconds')`, `foreachBatch` sink; "
        "latency = time the row reaches the sink (driver) − its store timestamp; first 5 s not counted.", "",
        "| rows measured | p50 ms | p90 ms | p99 ms | max ms |", "|---:|---:|---:|---:|---:|",
        f"| {len(ms):,} | {doc['p50_ms']:.0f} | {doc['p90_ms']:.0f} | {doc['p99_ms']:.0f} | {doc['max_ms']:.0f} |", "",
        f"Where a trigger's time goes (Spark's `durationMs` of the last {triggers.get('count', 0)} non-empty "
        "triggers, median ms; `addBatch` includes the read tasks and the sink's collect):", "",
        "| " + " | ".join(triggers.get("median_ms", {})) + " | rows per trigger |",
        "|" + "---:|" * (len(triggers.get("median_ms", {})) + 1),
        "| " + " | ".join(f"{v:.0f}" for v in triggers.get("median_ms", {}).values())
        + f" | {triggers.get('rows_median', 0):,.0f} |",
        "| " + " | ".join(f"max {v:.0f}" for v in triggers.get("max_ms", {}).values())
        + f" | max {triggers.get('rows_max', 0):,.0f} |", ""])
    print(md)
    if not args.no_write:
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        stem = started.strftime("%Y-%m-%d") + "-spark-latency"
        (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
        (out / f"{stem}.md").write_text(md)
    return 0 if ms else 1


if __name__ == "__main__":
    sys.exit(main())
