"""The ``rocketmq`` Spark data source (Spark 4 ``pyspark.sql.datasource`` API): batch and
streaming reads and writes, the counterpart of Spark's Kafka source and sink.

Installing the package registers it (module ``pyspark_rocketmq``); ``register_data_source(spark)``
does the same explicitly::

    df = (spark.read.format("rocketmq").option("nameServer", "127.0.0.1:9876")
          .option("topic", "flights").load())
    (df.write.format("rocketmq").option("nameServer", "127.0.0.1:9876")
       .option("topic", "flights_copy").mode("append").save())

Read options: see :class:`.read_options.ReadOptions`; columns: :data:`.reader.SOURCE_SCHEMA`.

Write options (names are case-insensitive):

==================  ========================================================================
``nameServer``      name server ``host:port`` (required; alias ``namesrv``)
``topic``           destination topic (required)
``group``           producer group (default ``spark_rocketmq_writer``)
``bodyCol``         column holding the body (default: ``body`` if there is such a column, else
                    the whole row as UTF-8 JSON)
``tagCol``          column holding the tag (default: ``tags`` if present)
``keysCol``         column holding the key(s) (default: ``keys`` if present)
``keysTemplate``    ``str.format`` template over the row's columns, e.g. ``{year}-{flight}``
``propertiesCol``   ``map<string,string>`` column of user properties (default: ``properties``)
``delayCol``        column holding the delay level 1..18 (default: ``delay_time_level``)
``selectorCol``     column hashed by ``SelectMessageQueueByHash`` (per-value queue and order)
``excludeFromBody`` comma-separated columns left out of the JSON body
``sendTimeoutMs``   per-request send timeout in ms (default 3000)
``batchSize``       messages per send request, per target queue (default 1; see ``batching``)
``maxBatchBytes``   a batch request is sent before its bodies exceed this many bytes (default
                    1048576; the broker refuses requests over its ``maxMessageSize``, 4 MiB)
``badRowsTopic``    a topic for the rows that make no message (null body, ``||`` in a tag...):
                    each goes there as JSON with the reason in its ``BAD_ROW_REASON``
                    property (default: none, a bad row fails the write)
``rowIdKey``        streaming only: add the dedup key of :mod:`.stream_writer` (default true)
==================  ========================================================================

Each Spark task gets its partition as Arrow record batches (Spark's Arrow writer API, no
pickled ``Row`` per row; :mod:`.arrow_rows`) and sends it with the worker's cached producer,
exactly as :func:`write_dataframe` does; the number of messages each task sent travels back in its
commit message and the total is logged by ``commit()`` on the driver.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import datasource as _spark_datasource
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType
from rocketmq_sdk.exceptions import IllegalArgumentError

from .batching import DEFAULT_MAX_BATCH_BYTES
from .mapping import ColumnValue, FieldTemplate, RowMessageMapper
from .producers import DEFAULT_PRODUCER_GROUP, ProducerSpec, get_producer
from .read_options import ReadOptions, lower_keys, name_server
from .reader import SOURCE_SCHEMA
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


def _options_to_writer_args(options: dict[str, str], schema: StructType) -> WriterArgs:
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
        self.args = _options_to_writer_args(options, schema)
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


class RocketMQDataSource(DataSource):
    """The ``rocketmq`` format: batch and streaming reads and writes (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from .reader import RocketMQBatchReader

        return RocketMQBatchReader(ReadOptions.parse(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 - Spark's name
        from .stream_reader import RocketMQStreamReader

        return RocketMQStreamReader(ReadOptions.parse(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQDataSourceWriter:
        return RocketMQDataSourceWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        from .stream_writer import RocketMQStreamWriter

        row_id_key = lower_keys(self.options).get("rowidkey", "true").lower() != "false"
        return RocketMQStreamWriter(_options_to_writer_args(dict(self.options), schema), row_id_key)


def register_data_source(spark: Any) -> None:
    """Register the ``rocketmq`` format with ``spark`` (a ``SparkSession``).

    Not needed when the package is installed: Spark registers ``rocketmq`` by itself from the
    top-level module ``pyspark_rocketmq`` (Spark looks for ``pyspark_*`` modules defining
    ``DefaultSource``). Calling it anyway is harmless: a format the session already knows is
    left as it is (some Spark versions refuse to replace a statically registered source,
    ``DATA_SOURCE_ALREADY_EXISTS``, which is taken as done too).
    """
    try:  # a classic (non-Connect) session can tell: skip Spark's "replaced" warning
        if spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists("rocketmq"):
            logger.debug("the rocketmq data source is already registered")
            return
    except Exception:  # noqa: BLE001 - Spark Connect, or another Spark: just register
        pass
    try:
        spark.dataSource.register(RocketMQDataSource)
    except Exception as exc:  # pyspark.errors.AnalysisException; not imported to stay cheap
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
        logger.debug("the rocketmq data source is already registered by Spark")
