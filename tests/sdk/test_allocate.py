"""Allocation must equal Java's for the same sorted inputs (docs/protocol.md §6.1), or groups that
mix Java and Python consumers double-consume some queues and skip others."""

from __future__ import annotations

import pytest
from rocketmq_sdk.consumer import AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.protocol import MessageQueue


def _mqs(n: int, brokers: tuple[str, ...] = ("broker-a",)) -> list[MessageQueue]:
    per = -(-n // len(brokers))
    out = [MessageQueue("T", b, q) for b in brokers for q in range(per)][:n]
    return sorted(out)


def _cids(c: int) -> list[str]:
    return sorted(f"10.0.0.{i}@{1000 + i}#DEFAULT" for i in range(c))


def reference_averagely(index: int, n: int, c: int) -> list[int]:
    """The doc's formula, transcribed literally (Java integer division), returning positions."""
    mod = n % c
    if n <= c:
        avg = 1
    elif mod > 0 and index < mod:
        avg = n // c + 1
    else:
        avg = n // c
    start = index * avg if (mod > 0 and index < mod) else index * avg + mod
    rng = min(avg, n - start)
    return [(start + i) % n for i in range(rng)] if rng > 0 else []


GRID = [(n, c) for n in range(1, 17) for c in range(1, 11)]


@pytest.mark.parametrize(("n", "c"), GRID)
def test_averagely_equals_the_java_formula_and_partitions_the_queues(n, c):
    mqs, cids = _mqs(n, ("broker-a", "broker-b")), _cids(c)
    strategy = AllocateMessageQueueAveragely()
    seen: list[MessageQueue] = []
    for index, cid in enumerate(cids):
        got = strategy.allocate("g", cid, mqs, cids)
        assert got == [mqs[p] for p in reference_averagely(index, n, c)]
        seen.extend(got)
    assert sorted(seen) == mqs  # every queue exactly once (when n >= c; extra consumers get none)


@pytest.mark.parametrize(("n", "c", "expected"), [
    (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),   # mod 2: the first two get 3
    (4, 4, [[0], [1], [2], [3]]),
    (3, 5, [[0], [1], [2], [], []]),          # more consumers than queues: the last two idle
    (10, 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),
    (5, 2, [[0, 1, 2], [3, 4]]),
])
def test_averagely_hand_checked(n, c, expected):
    mqs, cids = _mqs(n), _cids(c)
    got = [[mq.queue_id for mq in AllocateMessageQueueAveragely().allocate("g", cid, mqs, cids)] for cid in cids]
    assert got == expected


def test_averagely_sorted_inputs_mix_brokers_in_java_order():
    mqs = _mqs(4, ("broker-b", "broker-a"))  # sorted: broker-a 0,1 then broker-b 0,1
    cids = _cids(2)
    first = AllocateMessageQueueAveragely().allocate("g", cids[0], mqs, cids)
    assert [(m.broker_name, m.queue_id) for m in first] == [("broker-a", 0), ("broker-a", 1)]


def test_unknown_consumer_gets_nothing_and_empty_cid_is_refused():
    mqs, cids = _mqs(4), _cids(2)
    assert AllocateMessageQueueAveragely().allocate("g", "stranger@1", mqs, cids) == []
    with pytest.raises(IllegalArgumentError):
        AllocateMessageQueueAveragely().allocate("g", "", mqs, cids)


@pytest.mark.parametrize(("n", "c"), [(8, 3), (5, 5), (2, 4), (16, 7)])
def test_by_circle_takes_every_cth_queue(n, c):
    mqs, cids = _mqs(n), _cids(c)
    for index, cid in enumerate(cids):
        got = AllocateMessageQueueAveragelyByCircle().allocate("g", cid, mqs, cids)
        assert got == [mqs[i] for i in range(index, n, c)]
