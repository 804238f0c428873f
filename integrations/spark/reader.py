"""Reading messages into Spark rows: the source's schema, the executor-side range reader and the
batch ``DataSourceReader``.

Each partition (:class:`.offsets.QueueRange`) is read by one task with PULL_MESSAGE requests of
``pullBatchSize`` messages from ``start`` up to ``end`` (exclusive), in queue order,
``pullsInFlight`` of them at once (the offsets are known, so the next pulls are asked before the
first answer is back; they are spaced by what the broker serves per pull), with the worker's cached ``PullConsumer`` (:mod:`.consumers`). Bodies arrive decompressed (the SDK's
decoder inflates bodies stored with the COMPRESSED flag). Rows go to Spark as Arrow record
batches filled straight from the pull bodies (:mod:`.arrow_records`, with its C twin): no
per-row Python objects on either side.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader
from pyspark.sql.types import StructType
from rocketmq_sdk.consumer.selector import MessageSelector
from rocketmq_sdk.exceptions import MQBrokerError, MQClientError, TopicNotExistError
from rocketmq_sdk.protocol.bodies import SubscriptionData
from rocketmq_sdk.protocol.message import PullStatus

from .offsets import QueueOffsets, QueueRange, RangeGroup, plan_ranges
from .read_options import LATEST, ReadOptions

if TYPE_CHECKING:
    from .arrow_records import RecordColumns

logger = logging.getLogger("rocketmq_sdk.integrations.spark")

SOURCE_SCHEMA = (
    "body BINARY, topic STRING, tags STRING, keys STRING, properties MAP<STRING, STRING>, "
    "broker_name STRING, queue_id INT, queue_offset BIGINT, msg_id STRING, "
    "born_timestamp TIMESTAMP, store_timestamp TIMESTAMP, reconsume_times INT"
)
"""Columns of every DataFrame read from RocketMQ (``keys`` as stored: space-separated;
``properties`` holds the user properties, without RocketMQ's system ones)."""

ROWS_PER_BATCH = 4096
"""Rows per Arrow record batch handed to Spark."""

NO_NEW_MESSAGE_WAIT_S = 10.0
"""How long a range waits for messages below its end offset that the broker does not serve yet."""


def _arrow_schema(schema: StructType) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # older PySpark: no timezone argument
        return to_arrow_schema(schema)


def _exact_tags(options: ReadOptions) -> list[str] | None:
    """The tags a TAG expression selects exactly (the broker filters by tag hash only), or None
    for ``*`` and SQL92 (as the SDK's ``SubscriptionData.tags_set``)."""
    if options.expression_type != "TAG":
        return None
    return sorted(SubscriptionData.build("t", options.sub_expression, 0).tags_set) or None


def _finish(cols: RecordColumns, pa_schema: Any, broker_name: str, tags: list[str] | None) -> Any:
    """The Arrow batch of ``cols``, keeping only the rows with one of ``tags`` (None: all)."""
    batch = cols.to_batch(pa_schema, broker_name)
    if tags is None:
        return batch
    import pyarrow as pa
    import pyarrow.compute as pc

    return batch.filter(pc.fill_null(pc.is_in(batch.column(2), value_set=pa.array(tags, pa.string())), False))


def _topic_exists(consumer: Any, topic: str) -> bool:
    """Whether the name server still routes ``topic`` (a pull failed: deleted, or another error)."""
    try:
        return bool(consumer.fetch_subscribe_message_queues(topic))
    except TopicNotExistError:
        return False


def _selector(options: ReadOptions) -> Any:
    if options.expression_type == "SQL92":
        return MessageSelector.by_sql(options.sub_expression)
    return options.sub_expression


def read_partition(part: QueueRange | RangeGroup, schema: StructType) -> Iterator[Any]:
    """Arrow record batches of a partition: its queue ranges one after the other (see :func:`read_range`)."""
    for r in (part.ranges if isinstance(part, RangeGroup) else (part,)):
        yield from read_range(r, schema)


def read_range(part: QueueRange, schema: StructType) -> Iterator[Any]:
    """Arrow record batches of the messages of ``part`` (queue order), on an executor.

    Raises:
        MQClientError: messages of the range are no longer stored, or the topic was deleted,
            and ``failOnDataLoss`` is on (off: the lost offsets are skipped with a warning); or
            the broker serves nothing below ``end`` for ``NO_NEW_MESSAGE_WAIT_S`` seconds.
        MQBrokerError / RemotingError: a pull failed.
    """
    # here, not at the top: the processes that only plan a read never load the decoder (C twin)
    from .arrow_records import MAX_BATCH_DATA_BYTES, RecordColumns
    from .consumers import commit_offsets, get_pull_consumer

    opts = part.options
    consumer = get_pull_consumer(opts.name_server, opts.group)
    pa_schema = _arrow_schema(schema)
    mq, selector, offset, end = part.queue, _selector(opts), part.start, part.end
    tags = _exact_tags(opts)
    cols = RecordColumns()
    waiting_since: float | None = None
    size = stride = opts.pull_batch_size  # stride: what the broker serves per pull (it caps it, at 32 by default)
    while offset < end:
        starts = range(offset, min(end, offset + stride * opts.pulls_in_flight), stride)
        try:
            answers = consumer.pull_raw_many(mq, selector, starts, size, timeout_ms=opts.pull_timeout_ms)
        except MQBrokerError as exc:
            if _topic_exists(consumer, mq.topic):
                raise
            lost = f"topic {mq.topic} no longer exists: offsets {offset}..{end - 1} of {mq} cannot be read"
            if opts.fail_on_data_loss:
                raise MQClientError(lost + " (set failOnDataLoss=false to skip them)") from exc
            logger.warning("%s; skipped", lost)
            break
        for start, (result, body) in zip(starts, answers, strict=True):
            if start != offset:  # an answer before ended short: pull again from where it ended
                break
            status = result.pull_status
            if status is PullStatus.FOUND or status is PullStatus.NO_MATCHED_MSG:
                waiting_since = None
                if body:
                    cols.add_records(body, offset, end)
                if len(cols) >= ROWS_PER_BATCH or cols.data_bytes >= MAX_BATCH_DATA_BYTES:
                    yield _finish(cols, pa_schema, mq.broker_name, tags)
                    cols = RecordColumns()
                served = result.next_begin_offset - offset
                if body and 0 < served < stride and result.next_begin_offset < end:
                    stride = served
                offset = max(result.next_begin_offset, offset + (0 if body else 1))
                continue
            if status is PullStatus.OFFSET_ILLEGAL and offset < result.min_offset:
                lost = f"offsets {offset}..{min(result.min_offset, end) - 1} of {mq} are no longer stored"
                if opts.fail_on_data_loss:
                    raise MQClientError(lost + " (set failOnDataLoss=false to skip them)")
                logger.warning("%s; skipped", lost)
                offset = result.min_offset
            else:  # NO_NEW_MSG (or OFFSET_ILLEGAL above the max) below the planned end
                now = time.monotonic()
                waiting_since = waiting_since if waiting_since is not None else now
                if now - waiting_since > NO_NEW_MESSAGE_WAIT_S:
                    raise MQClientError(f"{mq}: no message served from offset {offset} although the range "
                                        f"ends at {end} ({status.name}, broker max {result.max_offset})")
                time.sleep(0.05)  # back-off between pulls of a queue the broker has not caught up on
            break
    if len(cols):
        yield _finish(cols, pa_schema, mq.broker_name, tags)
    if opts.commit_group and part.commit_on_read:
        commit_offsets(opts.name_server, opts.commit_group, {mq: end})


def lookup_consumer(options: ReadOptions) -> Any:
    """A started ``PullConsumer`` of the reader group for driver-side look-ups (shut it down)."""
    from rocketmq_sdk import PullConsumer

    consumer = PullConsumer(options.group, options.name_server)
    consumer.start()
    return consumer


class RocketMQBatchReader(DataSourceReader):
    """``spark.read.format("rocketmq")``: one partition per queue (or per range, ``minPartitions``)
    between the starting and ending offsets resolved when the query is planned."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[QueueRange | RangeGroup]:
        opts = self.options
        consumer = lookup_consumer(opts)
        try:
            lookups = QueueOffsets(consumer, opts)
            queues = lookups.queues()
            start = lookups.resolve(opts.starting, opts.starting_timestamp, queues)
            end = lookups.resolve(opts.ending, opts.ending_timestamp, queues, missing=LATEST)
        finally:
            consumer.shutdown()
        ranges = plan_ranges(opts, start, end, opts.min_partitions, commit_on_read=True)
        logger.info("rocketmq batch read of %s: %d messages in %d partitions over %d queues",
                    ",".join(opts.topics), sum(end[q] - start.get(q, 0) for q in end if end[q] > start.get(q, 0)),
                    len(ranges), len(queues))
        return ranges

    def read(self, partition: QueueRange | RangeGroup) -> Iterator[Any]:
        return read_partition(partition, self.schema)
