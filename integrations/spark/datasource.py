"""A Spark Python data source named ``rocketmq`` (Spark 4.0 ``pyspark.sql.datasource`` API).

Register it once per session, then write with the DataFrame writer::

    from rocketmq_sdk.integrations.spark import register_data_source
    register_data_source(spark)
    (df.write.format("rocketmq")
       .option("namesrv", "127.0.0.1:9876").option("topic", "flights")
       .option("tagCol", "carrier").option("selectorCol", "tailnum")
       .mode("append").save())

Options (names are case-insensitive):

==================  ========================================================================
``namesrv``         name server ``host:port`` (required)
``topic``           destination topic (required)
``group``           producer group (default ``spark_rocketmq_writer``)
``bodyCol``         column holding the body; default: the whole row as UTF-8 JSON
``tagCol``          column holding the tag
``keysCol``         column holding the key(s)
``keysTemplate``    ``str.format`` template over the row's columns, e.g. ``{year}-{flight}``
``selectorCol``     column hashed by ``SelectMessageQueueByHash`` (per-value queue and order)
``excludeFromBody`` comma-separated columns left out of the JSON body
``sendTimeoutMs``   per-request send timeout in ms (default 3000)
``batchSize``       messages per send request, per target queue (default 1; see ``batching``)
==================  ========================================================================

Each Spark task sends its partition with the worker's cached producer, exactly as
:func:`write_dataframe` does; the number of messages each task sent travels back in its
commit message and the total is logged by ``commit()`` on the driver. Reading is not supported.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType
from rocketmq_sdk.exceptions import IllegalArgumentError

from .mapping import FieldTemplate, RowMessageMapper
from .producers import DEFAULT_PRODUCER_GROUP, ProducerSpec, get_producer
from .writer import send_rows

logger = logging.getLogger("rocketmq_sdk.integrations.spark")


@dataclass
class SentCount(WriterCommitMessage):
    """Commit message of one task: how many messages it sent."""

    sent: int


def _options_to_writer_args(options: dict[str, str],
                            schema: StructType) -> tuple[RowMessageMapper, ProducerSpec, int, int]:
    opts = {k.lower(): v for k, v in options.items()}
    for required in ("namesrv", "topic"):
        if not opts.get(required):
            raise IllegalArgumentError(f'the rocketmq data source needs .option("{required}", ...)')
    columns = set(schema.names)
    for opt in ("bodyCol", "tagCol", "keysCol", "selectorCol"):
        value = opts.get(opt.lower())
        if value and value not in columns:
            raise IllegalArgumentError(f"option {opt}={value!r} names no column of {sorted(columns)}")
    keys_template = opts.get("keystemplate")
    exclude = tuple(c.strip() for c in opts.get("excludefrombody", "").split(",") if c.strip())
    mapper = RowMessageMapper(
        opts["topic"], body=opts.get("bodycol") or None, tag_col=opts.get("tagcol") or None,
        keys_col=opts.get("keyscol") or None,
        keys_fn=FieldTemplate(keys_template) if keys_template else None,
        selector_col=opts.get("selectorcol") or None, exclude_from_body=exclude)
    spec = ProducerSpec.create(opts["namesrv"], opts.get("group") or DEFAULT_PRODUCER_GROUP)
    batch_size = int(opts.get("batchsize", "1"))
    if batch_size < 1:
        raise IllegalArgumentError(f"option batchSize must be at least 1, got {batch_size}")
    return mapper, spec, int(opts.get("sendtimeoutms", "3000")), batch_size


class RocketMQDataSourceWriter(DataSourceWriter):
    """Sends the rows of one partition per ``write`` call (on the workers)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.mapper, self.spec, self.send_timeout_ms, self.batch_size = _options_to_writer_args(options, schema)

    def write(self, iterator: Iterator[Any]) -> SentCount:
        producer = get_producer(self.spec)
        return SentCount(send_rows(iterator, self.mapper, producer, send_timeout_ms=self.send_timeout_ms,
                                   batch_size=self.batch_size))

    def commit(self, messages: list[SentCount | None]) -> None:
        total = sum(m.sent for m in messages if m is not None)
        logger.info("rocketmq data source: %d messages sent to topic %s by %d tasks",
                    total, self.mapper.topic, len(messages))

    def abort(self, messages: list[SentCount | None]) -> None:
        sent = sum(m.sent for m in messages if m is not None)
        logger.error("rocketmq data source: write aborted after %d acknowledged messages to topic %s "
                     "(sent messages cannot be taken back)", sent, self.mapper.topic)


class RocketMQDataSource(DataSource):
    """The ``rocketmq`` format: a batch writer (no reader, no schema inference)."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQDataSourceWriter:
        return RocketMQDataSourceWriter(dict(self.options), schema)


def register_data_source(spark: Any) -> None:
    """Register the ``rocketmq`` format with ``spark`` (a ``SparkSession``)."""
    spark.dataSource.register(RocketMQDataSource)
