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

import logging
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
)
from pyspark.sql.types import StructType

from .read_options import ReadOptions, lower_keys
from .reader import SOURCE_SCHEMA

if TYPE_CHECKING:
    from .sink import RocketMQDataSourceWriter

logger = logging.getLogger("rocketmq_sdk.integrations.spark")


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
        from .sink import RocketMQDataSourceWriter

        return RocketMQDataSourceWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        from .sink import writer_args_from_options
        from .stream_writer import RocketMQStreamWriter

        row_id_key = lower_keys(self.options).get("rowidkey", "true").lower() != "false"
        return RocketMQStreamWriter(writer_args_from_options(dict(self.options), schema), row_id_key)


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
