"""``spark.readStream.format("rocketmq")``: a Structured Streaming source over queue offsets.

Spark's checkpoint holds the source of truth, as with Spark's Kafka source: each micro-batch
is the offset range ``(start, end]`` per queue that Spark journals before running it, so a
query restarted from its checkpoint re-plans exactly the batches it had not committed and
reads each message once. The reader itself keeps no position; it only looks offsets up:

- ``initialOffset``: ``startingOffsets`` (default ``latest``) or ``startingTimestamp``;
- ``latestOffset(start, limit)``: every readable queue's max offset, re-listing the topics'
  queues each time, so queues added to a topic are picked up (from their first offset);
  capped by ``maxMessagesPerTrigger`` (``ReadMaxRows``, Spark ≥ 4.2's admission control for
  Python sources), spread over the queues in proportion to their backlog;
- ``Trigger.AvailableNow``: the max offsets at the query's start are the target;
- with ``commitGroup``, processed positions become that group's consumer offsets, each
  acknowledged by its broker before Spark gets the answer (Spark ends this process with
  SIGTERM when the query stops: nothing may wait for a later persist), so ``consumerProgress``
  shows the query's lag. Spark tells a source that a batch is done only when it plans the next
  trigger (``commit(end)``, and the ``start`` of ``latestOffset(start, limit)``, both committed
  here), so the group trails the checkpoint by at most the batch in progress: an AvailableNow
  query plans once more after its last batch (and finds nothing left), so the group is at its
  end when it finishes; a query stopped during a batch, or between triggers, leaves the group
  at the start of its last batch, and its next run commits the rest at its first trigger. The
  group's offsets thus never run ahead of what the sink has committed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.types import StructType
from rocketmq_sdk.exceptions import IllegalArgumentError, MQError
from rocketmq_sdk.protocol.message import MessageQueue

from .consumers import commit_offsets
from .offsets import QueueOffsets, QueueRange, RangeGroup, plan_ranges
from .read_options import ReadOptions, offsets_from_json, offsets_to_json
from .reader import lookup_consumer, read_partition

logger = logging.getLogger("rocketmq_sdk.integrations.spark")

try:  # PySpark ≥ 4.2: admission control and Trigger.AvailableNow for Python streaming sources
    from pyspark.sql.streaming.datasource import ReadMaxRows, SupportsTriggerAvailableNow

    HAS_ADMISSION_CONTROL = True
except ImportError:  # pragma: no cover - depends on the installed PySpark
    ReadMaxRows = None
    HAS_ADMISSION_CONTROL = False

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in: older PySpark runs Trigger.AvailableNow through Spark's own wrapper."""


def cap_offsets(start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int],
                max_messages: int | None) -> dict[MessageQueue, int]:
    """End offsets reading at most ``max_messages`` queue offsets past ``start`` in total.

    The budget goes to the queues with a backlog in proportion to it (rounded down), the rest
    one by one in queue order, so the total is exactly ``min(max_messages, backlog)``. Queues
    missing from ``start`` count from 0.
    """
    end = dict(latest)
    if max_messages is None:
        return end
    backlog = {mq: hi - start.get(mq, 0) for mq, hi in latest.items() if hi > start.get(mq, 0)}
    total = sum(backlog.values())
    if total <= max_messages:
        return end
    take = {mq: n * max_messages // total for mq, n in backlog.items()}
    left = max_messages - sum(take.values())
    for mq in sorted(backlog, key=lambda q: (q.topic, q.broker_name, q.queue_id)):
        if left == 0:
            break
        if take[mq] < backlog[mq]:
            take[mq] += 1
            left -= 1
    for mq, n in take.items():
        end[mq] = start.get(mq, 0) + n
    return end


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming source (one instance per query, in a Python process on the driver)."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        if options.max_messages_per_trigger is not None and not HAS_ADMISSION_CONTROL:
            import pyspark

            raise IllegalArgumentError(
                f"option maxMessagesPerTrigger needs PySpark 4.2 or later (admission control for Python "
                f"streaming sources); PySpark {pyspark.__version__} is installed")
        self.options = options
        self.schema = schema
        self._consumer: Any = None
        self._target: dict[MessageQueue, int] | None = None
        self._latest: dict[MessageQueue, int] | None = None
        self._committed: dict[MessageQueue, int] = {}

    def _lookups(self) -> QueueOffsets:
        if self._consumer is None:
            self._consumer = lookup_consumer(self.options)
        return QueueOffsets(self._consumer, self.options)

    def initialOffset(self) -> dict:  # noqa: N802 - Spark's name
        lookups = self._lookups()
        queues = lookups.queues()
        offsets = lookups.resolve(self.options.starting, self.options.starting_timestamp, queues)
        logger.info("rocketmq stream of %s starts at %s", ",".join(self.options.topics), offsets_to_json(offsets))
        return offsets_to_json(offsets)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        lookups = self._lookups()
        self._target = lookups.latest(lookups.queues())

    def getDefaultReadLimit(self) -> Any:  # noqa: N802 - Spark's name
        if self.options.max_messages_per_trigger is not None:
            return ReadMaxRows(self.options.max_messages_per_trigger)
        return super().getDefaultReadLimit()

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:  # noqa: N802
        if self._target is not None:
            latest = dict(self._target)
        else:
            lookups = self._lookups()
            latest = lookups.latest(lookups.queues())
        self._latest = latest
        if start is None:  # PySpark < 4.2 calls latestOffset() without admission control
            return offsets_to_json(latest)
        begin = offsets_from_json(start)
        self._commit_to_group(begin)
        for mq, offset in begin.items():  # a queue no longer listed keeps its position
            latest.setdefault(mq, offset)
        max_rows = getattr(limit, "max_rows", None) if ReadMaxRows is not None and isinstance(limit, ReadMaxRows) \
            else None
        return offsets_to_json(cap_offsets(begin, latest, max_rows))

    def reportLatestOffset(self) -> dict | None:  # noqa: N802 - Spark's name
        return offsets_to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> list[QueueRange | RangeGroup]:
        begin = offsets_from_json(start)
        stop = offsets_from_json(end)
        new = [mq for mq in stop if mq not in begin]
        if new:  # queues that appeared after ``start``: from their first stored message
            begin.update(self._lookups().earliest(new))
            logger.info("rocketmq stream: new queues %s", ", ".join(f"{q.topic} {q.broker_name}/{q.queue_id}"
                                                                   for q in new))
        return plan_ranges(self.options, begin, stop, self.options.min_partitions)

    def read(self, partition: QueueRange | RangeGroup) -> Iterator[Any]:
        return read_partition(partition, self.schema)

    def commit(self, end: dict) -> None:
        self._commit_to_group(offsets_from_json(end))

    def _commit_to_group(self, offsets: dict[MessageQueue, int]) -> None:
        group = self.options.commit_group
        if not group:
            return
        changed = {mq: offset for mq, offset in offsets.items() if self._committed.get(mq) != offset}
        if not changed:  # Spark's commit(end) repeats the start of latestOffset(start, limit)
            return
        try:
            commit_offsets(self.options.name_server, group, changed)
        except (MQError, TimeoutError) as exc:  # a view of the checkpoint: made again at the next trigger
            logger.warning("rocketmq stream: commit to consumer group %s failed (retried at the next trigger): %s",
                           group, exc)
            return
        self._committed.update(changed)

    def stop(self) -> None:
        # Spark usually ends this process with SIGTERM instead (nothing is lost: commits are
        # acknowledged by the brokers before commit() / latestOffset() return)
        if self._consumer is not None:
            try:
                self._consumer.shutdown()
            except Exception:  # noqa: BLE001 - stopping anyway
                logger.warning("rocketmq stream: consumer shutdown failed", exc_info=True)
        self._consumer = None
