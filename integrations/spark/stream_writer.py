"""``df.writeStream.format("rocketmq")``: each micro-batch sent like a batch write.

The column mapping, producer cache and batching are the batch writer's (see
:mod:`.datasource`). Delivery is at-least-once: a micro-batch that fails, or that Spark runs
again after a restart because its commit was not journaled, is sent again. To deduplicate
downstream, every message carries one more key (``KEYS``, indexed by the broker), unique per
row of the query and the same when a batch is sent again::

    spark-<query id>-<batch id>-<partition id>-<row index in the partition>

(a replayed batch has the same id, partitions and row order when its input is replayed from a
deterministic source, such as this project's RocketMQ source). ``rowIdKey=false`` leaves it out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import datasource as _spark_datasource
from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage
from rocketmq_sdk.protocol.message import Message

from .mapping import RowMessageMapper

logger = logging.getLogger("rocketmq_sdk.integrations.spark")

QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""Spark's local property holding the streaming query id (set on every task of the query)."""
BATCH_ID_PROPERTY = "streaming.sql.batchId"
"""Spark's local property holding the micro-batch id."""


@dataclass
class BatchSentCount(WriterCommitMessage):
    """Commit message of one streaming write task: the partition and how many messages it sent."""

    partition: int
    sent: int


@dataclass
class RowIdKeys:
    """Wraps a :class:`RowMessageMapper`, adding the key ``<prefix>-<row index>`` to each message
    in the order rows are mapped (``send_rows`` maps each row once, in partition order)."""

    mapper: RowMessageMapper
    prefix: str
    count: int = 0

    @property
    def topic(self) -> str:
        return self.mapper.topic

    @property
    def uses_selector(self) -> bool:
        return self.mapper.uses_selector

    @property
    def body(self) -> Any:
        return self.mapper.body

    def selector_arg(self, row: Any) -> str:
        return self.mapper.selector_arg(row)

    def to_message(self, row: Any) -> Message:
        try:
            msg = self.mapper.to_message(row)
            msg.keys = [*msg.keys, f"{self.prefix}-{self.count}"]
        finally:  # a bad row (sent to a bad-rows topic) keeps its index too
            self.count += 1
        return msg


StreamArrowWriter: type = getattr(_spark_datasource, "DataSourceStreamArrowWriter", DataSourceStreamWriter)
"""Spark's Arrow stream writer base when this PySpark has it, else the row one."""


class RocketMQStreamWriter(StreamArrowWriter):  # type: ignore[misc,valid-type]
    """Sends each micro-batch's partitions (on the executors, from Arrow batches); logs the
    counts on commit.

    Args:
        args: the parsed write options (:class:`.sink.WriterArgs`).
        row_id_key: add the dedup key described above.
    """

    def __init__(self, args: Any, row_id_key: bool) -> None:
        self.args, self.mapper, self.row_id_key = args, args.mapper, row_id_key

    def write(self, iterator: Iterator[Any]) -> BatchSentCount:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        mapper: Any = self.mapper
        if self.row_id_key:
            query = (ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None) or "query"
            batch = (ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None) or "0"
            mapper = RowIdKeys(self.mapper, f"spark-{query}-{batch}-{partition}")
        return BatchSentCount(partition, self.args.send(iterator, mapper))

    def commit(self, messages: list[BatchSentCount | None], batchId: int) -> None:  # noqa: N803
        total = sum(m.sent for m in messages if m is not None)
        logger.info("rocketmq stream sink: batch %d sent %d messages to topic %s from %d tasks",
                    batchId, total, self.mapper.topic, len(messages))

    def abort(self, messages: list[BatchSentCount | None], batchId: int) -> None:  # noqa: N803
        sent = sum(m.sent for m in messages if m is not None)
        logger.error("rocketmq stream sink: batch %d aborted after %d acknowledged messages to topic %s "
                     "(they stay sent; the batch is sent again when the query reruns it)",
                     batchId, sent, self.mapper.topic)
