"""Spark and RocketMQ (needs the ``spark`` extra): write DataFrames, one message per row, and
read topics back, in batch and Structured Streaming queries.

- :func:`write_dataframe` (``DataFrame.foreachPartition``), returning per-partition counts;
- the ``rocketmq`` Python data source (Spark 4), registered by installing the package
  (``pyspark_rocketmq``) or by ``register_data_source(spark)``: ``spark.read`` /
  ``spark.readStream`` / ``df.write`` / ``df.writeStream`` ``.format("rocketmq")`` with
  ``.option("nameServer", ...).option("topic", ...)`` (:mod:`.datasource`, docs/spark.md).

Writes use one producer per Python worker process, reused across partitions
(:mod:`.producers`), and a :class:`RowMessageMapper` describing how a row becomes a message.
``ROCKETMQ_SPARK_LOG_FILE`` collects the SDK's log records of Spark's Python processes
(:mod:`.process_log`).
"""

from typing import TYPE_CHECKING

from rocketmq_sdk._lazy import lazy_exports

from .process_log import log_to_file_from_env

# Imported when first used (PEP 562, rocketmq_sdk._lazy): Spark's driver-side processes that plan
# a read import this package and need none of the writer.
if TYPE_CHECKING:
    from .mapping import FieldTemplate, RowMessageMapper, row_as_dict, row_to_json
    from .producers import (
        DEFAULT_PRODUCER_GROUP,
        ProducerCache,
        ProducerSpec,
        get_producer,
        shutdown_producers,
    )
    from .writer import WriteProgress, WriteResult, send_batches, send_rows, write_dataframe

log_to_file_from_env()  # ROCKETMQ_SPARK_LOG_FILE, for Spark's Python processes (docs/spark.md)


def register_data_source(spark: object) -> None:
    """Register the ``rocketmq`` data source format with a ``SparkSession`` (see :mod:`.datasource`)."""
    from .datasource import register_data_source as _register

    _register(spark)


__all__ = [
    "DEFAULT_PRODUCER_GROUP",
    "FieldTemplate",
    "ProducerCache",
    "ProducerSpec",
    "RowMessageMapper",
    "WriteProgress",
    "WriteResult",
    "get_producer",
    "register_data_source",
    "row_as_dict",
    "row_to_json",
    "send_batches",
    "send_rows",
    "shutdown_producers",
    "write_dataframe",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__)
