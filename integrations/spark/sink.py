"""The write side of the ``rocketmq`` data source: the parsed write options (:class:`WriterArgs`,
options in :mod:`.datasource`'s docstring) and the batch writer Spark runs on the workers.

A module of its own so that the processes that only plan a read (Spark's ``create_data_source``
and ``plan_data_source_read``) never import the writer (:func:`.datasource.RocketMQDataSource.writer`
imports it when a write is planned).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import datasource as _spark_datasource
from pyspark.sql.datasource import DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType
from rocketmq_sdk.exceptions import IllegalArgumentError

from .batching import DEFAULT_MAX_BATCH_BYTES
from .mapping import ColumnValue, FieldTemplate, RowMessageMapper
from .producers import DEFAULT_PRODUCER_GROUP, ProducerSpec, get_producer
from .read_options import lower_keys, name_server
from .writer import send_batches, send_rows

logger = logging.getLogger("rocketmq_sdk.integrations.spark")


@dataclass
class SentCount(WriterCommitMessage):
    """Commit message of one task: how many messages it sent."""

    sent: int


KAFKA_STYLE_COLUMNS = {"bodycol": "body", "tagcol": "tags", "keyscol": "keys", "propertiescol": "properties",
                       "delaycol": "delay_time_level"}
"""Columns used by name when their option is not given (as Spark's Kafka sink uses ``value``,
``key`` and ``headers``): a DataFrame read from RocketMQ writes back as it was read."""


@dataclass(frozen=True)
class WriterArgs:
    """The parsed write options: the recipe, the producer, and how requests are sized."""

    mapper: RowMessageMapper
    spec: ProducerSpec
    send_timeout_ms: int = 3000
    batch_size: int = 1
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    bad_rows_topic: str | None = None

    def send(self, batches: Iterator[Any], mapper: Any = None) -> int:
        """Send the rows of Arrow ``batches`` (one task's partition; rows from a PySpark without
        the Arrow writers) with the worker's producer."""
        mapper = mapper or self.mapper
        it = iter(batches)
        first = next(it, None)
        if first is None:
            return 0
        items = itertools.chain([first], it)
        kw = {"send_timeout_ms": self.send_timeout_ms, "batch_size": self.batch_size,
              "max_batch_bytes": self.max_batch_bytes, "bad_rows_topic": self.bad_rows_topic}
        if hasattr(first, "num_rows") and hasattr(first, "schema"):  # Arrow batches (Spark's Arrow writers)
            return send_batches(items, mapper, get_producer(self.spec), **kw)
        return send_rows(items, mapper, get_producer(self.spec), **kw)  # rows: an older PySpark


def writer_args_from_options(options: dict[str, str], schema: StructType) -> WriterArgs:
    opts = lower_keys(options)
    namesrv = name_server(opts)
    if not opts.get("topic"):
        raise IllegalArgumentError('the rocketmq data source needs .option("topic", ...)')
    columns = set(schema.names)
    for opt in ("bodyCol", "tagCol", "keysCol", "selectorCol", "propertiesCol", "delayCol"):
        value = opts.get(opt.lower())
        if value and value not in columns:
            raise IllegalArgumentError(f"option {opt}={value!r} names no column of {sorted(columns)}")
    keys_template = opts.get("keystemplate")
    for opt, column in KAFKA_STYLE_COLUMNS.items():
        if not opts.get(opt) and column in columns and not (opt == "keyscol" and keys_template):
            opts[opt] = column
    exclude = tuple(c.strip() for c in opts.get("excludefrombody", "").split(",") if c.strip())
    mapper = RowMessageMapper(
        opts["topic"], body=opts.get("bodycol") or None, tag_col=opts.get("tagcol") or None,
        keys_col=opts.get("keyscol") or None,
        keys_fn=FieldTemplate(keys_template) if keys_template else None,
        properties_fn=ColumnValue(opts["propertiescol"]) if opts.get("propertiescol") else None,
        delay_col=opts.get("delaycol") or None,
        selector_col=opts.get("selectorcol") or None, exclude_from_body=exclude)
    spec = ProducerSpec.create(namesrv, opts.get("group") or DEFAULT_PRODUCER_GROUP)
    batch_size = int(opts.get("batchsize", "1"))
    if batch_size < 1:
        raise IllegalArgumentError(f"option batchSize must be at least 1, got {batch_size}")
    max_batch_bytes = int(opts.get("maxbatchbytes", str(DEFAULT_MAX_BATCH_BYTES)))
    if max_batch_bytes < 1:
        raise IllegalArgumentError(f"option maxBatchBytes must be at least 1, got {max_batch_bytes}")
    return WriterArgs(mapper, spec, int(opts.get("sendtimeoutms", "3000")), batch_size, max_batch_bytes,
                      opts.get("badrowstopic") or None)


ArrowWriter: type = getattr(_spark_datasource, "DataSourceArrowWriter", DataSourceWriter)
"""Spark's Arrow writer base when this PySpark has it (``write`` gets ``pyarrow.RecordBatch``es), else the row one."""


class RocketMQDataSourceWriter(ArrowWriter):  # type: ignore[misc,valid-type]
    """Sends the rows of one partition per ``write`` call (on the workers), from Arrow batches."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.args = writer_args_from_options(options, schema)
        self.mapper = self.args.mapper

    def write(self, iterator: Iterator[Any]) -> SentCount:
        return SentCount(self.args.send(iterator))

    def commit(self, messages: list[SentCount | None]) -> None:
        total = sum(m.sent for m in messages if m is not None)
        logger.info("rocketmq data source: %d messages sent to topic %s by %d tasks",
                    total, self.mapper.topic, len(messages))

    def abort(self, messages: list[SentCount | None]) -> None:
        sent = sum(m.sent for m in messages if m is not None)
        logger.error("rocketmq data source: write aborted after %d acknowledged messages to topic %s "
                     "(sent messages cannot be taken back)", sent, self.mapper.topic)
