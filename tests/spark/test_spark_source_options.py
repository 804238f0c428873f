"""The ``rocketmq`` source's option parsing, offset JSON and partition planning (no Spark session)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from rocketmq_sdk.exceptions import IllegalArgumentError  # noqa: E402
from rocketmq_sdk.integrations.spark.offsets import QueueOffsets, plan_ranges  # noqa: E402
from rocketmq_sdk.integrations.spark.read_options import (  # noqa: E402
    ReadOptions,
    offsets_from_json,
    offsets_to_json,
)
from rocketmq_sdk.integrations.spark.stream_reader import cap_offsets  # noqa: E402
from rocketmq_sdk.protocol.message import MessageQueue, PullResult, PullStatus  # noqa: E402

NS = {"nameServer": "127.0.0.1:9876"}


def mq(qid: int, topic: str = "t", broker: str = "broker-a") -> MessageQueue:
    return MessageQueue(topic, broker, qid)


def test_defaults_alias_and_several_topics():
    batch = ReadOptions.parse({"namesrv": "h:1", "TOPIC": "a, b,a"}, streaming=False)
    assert (batch.name_server, batch.topics, batch.starting, batch.ending) == ("h:1", ("a", "b"), "earliest", "latest")
    assert (batch.sub_expression, batch.expression_type, batch.commit_group) == ("*", "TAG", None)
    stream = ReadOptions.parse({**NS, "subscribe": "a"}, streaming=True)
    assert stream.starting == "latest" and stream.topics == ("a",)


def test_offsets_json_is_validated_and_canonical():
    opts = ReadOptions.parse({**NS, "topic": "t", "startingOffsets": '{"t": {"broker-b/1": 5, "broker-a/10": -2}}',
                              "endingOffsets": "LATEST"}, streaming=False)
    assert opts.starting == {"t": {"broker-a/10": -2, "broker-b/1": 5}}
    assert list(opts.starting["t"]) == ["broker-a/10", "broker-b/1"], "sorted, so equal offsets serialise equally"
    assert offsets_from_json(offsets_to_json({mq(3): 7, mq(1): 2})) == {mq(1): 2, mq(3): 7}


@pytest.mark.parametrize("options, message", [
    ({"topic": "t"}, "nameServer"),
    ({**NS}, "topic"),
    ({**NS, "topic": "t", "startingOffsets": "{bad"}, "startingOffsets"),
    ({**NS, "topic": "t", "startingOffsets": '{"t": {"broker-a": 1}}'}, "broker-name/queue-id"),
    ({**NS, "topic": "t", "startingOffsets": '{"t": {"broker-a/0": -3}}'}, "≥ -2"),
    ({**NS, "topic": "t", "startingOffsets": '{"u": {"broker-a/0": 1}}'}, "not read"),
    ({**NS, "topic": "t", "startingOffsets": "latest"}, "reads nothing"),
    ({**NS, "topic": "t", "expressionType": "SQL92"}, "SQL92 subExpression"),
    ({**NS, "topic": "t", "expressionType": "XPATH", "subExpression": "a"}, "TAG or SQL92"),
    ({**NS, "topic": "t", "minPartitions": "0"}, "minPartitions"),
    ({**NS, "topic": "t", "pullBatchSize": "2000"}, "1..1024"),
    ({**NS, "topic": "t", "startingTimestamp": "yesterday"}, "epoch milliseconds"),
    ({**NS, "topic": "t", "maxMessagesPerTrigger": "10"}, "streaming reads only"),
    ({**NS, "topic": "t", "failOnDataLoss": "maybe"}, "true or false"),
    ({**NS, "topic": "t,../etc"}, r"topic \(option topic\) '../etc' contains illegal characters"),
    ({**NS, "topic": "t", "group": "a b"}, r"option group\) 'a b' contains illegal"),
    ({**NS, "topic": "t", "commitGroup": "g" * 300}, r"option commitGroup\) is longer than 255"),
])
def test_bad_batch_options_fail_before_anything_is_sent(options, message):
    with pytest.raises(IllegalArgumentError, match=message):
        ReadOptions.parse(options, streaming=False)


def test_ending_options_are_refused_in_streaming_reads():
    with pytest.raises(IllegalArgumentError, match="batch reads only"):
        ReadOptions.parse({**NS, "topic": "t", "endingOffsets": "latest"}, streaming=True)


def test_plan_ranges_one_partition_per_non_empty_queue():
    opts = ReadOptions.parse({**NS, "topic": "t", "minRowsPerPartition": "1"}, streaming=False)
    ranges = plan_ranges(opts, {mq(0): 0, mq(1): 5, mq(2): 9}, {mq(0): 10, mq(1): 5, mq(2): 12, mq(3): 4},
                         commit_on_read=True)
    assert [(r.queue_id, r.start, r.end, r.commit_on_read) for r in ranges] == [
        (0, 0, 10, True), (2, 9, 12, True), (3, 0, 4, True)]


def test_plan_ranges_packs_small_queues_into_partitions_of_min_rows():
    from rocketmq_sdk.integrations.spark.offsets import RangeGroup

    opts = ReadOptions.parse({**NS, "topic": "t", "minRowsPerPartition": "100"}, streaming=True)
    ends = {mq(0): 60, mq(1): 30, mq(2): 20, mq(3): 500, mq(4): 5}
    parts = plan_ranges(opts, {}, ends)
    shapes = [[(r.queue_id, r.end) for r in p.ranges] if isinstance(p, RangeGroup) else (p.queue_id, p.end)
              for p in parts]
    assert shapes == [[(0, 60), (1, 30), (2, 20)], (3, 500), (4, 5)]
    # the default: a micro-batch of 8 queues x 1,400 messages is one task, a 336,776-message read 8
    default = ReadOptions.parse({**NS, "topic": "t"}, streaming=True)
    assert len(plan_ranges(default, {}, {mq(q): 1_400 for q in range(8)})) == 1
    assert len(plan_ranges(default, {}, {mq(q): 42_097 for q in range(8)})) == 8


def test_plan_ranges_min_partitions_splits_in_proportion_and_commits_last_piece_only():
    opts = ReadOptions.parse({**NS, "topic": "t"}, streaming=False)
    ranges = plan_ranges(opts, {mq(0): 0, mq(1): 0}, {mq(0): 900, mq(1): 100}, 10, commit_on_read=True)
    q0 = [(r.start, r.end) for r in ranges if r.queue_id == 0]
    q1 = [(r.start, r.end) for r in ranges if r.queue_id == 1]
    assert len(q0) == 9 and q0[0] == (0, 100) and q0[-1] == (800, 900)
    assert all(a[1] == b[0] for a, b in zip(q0, q0[1:], strict=False)), "contiguous"
    assert q1 == [(0, 100)]
    assert [r.commit_on_read for r in ranges if r.queue_id == 0] == [False] * 8 + [True]


def test_cap_offsets_spreads_the_budget_by_backlog_exactly():
    start = {mq(0): 0, mq(1): 100, mq(2): 50}
    latest = {mq(0): 300, mq(1): 200, mq(2): 50, mq(3): 7}  # queue 3 is new: counts from 0
    end = cap_offsets(start, latest, 50)
    taken = {q: end[q] - start.get(q, 0) for q in end}
    assert sum(taken.values()) == 50
    assert taken[mq(2)] == 0 and taken[mq(0)] > taken[mq(1)] > taken[mq(3)] >= 0
    assert cap_offsets(start, latest, 10_000) == latest
    assert cap_offsets(start, latest, None) == latest


class FakeQueue:
    """A PullConsumer stand-in over one queue with the given store times (offset = index)."""

    def __init__(self, times: list[int], nearest: int) -> None:
        self.times, self.nearest = times, nearest

    def min_offset(self, q):
        return 0

    def max_offset(self, q):
        return len(self.times)

    def search_offset(self, q, ts):
        return self.nearest

    def pull(self, q, expression, offset, count):
        from rocketmq_sdk import MessageExt

        msgs = [MessageExt(queue_offset=i, store_timestamp=self.times[i])
                for i in range(offset, min(offset + count, len(self.times)))]
        status = PullStatus.FOUND if msgs else PullStatus.NO_NEW_MSG
        return PullResult(status, offset + len(msgs), 0, len(self.times), msgs)


@pytest.mark.parametrize("nearest", [0, 39, 40, 41, 70, 99])
def test_offset_for_timestamp_corrects_the_brokers_nearest_answer(nearest):
    times = [1000] * 40 + [2000] * 60  # offsets 40..99 stored in one millisecond, after the time
    opts = ReadOptions.parse({**NS, "topic": "t"}, streaming=False)
    assert QueueOffsets(FakeQueue(times, nearest), opts).offset_for_timestamp(mq(0), 1500) == 40
    assert QueueOffsets(FakeQueue(times, nearest), opts).offset_for_timestamp(mq(0), 2000) == 40
    assert QueueOffsets(FakeQueue(times, nearest), opts).offset_for_timestamp(mq(0), 2001) == 100
    assert QueueOffsets(FakeQueue(times, nearest), opts).offset_for_timestamp(mq(0), 0) == 0


class FakeTopic:
    """Look-ups of a topic whose queues and max offsets the test changes."""

    def __init__(self, maxima: dict[int, int]) -> None:
        self.maxima = maxima

    def fetch_subscribe_message_queues(self, topic):
        return [mq(q, topic) for q in sorted(self.maxima)]

    def max_offset(self, q):
        return self.maxima[q.queue_id]

    def min_offset(self, q):
        return 3 if q.queue_id == 9 else 0

    def shutdown(self):
        pass


def stream_reader(maxima: dict[int, int], **options):
    from rocketmq_sdk.integrations.spark.stream_reader import RocketMQStreamReader

    reader = RocketMQStreamReader(ReadOptions.parse({**NS, "topic": "t", **options}, streaming=True), None)
    reader._consumer = FakeTopic(maxima)
    return reader


def test_stream_reader_offsets_admission_control_available_now_and_new_queues():
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    topic = FakeTopic({0: 10, 1: 30})
    reader = stream_reader({}, startingOffsets="earliest", maxMessagesPerTrigger="8")
    reader._consumer = topic
    assert reader.getDefaultReadLimit() == ReadMaxRows(8)
    start = reader.initialOffset()
    assert start == {"t": {"broker-a/0": 0, "broker-a/1": 0}}
    assert reader.latestOffset() == {"t": {"broker-a/0": 10, "broker-a/1": 30}}, "PySpark < 4.2 call"
    assert reader.latestOffset(start, ReadMaxRows(8)) == {"t": {"broker-a/0": 2, "broker-a/1": 6}}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"t": {"broker-a/0": 10, "broker-a/1": 30}}

    reader.prepareForTriggerAvailableNow()
    topic.maxima.update({1: 50, 9: 7})  # after the target: more messages and a new queue
    assert reader.latestOffset(start, ReadAllAvailable()) == {"t": {"broker-a/0": 10, "broker-a/1": 30}}

    later = stream_reader({}, startingOffsets="latest", minRowsPerPartition="1")
    later._consumer = topic
    end = later.latestOffset({"t": {"broker-a/0": 10, "broker-a/1": 30}}, ReadAllAvailable())
    assert end == {"t": {"broker-a/0": 10, "broker-a/1": 50, "broker-a/9": 7}}
    ranges = later.partitions({"t": {"broker-a/0": 10, "broker-a/1": 30}}, end)
    assert [(r.queue_id, r.start, r.end, r.commit_on_read) for r in ranges] == [(1, 30, 50, False), (9, 3, 7, False)]


def test_max_messages_per_trigger_needs_admission_control(monkeypatch):
    from rocketmq_sdk.integrations.spark import stream_reader as module

    monkeypatch.setattr(module, "HAS_ADMISSION_CONTROL", False)
    with pytest.raises(IllegalArgumentError, match="needs PySpark 4.2 or later"):
        stream_reader({}, maxMessagesPerTrigger="10")
    stream_reader({})  # without the option: fine
