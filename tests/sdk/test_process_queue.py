"""Commit-offset rules of ProcessQueue (docs/protocol.md §7: lowest in flight, else max consumed + 1)."""

from __future__ import annotations

from rocketmq_sdk.consumer import ProcessQueue
from rocketmq_sdk.protocol import MessageExt


def _msgs(*offsets: int) -> list[MessageExt]:
    return [MessageExt(topic="T", queue_offset=o, body=b"x" * 10) for o in offsets]


def test_commit_offset_is_lowest_in_flight_then_max_plus_one():
    pq = ProcessQueue()
    m = _msgs(5, 6, 7, 8)
    assert pq.put_messages(m) == 4 and pq.msg_count == 4 and pq.msg_size == 40
    assert pq.remove_messages([m[2]]) == 5        # 5 still in flight
    assert pq.remove_messages([m[0]]) == 6        # lowest left is 6
    assert pq.remove_messages([m[3]]) == 6
    assert pq.remove_messages([m[1]]) == 9        # drained: max consumed (8) + 1
    assert pq.msg_count == 0 and pq.msg_size == 0


def test_remove_from_an_empty_queue_commits_nothing():
    pq = ProcessQueue()
    assert pq.remove_messages(_msgs(1)) == -1
    pq.put_messages(_msgs(1))
    pq.remove_messages(_msgs(1))
    assert pq.remove_messages(_msgs(1)) == -1


def test_duplicate_or_older_offsets_are_not_cached_twice():
    pq = ProcessQueue()
    pq.put_messages(_msgs(3, 4))
    assert pq.put_messages(_msgs(4, 2, 5)) == 1
    assert pq.msg_count == 3 and pq.min_offset_in_flight() == 3 and pq.queue_offset_max == 5


def test_later_pulls_after_drain_continue_from_the_new_max():
    pq = ProcessQueue()
    first = _msgs(0, 1)
    pq.put_messages(first)
    assert pq.remove_messages(first) == 2
    second = _msgs(2, 3)
    pq.put_messages(second)
    assert pq.remove_messages(second[1:]) == 2
    assert pq.remove_messages(second[:1]) == 4
