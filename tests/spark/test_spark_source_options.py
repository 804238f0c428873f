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
])
def test_bad_batch_options_fail_before_anything_is_sent(options, message):
    with pytest.raises(IllegalArgumentError, match=message):
        ReadOptions.parse(options, streaming=False)


def test_ending_options_are_refused_in_streaming_reads():
    with pytest.raises(IllegalArgumentError, match="batch reads only"):
        ReadOptions.parse({**NS, "topic": "t", "endingOffsets": "latest"}, streaming=True)


def test_plan_ranges_one_partition_per_non_empty_queue():
    opts = ReadOptions.parse({**NS, "topic": "t"}, streaming=False)
    ranges = plan_ranges(opts, {mq(0): 0, mq(1): 5, mq(2): 9}, {mq(0): 10, mq(1): 5, mq(2): 12, mq(3): 4},
                         commit_on_read=True)
    assert [(r.queue_id, r.start, r.end, r.commit_on_read) for r in ranges] == [
        (0, 0, 10, True), (2, 9, 12, True), (3, 0, 4, True)]


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
