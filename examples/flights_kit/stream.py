"""The demo's streaming stage: per-carrier delay statistics from a Structured Streaming query
that reads topic ``flights`` with ``spark.readStream.format("rocketmq")``, checked against
Spark's batch ``groupBy`` of the loaded rows and against the consumer group's tallies.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("flights_demo.stream")

BODY_SCHEMA = "carrier STRING, dep_delay DOUBLE, arr_delay DOUBLE"
"""The fields of a flight's JSON body the statistics need."""


@dataclass(frozen=True)
class CarrierStats:
    """Flights of one carrier and their mean departure / arrival delays in minutes (None: no
    delay known, e.g. only cancelled flights)."""

    flights: int
    avg_dep_delay: float | None
    avg_arr_delay: float | None


@dataclass
class StreamRun:
    """What the streaming query did: rows read per micro-batch and its wall time."""

    batch_rows: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def rows(self) -> int:
        return sum(self.batch_rows)


def delay_stats(df: Any) -> Any:
    """The per-carrier aggregate of a DataFrame with ``carrier``, ``dep_delay``, ``arr_delay``."""
    from pyspark.sql import functions as F

    return df.groupBy("carrier").agg(F.count(F.lit(1)).alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"),
                                     F.avg("arr_delay").alias("avg_arr_delay"))


def collect_stats(df: Any) -> dict[str, CarrierStats]:
    """``carrier -> CarrierStats`` from a :func:`delay_stats` result."""
    return {r["carrier"]: CarrierStats(r["flights"], r["avg_dep_delay"], r["avg_arr_delay"]) for r in df.collect()}


def stream_delay_stats(spark: Any, namesrv_addr: str, topic: str, checkpoint_dir: Path, *,
                       max_per_trigger: int | None = None, state_partitions: int = 2, timeout_s: float = 600.0,
                       attempts: int = 3, until: Any = None,
                       trigger_interval: str = "2 seconds") -> tuple[dict[str, CarrierStats], StreamRun]:
    """Run a ``Trigger.AvailableNow`` query over the whole topic into an in-memory table and
    return its per-carrier statistics.

    ``until`` (a :class:`~flights_kit.stream_listener.RowCounter`): instead, run a continuing
    query (``Trigger.ProcessingTime(trigger_interval)``) while the topic is still being written,
    and stop it once its committed micro-batches hold ``until.target`` messages (the listener
    counts them; the target may be set after the start; ``TimeoutError`` after ``timeout_s``).
    Its micro-batches are counted by that listener, not ``recentProgress``.

    ``state_partitions`` is the query's ``spark.sql.shuffle.partitions``: the partitions of
    its aggregation state, fixed at the first micro-batch and kept in the checkpoint. Every
    micro-batch loads and commits each of them (a task each), so 16 carriers' state on
    ``local[2]`` takes 2, not the session's batch setting.

    A query whose Python worker did not start in time (Spark waits 10 s) is resumed from its
    checkpoint, up to ``attempts`` runs in all; the micro-batches of every run are reported.

    Raises:
        TimeoutError: the query did not finish within ``timeout_s``.
        pyspark.errors.StreamingQueryException: the query failed.
    """
    from pyspark.sql import functions as F

    reader = (spark.readStream.format("rocketmq").option("nameServer", namesrv_addr).option("topic", topic)
              .option("startingOffsets", "earliest"))
    if max_per_trigger:
        reader = reader.option("maxMessagesPerTrigger", str(max_per_trigger))
    flights = reader.load().select(F.from_json(F.col("body").cast("string"), BODY_SCHEMA).alias("f")).select("f.*")
    started = time.monotonic()

    counter = until

    def start() -> Any:
        writer = (delay_stats(flights).writeStream.outputMode("complete").format("memory")
                  .queryName("carrier_delays").option("checkpointLocation", str(checkpoint_dir)))
        if counter is None:
            return writer.trigger(availableNow=True).start()
        return writer.trigger(processingTime=trigger_interval).start()

    batch_partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(state_partitions))
    if counter is not None:
        spark.streams.addListener(counter)
    try:
        runs = run_available_now(start, timeout_s=timeout_s, attempts=attempts,
                                 wait=None if counter is None else counter.wait)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", batch_partitions)
        if counter is not None:
            spark.streams.removeListener(counter)
    batches = (counter.batch_rows() if counter is not None else
               [p["numInputRows"] for q in runs for p in q.recentProgress if p["numInputRows"]])
    # a query started before the topic was written: its span starts at its first micro-batch with messages
    first = counter.first_batch_at if counter is not None and counter.first_batch_at is not None else started
    run = StreamRun(batches, time.monotonic() - first)
    return collect_stats(spark.table("carrier_delays")), run


def run_available_now(start: Callable[[], Any], *, timeout_s: float = 600.0, attempts: int = 3,
                      wait: Callable[[Any, float], bool] | None = None) -> list[Any]:
    """Run a ``Trigger.AvailableNow`` query (``start()`` starts it with a checkpoint) to its end
    and return the ``StreamingQuery`` of each run.

    ``wait(query, timeout_s)``: how a run's end is awaited (default ``query.awaitTermination``);
    True when the run is done (the query is stopped then), False on timeout; raises its failure.

    Spark gives the Python worker of a Python data source 10 s to start and connect back; on an
    overloaded machine it may not, and the query fails with "Python worker failed to connect
    back". Such a run is started again from its checkpoint (offsets and state are there), up to
    ``attempts`` runs in all; any other failure is raised.

    Raises:
        TimeoutError: a run did not finish within ``timeout_s``.
        pyspark.errors.StreamingQueryException: the query failed.
    """
    runs = []
    for attempt in range(1, attempts + 1):
        query = start()
        runs.append(query)
        try:
            if not (wait or _await_termination)(query, timeout_s):
                raise TimeoutError(f"the streaming query did not finish in {timeout_s:.0f} s")
            return runs
        except Exception as exc:  # StreamingQueryException
            if attempt == attempts or "failed to connect back" not in str(exc):
                raise
            log.warning("streaming query failed (%s); resuming it from its checkpoint", str(exc).splitlines()[0])
        finally:
            query.stop()
    raise AssertionError("unreachable")


def _await_termination(query: Any, timeout_s: float) -> bool:
    return bool(query.awaitTermination(timeout_s))


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def compare_stats(batch: dict[str, CarrierStats], streamed: dict[str, CarrierStats],
                  group_counts: dict[str, int]) -> list[str]:
    """Problems found comparing the streaming statistics with the batch ``groupBy`` (counts
    equal, means equal up to float summation order) and the consumer group's tallies."""
    problems = []
    for carrier in sorted(set(batch) | set(streamed) | set(group_counts)):
        want, got = batch.get(carrier), streamed.get(carrier)
        if want is None or got is None:
            problems.append(f"carrier {carrier}: in the batch groupBy {want is not None}, "
                            f"in the streaming query {got is not None}")
            continue
        if got.flights != want.flights or not _close(got.avg_dep_delay, want.avg_dep_delay) \
                or not _close(got.avg_arr_delay, want.avg_arr_delay):
            problems.append(f"carrier {carrier}: streaming {got}, batch groupBy {want}")
        if group_counts.get(carrier, 0) != got.flights:
            problems.append(f"carrier {carrier}: streaming query counted {got.flights}, "
                            f"consumer group {group_counts.get(carrier, 0)}")
    return problems
