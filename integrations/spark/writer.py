"""Write a Spark DataFrame to RocketMQ: one message per row (``mapInArrow``; :func:`send_rows`
also serves a ``df.foreachPartition`` of your own, see docs/spark.md).

Each partition is sent in partition order, one synchronous send at a time, by the producer
cached in its Python worker (:mod:`.producers`). So two rows of one partition that go to the
same queue (the same hash-selector argument) are stored in the order the partition holds them:
repartition by the selector column and sort within partitions to get a per-key order.

Delivery is at-least-once: a send that fails fails the Spark task; if Spark retries the task
(``spark.task.maxFailures``; ``local[N]`` masters do not retry) its rows are sent again.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rocketmq_sdk.exceptions import IllegalArgumentError

from .arrow_rows import arrow_rows, needs_row_objects
from .arrow_send import ArrowSender, bad_rows_sender, plan_for
from .batching import DEFAULT_MAX_BATCH_BYTES, send_rows_batched
from .mapping import RowFn, RowMessageMapper
from .producers import DEFAULT_PRODUCER_GROUP, ProducerSpec, get_producer
from .row_checks import checked_messages, max_message_size_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

logger = logging.getLogger("rocketmq_sdk.integrations.spark")

"""The producer's ``max_message_size`` when it has no config to tell (Java's default, 4 MiB)."""


@dataclass(frozen=True)
class WriteProgress:
    """A progress snapshot: messages acknowledged by finished partitions so far."""

    sent: int
    partitions_done: int
    partitions_total: int
    elapsed_s: float


@dataclass
class WriteResult:
    """What :func:`write_dataframe` sent.

    Attributes:
        sent: messages acknowledged by the broker (all partitions).
        partitions: partition id → messages sent by that partition.
        elapsed_s: wall time of the Spark job, seconds.
    """

    sent: int
    partitions: dict[int, int] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def throughput(self) -> float:
        """Messages per second over the whole job (0.0 for an empty job)."""
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0


def send_rows(rows: Iterable[Any], mapper: RowMessageMapper, producer: Any, *, selector: Any = None,
              send_timeout_ms: int = 3000, batch_size: int = 1, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
              bad_rows_topic: str | None = None) -> int:
    """Send each row as one message, synchronously and in iteration order.

    Args:
        rows: rows (``pyspark.sql.Row`` or mappings).
        mapper: the row → message recipe.
        producer: a started ``rocketmq_sdk.Producer`` (or anything with the same ``send``).
        selector: the ``MessageQueueSelector`` used when ``mapper.uses_selector``; default
            ``SelectMessageQueueByHash()``.
        send_timeout_ms: timeout of each send request, milliseconds.
        batch_size: 1 (default) sends message by message; more packs up to that many
            consecutive messages for the same queue into one batch request (``send_batch``),
            keeping the per-queue order (see :mod:`.batching`).
        max_batch_bytes: a batch request is sent before its bodies would exceed this many bytes
            (default 1 MiB; the broker refuses requests over its ``maxMessageSize``, 4 MiB).
        bad_rows_topic: None (default): a bad row fails the write. A topic: each bad row is
            sent there instead (see :func:`.arrow_send.bad_rows_sender`) and the write goes on.

    Returns:
        The number of messages the broker acknowledged (bad rows sent to ``bad_rows_topic``
        not counted).

    Raises:
        IllegalArgumentError: a row that makes no valid message (a null body column, a tag, key
            or property with a separator, a body over the producer's ``max_message_size``...),
            naming the row (its index in ``rows``) and the column; nothing of the batch being
            filled is sent (without ``bad_rows_topic``).
        rocketmq_sdk.exceptions.MQError: a send failed (the rows before it were sent).
    """
    if mapper.uses_selector and selector is None:
        from rocketmq_sdk import SelectMessageQueueByHash

        selector = SelectMessageQueueByHash()
    on_bad = bad_rows_sender(producer, bad_rows_topic, mapper.topic, send_timeout_ms) if bad_rows_topic else None
    messages = checked_messages(rows, mapper, max_message_size_of(producer), on_bad=on_bad)
    if batch_size > 1:
        sent, not_ok = send_rows_batched(messages, mapper, producer, selector=selector, batch_size=batch_size,
                                         send_timeout_ms=send_timeout_ms, max_batch_bytes=max_batch_bytes)
        _warn_not_ok(not_ok, sent)
        return sent
    sent = 0
    not_ok = 0
    for msg, row in messages:
        if mapper.uses_selector:
            result = producer.send(msg, selector, mapper.selector_arg(row), timeout_ms=send_timeout_ms)
        else:
            result = producer.send(msg, timeout_ms=send_timeout_ms)
        sent += 1
        status = getattr(getattr(result, "send_status", None), "value", "SEND_OK")
        if status != "SEND_OK":
            not_ok += 1
    _warn_not_ok(not_ok, sent)
    return sent


def send_batches(batches: Iterable[Any], mapper: Any, producer: Any, *, selector: Any = None,
                 send_timeout_ms: int = 3000, batch_size: int = 1, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                 bad_rows_topic: str | None = None) -> int:
    """Send the rows of Arrow record ``batches`` (one partition), as :func:`send_rows` does: with
    ``batch_size > 1`` and a columnar recipe through the C batch bodies of :mod:`.arrow_send`,
    else row by row through ``Message`` objects (same requests, same errors).

    Raises:
        IllegalArgumentError, rocketmq_sdk.exceptions.MQError: as :func:`send_rows`.
    """
    it = iter(batches)
    first = next(it, None)
    if first is None:
        return 0
    batches = itertools.chain([first], it)
    plan, why = plan_for(mapper, producer, selector, batch_size, first.schema)
    if plan is None:
        logger.debug("writing through Message objects: %s", why)
        rows = arrow_rows(batches, row_objects=needs_row_objects(getattr(mapper, "mapper", mapper)))
        return send_rows(rows, mapper, producer, selector=selector, send_timeout_ms=send_timeout_ms,
                         batch_size=batch_size, max_batch_bytes=max_batch_bytes, bad_rows_topic=bad_rows_topic)
    on_bad = bad_rows_sender(producer, bad_rows_topic, plan.mapper.topic, send_timeout_ms) if bad_rows_topic else None
    sender = ArrowSender(plan, producer, batch_size=batch_size, max_batch_bytes=max_batch_bytes,
                         send_timeout_ms=send_timeout_ms, on_bad=on_bad)
    sent = sender.send(batches)
    _warn_not_ok(sender.batcher.not_ok, sent)
    return sent


def _warn_not_ok(not_ok: int, sent: int) -> None:
    if not_ok:
        logger.warning("%d of %d messages were stored with a non-OK status (e.g. FLUSH_DISK_TIMEOUT)",
                       not_ok, sent)


def _partition_sender(mapper: RowMessageMapper, spec: ProducerSpec, selector: Any, send_timeout_ms: int,
                      batch_size: int, max_batch_bytes: int, accumulator: Any,
                      bad_rows_topic: str | None = None) -> Callable[[Iterable[Any]], Iterator[Any]]:
    def send_partition(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else -1
        producer = get_producer(spec)
        count = send_batches(batches, mapper, producer, selector=selector, send_timeout_ms=send_timeout_ms,
                             batch_size=batch_size, max_batch_bytes=max_batch_bytes, bad_rows_topic=bad_rows_topic)
        accumulator.add({partition: count})
        yield pa.RecordBatch.from_pydict({"partition": pa.array([partition], pa.int32()),
                                          "sent": pa.array([count], pa.int64())})

    return send_partition


class _DictSum:
    """Spark ``AccumulatorParam`` (duck-typed) summing ``{partition: count}`` dicts."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:  # noqa: N802 - Spark's name
        for k, v in b.items():
            a[k] = a.get(k, 0) + v
        return a


def write_dataframe(df: DataFrame, namesrv_addr: str, topic: str, *, body: str | RowFn | None = None,
                    tag_col: str | None = None, tag_fn: RowFn | None = None,
                    keys_col: str | None = None, keys_fn: RowFn | None = None,
                    properties_fn: RowFn | None = None,
                    selector_col: str | None = None, selector_fn: RowFn | None = None,
                    selector: Any = None, exclude_from_body: Iterable[str] = (), mapper: RowMessageMapper | None = None,
                    group: str = DEFAULT_PRODUCER_GROUP, producer_config: Mapping[str, Any] | None = None,
                    producer_factory: Callable[[ProducerSpec], Any] | None = None,
                    send_timeout_ms: int = 3000, batch_size: int = 1,
                    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, bad_rows_topic: str | None = None,
                    progress: Callable[[WriteProgress], None] | None = None,
                    progress_interval_s: float = 1.0) -> WriteResult:
    """Send every row of ``df`` to ``topic`` as one message (``DataFrame.mapInArrow``: each
    partition reaches its Python worker as Arrow record batches, see :mod:`.arrow_rows`).

    The message recipe is either ``mapper`` or built from the keyword arguments (see
    :class:`RowMessageMapper` for ``body``, ``tag_*``, ``keys_*``, ``properties_fn``,
    ``selector_*`` and ``exclude_from_body``). With a selector column or function, messages go
    through ``SelectMessageQueueByHash`` (Java ``String.hashCode`` of the value modulo the
    number of queues), so equal values share one queue, in partition order.

    Args:
        df: the DataFrame to write.
        namesrv_addr: ``host:port`` of the name server.
        topic: destination topic (ignored when ``mapper`` is given: the mapper's topic is used).
        selector: the ``MessageQueueSelector`` given the selector argument (picklable);
            default ``SelectMessageQueueByHash()``.
        group: producer group of the workers' producers.
        producer_config: extra keyword arguments for ``rocketmq_sdk.Producer`` (hashable values).
        producer_factory: ``spec -> producer`` (not started) used instead of
            ``rocketmq_sdk.Producer(spec.group, spec.namesrv_addr, **config)``; it must be
            picklable and is cached per worker under its qualified name.
        send_timeout_ms: per-request send timeout, milliseconds (default 3000).
        batch_size: 1 (default): one send request per message. More: up to that many
            consecutive messages bound for the same queue go in one SEND_BATCH_MESSAGE request;
            still one stored message per row, in the same per-queue order (see :mod:`.batching`).
        max_batch_bytes: a batch request is sent before its bodies would exceed this many bytes
            (default 1 MiB).
        bad_rows_topic: None (default): a bad row fails the job. A topic: bad rows go there,
            as JSON with the reason in the ``BAD_ROW_REASON`` property (see
            :func:`.arrow_send.bad_rows_sender`), and the job goes on.
        progress: called on the driver about every ``progress_interval_s`` seconds while the job
            runs, and once at the end, with a :class:`WriteProgress` (counts grow as partitions
            finish).

    Returns:
        A :class:`WriteResult` with the total and per-partition counts.

    Raises:
        pyspark.errors.PySparkException (wrapping the worker's ``MQError``): a send failed, or
            a row makes no valid message (the worker's ``IllegalArgumentError`` names the row
            and column: see :func:`send_rows`).
        IllegalArgumentError: an inconsistent recipe (see :class:`RowMessageMapper`).
    """
    if mapper is None:
        mapper = RowMessageMapper(topic, body=body, tag_col=tag_col, tag_fn=tag_fn, keys_col=keys_col,
                                  keys_fn=keys_fn, properties_fn=properties_fn, selector_col=selector_col,
                                  selector_fn=selector_fn, exclude_from_body=tuple(exclude_from_body))
    if batch_size < 1:
        raise IllegalArgumentError(f"batch_size must be at least 1, got {batch_size}")
    if max_batch_bytes < 1:
        raise IllegalArgumentError(f"max_batch_bytes must be at least 1, got {max_batch_bytes}")
    spec = ProducerSpec.create(namesrv_addr, group, producer_config, producer_factory)
    sc = df.sparkSession.sparkContext
    acc = sc.accumulator({}, _DictSum())
    total_partitions = df.rdd.getNumPartitions()
    started = time.monotonic()
    stop = threading.Event()

    def report() -> None:
        counts = dict(acc.value)
        progress(WriteProgress(sum(counts.values()), len(counts), total_partitions,
                               time.monotonic() - started))

    watcher = None
    if progress is not None:
        def watch() -> None:
            while not stop.wait(progress_interval_s):
                report()

        watcher = threading.Thread(target=watch, name="rocketmq-spark-progress", daemon=True)
        watcher.start()
    try:
        sender = _partition_sender(mapper, spec, selector, send_timeout_ms, batch_size, max_batch_bytes, acc,
                                   bad_rows_topic)
        df.mapInArrow(sender, "partition INT, sent BIGINT").collect()
    finally:
        stop.set()
        if watcher is not None:
            watcher.join(timeout=5)
    elapsed = time.monotonic() - started
    partitions = dict(sorted(acc.value.items()))
    if progress is not None:
        report()
    result = WriteResult(sum(partitions.values()), partitions, elapsed)
    logger.info("wrote %d messages to topic %s from %d partitions in %.1f s (%.0f msg/s)",
                result.sent, mapper.topic, total_partitions, elapsed, result.throughput)
    return result
