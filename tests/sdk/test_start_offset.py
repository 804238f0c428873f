"""Start offset of a newly owned queue (docs/protocol.md §6.5), with stubbed broker answers."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from rocketmq_sdk.consumer.start_offset import compute_start_offset
from rocketmq_sdk.protocol import MessageQueue
from rocketmq_sdk.protocol.bodies import ConsumeFromWhere

MAX, BY_TIME = 500, 300


class _Api:
    def __init__(self) -> None:
        self.searched: list[int] = []

    async def get_max_offset(self, addr, mq):
        return MAX

    async def search_offset(self, addr, mq, ts):
        self.searched.append(ts)
        return BY_TIME


class _Instance:
    def __init__(self) -> None:
        self.api = _Api()

    async def find_broker_master_or_refresh(self, broker_name, topic):
        return "127.0.0.1:10911"


class _Store:
    def __init__(self, stored: int) -> None:
        self.stored = stored

    async def read_offset(self, mq, kind):
        return self.stored


@pytest.mark.parametrize(("where", "stored", "topic", "expected"), [
    ("CONSUME_FROM_LAST_OFFSET", 42, "T", 42),          # a stored offset always wins
    ("CONSUME_FROM_FIRST_OFFSET", 42, "T", 42),
    ("CONSUME_FROM_TIMESTAMP", 42, "T", 42),
    ("CONSUME_FROM_LAST_OFFSET", -1, "T", MAX),         # none: the queue's end
    ("CONSUME_FROM_LAST_OFFSET", -1, "%RETRY%g", 0),    # retry topics start at 0
    ("CONSUME_FROM_FIRST_OFFSET", -1, "T", 0),
    ("CONSUME_FROM_TIMESTAMP", -1, "T", BY_TIME),
    ("CONSUME_FROM_TIMESTAMP", -1, "%RETRY%g", MAX),
    ("CONSUME_FROM_LAST_OFFSET", -2, "T", -1),          # lookup failed: skip the queue for now
    ("CONSUME_FROM_FIRST_OFFSET", -2, "T", -1),
])
def test_compute_start_offset(where, stored, topic, expected):
    inst = _Instance()
    got = asyncio.run(compute_start_offset(MessageQueue(topic, "b", 0), _Store(stored), inst,
                                           consume_from_where=ConsumeFromWhere[where],
                                           consume_timestamp="20260102030405", group="g"))
    assert got == expected
    if expected == BY_TIME and stored == -1:
        assert inst.api.searched == [int(dt.datetime(2026, 1, 2, 3, 4, 5).timestamp() * 1000)]
