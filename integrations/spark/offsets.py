"""Turning the source's offset options into concrete per-queue offsets, and offset ranges into
Spark partitions (on the driver).

:class:`QueueOffsets` asks the brokers through a started ``PullConsumer`` (public SDK API):
the topics' readable queues from the name server, GET_MIN_OFFSET / GET_MAX_OFFSET per queue,
SEARCH_OFFSET_BY_TIMESTAMP for timestamps. :func:`plan_ranges` cuts ``[start, end)`` per queue
into :class:`QueueRange` partitions, one per queue (small ones packed into a :class:`RangeGroup`,
``minRowsPerPartition``), more for big queues when ``minPartitions``
asks for it (split like Spark's Kafka source: in proportion to each queue's share).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition
from rocketmq_sdk.protocol.message import MessageQueue, PullStatus

from .read_options import EARLIEST, LATEST, OffsetSpec, ReadOptions, offsets_from_json

logger = logging.getLogger("rocketmq_sdk.integrations.spark")


@dataclass(frozen=True)
class QueueRange(InputPartition):
    """One Spark partition: queue offsets ``[start, end)`` of one queue (picklable).

    Attributes:
        options: the parsed source options (name server, filter, pull settings).
        topic / broker_name / queue_id: the queue.
        start / end: first offset read, first offset not read.
        commit_on_read: the task commits ``end`` to ``commitGroup`` once the range is read
            (batch reads: the last range of each queue; streaming reads commit on the driver).
    """

    options: ReadOptions
    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int
    commit_on_read: bool = False

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)


def plan_ranges(options: ReadOptions, start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int],
                min_partitions: int | None = None, *,
                commit_on_read: bool = False) -> list[QueueRange | RangeGroup]:
    """Partitions reading ``[start[q], end[q])`` of every queue of ``end`` (missing starts: 0).

    Empty ranges are left out. With ``min_partitions`` larger than the number of non-empty
    queues, each queue is cut into ``max(1, round(size / total * min_partitions))`` contiguous
    ranges of near-equal size; without it, small queues' ranges are packed into partitions of
    at least ``options.min_rows_per_partition`` messages (:func:`pack_ranges`). ``commit_on_read``
    marks the last range of each queue.
    """
    spans = []
    for mq in sorted(end, key=lambda q: (q.topic, q.broker_name, q.queue_id)):
        lo, hi = start.get(mq, 0), end[mq]
        if hi > lo:
            spans.append((mq, lo, hi))
    total = sum(hi - lo for _, lo, hi in spans)
    out: list[QueueRange] = []
    for mq, lo, hi in spans:
        pieces = 1
        if min_partitions and min_partitions > len(spans) and total:
            pieces = max(1, min(hi - lo, round((hi - lo) / total * min_partitions)))
        bounds = [lo + (hi - lo) * i // pieces for i in range(pieces)] + [hi]
        for i in range(pieces):
            out.append(QueueRange(options, mq.topic, mq.broker_name, mq.queue_id, bounds[i], bounds[i + 1],
                                  commit_on_read=commit_on_read and i == pieces - 1))
    if min_partitions:
        return out
    return pack_ranges(out, options.min_rows_per_partition)


@dataclass(frozen=True)
class RangeGroup(InputPartition):
    """One Spark partition reading several queue ranges (:class:`QueueRange`) one after the other (picklable)."""

    ranges: tuple[QueueRange, ...]


def pack_ranges(ranges: list[QueueRange], min_rows: int) -> list[QueueRange | RangeGroup]:
    """``ranges`` packed in order into partitions of at least ``min_rows`` messages (the last may
    hold fewer); a partition of one range stays a :class:`QueueRange`."""
    out: list[QueueRange | RangeGroup] = []
    group: list[QueueRange] = []
    rows = 0
    for r in ranges:
        group.append(r)
        rows += r.end - r.start
        if rows >= min_rows:
            out.append(group[0] if len(group) == 1 else RangeGroup(tuple(group)))
            group, rows = [], 0
    if group:
        out.append(group[0] if len(group) == 1 else RangeGroup(tuple(group)))
    return out


class QueueOffsets:
    """Offset look-ups for the source's topics through ``consumer`` (a started ``PullConsumer``)."""

    def __init__(self, consumer: Any, options: ReadOptions) -> None:
        self.consumer = consumer
        self.options = options

    def queues(self) -> list[MessageQueue]:
        """The readable queues of every topic read, sorted.

        Raises:
            TopicNotExistError: a topic has no route.
        """
        out: list[MessageQueue] = []
        for topic in self.options.topics:
            out.extend(self.consumer.fetch_subscribe_message_queues(topic))
        return sorted(out, key=lambda q: (q.topic, q.broker_name, q.queue_id))

    def latest(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """The max offset (next to be written) of each queue."""
        return {mq: self.consumer.max_offset(mq) for mq in queues}

    def earliest(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """The min offset (first still stored) of each queue."""
        return {mq: self.consumer.min_offset(mq) for mq in queues}

    def resolve(self, spec: OffsetSpec, timestamp: int | None, queues: list[MessageQueue], *,
                missing: int = EARLIEST) -> dict[MessageQueue, int]:
        """Concrete offsets for ``queues``: by ``timestamp`` when given, else by ``spec``.

        In a JSON spec, ``-2`` / ``-1`` mean earliest / latest; queues it does not list take
        ``missing`` (:data:`EARLIEST` or :data:`LATEST`).
        """
        if timestamp is not None:
            return {mq: self.offset_for_timestamp(mq, timestamp) for mq in queues}
        if spec == "earliest":
            return self.earliest(queues)
        if spec == "latest":
            return self.latest(queues)
        return self._from_json(spec, queues, missing)

    def _from_json(self, spec: Mapping[str, Any], queues: list[MessageQueue], missing: int) -> dict[MessageQueue, int]:
        given = offsets_from_json(spec)
        out: dict[MessageQueue, int] = {}
        for mq in queues:
            value = given.get(mq, missing)
            if value == EARLIEST:
                value = self.consumer.min_offset(mq)
            elif value == LATEST:
                value = self.consumer.max_offset(mq)
            out[mq] = value
        unknown = sorted(f"{mq.topic} {mq.broker_name}/{mq.queue_id}" for mq in set(given) - set(queues))
        if unknown:
            logger.warning("offsets given for queues the topics do not have (ignored): %s", ", ".join(unknown))
        return out

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The offset of the first message of ``mq`` stored at or after ``timestamp_ms`` (the
        max offset when there is none).

        SEARCH_OFFSET_BY_TIMESTAMP answers with the message stored *nearest* the time (Java
        4.x's ``getOffsetInQueueByTime``), which may be the one just before it or any of a run
        of messages stored in the same millisecond; the answer is corrected by reading the
        store times around it.
        """
        lo, hi = self.consumer.min_offset(mq), self.consumer.max_offset(mq)
        if hi <= lo:
            return hi
        offset = min(max(self.consumer.search_offset(mq, timestamp_ms), lo), hi - 1)
        times = self._store_times(mq, offset, 1)
        if not times or times[0][1] < timestamp_ms:
            # the nearest one is before the time: the next one is the first at or after it
            while True:
                batch = self._store_times(mq, offset + 1, 32)
                for off, t in batch:
                    if t >= timestamp_ms:
                        return off
                if not batch or batch[-1][0] + 1 >= hi:
                    return hi
                offset = batch[-1][0]
        while offset > lo:  # step back over earlier messages stored at or after the time
            first = max(lo, offset - 32)
            earlier = [off for off, t in self._store_times(mq, first, offset - first) if t >= timestamp_ms]
            if not earlier:
                break
            offset = earlier[0]
            if offset != first:  # the one before it is earlier than the time
                break
        return offset

    def _store_times(self, mq: MessageQueue, offset: int, count: int) -> list[tuple[int, int]]:
        if count <= 0:
            return []
        result = self.consumer.pull(mq, "*", offset, count)
        if result.pull_status is not PullStatus.FOUND:
            return []
        return [(m.queue_offset, m.store_timestamp) for m in result.msg_found_list]
