"""Every allocation strategy must give the Java client's assignment for the same sorted inputs
(docs/protocol.md §6.1), or groups mixing Java/C++/Go and Python consumers overlap or leave gaps.

The reference functions below are independent transcriptions of the docs/protocol.md §6.1 table (not the
SDK code): Java integer arithmetic, ``TreeMap`` ring lookup done by a linear scan, Java
``String.split`` done by a regular expression. The grid covers 1..16 queues spread over 1..3
brokers and 1..8 consumers; each strategy's per-consumer result is compared with the reference,
and partitioning strategies must cover every eligible queue exactly once.
"""

from __future__ import annotations

import hashlib
import re

import pytest
from rocketmq_sdk.consumer import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    MachineRoomResolver,
)
from rocketmq_sdk.consumer.allocate import java_split, md5_hash
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.protocol import MessageQueue

BROKER_SETS = [("broker-a",), ("broker-a", "broker-b"), ("broker-a", "broker-b", "broker-c")]
GRID = [(n, brokers, c) for n in range(1, 17) for brokers in BROKER_SETS for c in range(1, 9)]


def make_mqs(n: int, brokers: tuple[str, ...], topic: str = "TopicT") -> list[MessageQueue]:
    """n queues spread round robin over the brokers, sorted as Java sorts them."""
    return sorted(MessageQueue(topic, brokers[i % len(brokers)], i // len(brokers)) for i in range(n))


def make_cids(c: int) -> list[str]:
    return sorted(f"192.168.0.{10 + i}@{4000 + 7 * i}#{93817213849 + i}" for i in range(c))


# ------------------------------------------------------------------ references from docs/protocol.md §6.1


def ref_avg(index: int, n: int, c: int) -> list[int]:
    mod = n % c
    avg = 1 if n <= c else (n // c + 1 if mod > 0 and index < mod else n // c)
    start = index * avg if mod > 0 and index < mod else index * avg + mod
    rng = min(avg, n - start)
    return [(start + i) % n for i in range(max(rng, 0))]


def ref_circle(index: int, n: int, c: int) -> list[int]:
    return [i for i in range(index, n) if i % c == index]


def ref_md5(key: str) -> int:
    d = hashlib.md5(key.encode()).digest()
    h = 0
    for b in d[:4]:
        h = (h << 8) | b
    return h


def ref_consistent_hash(cids: list[str], mqs: list[MessageQueue], current: str, vnodes: int = 10) -> list[MessageQueue]:
    ring: list[tuple[int, str]] = []
    for cid in cids:
        for i in range(vnodes):
            h = ref_md5(cid + "-" + str(i))
            ring = [(k, v) for k, v in ring if k != h] + [(h, cid)]  # later insert wins
    ring.sort()
    out = []
    for mq in mqs:
        key = f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"
        h = ref_md5(key)
        owner = next((v for k, v in ring if k >= h), ring[0][1])
        if owner == current:
            out.append(mq)
    return out


def ref_split(s: str) -> list[str]:
    return re.sub(r"@+$", "", s).split("@")  # Java drops trailing empty strings


def ref_machine_room(kept_all: list[MessageQueue], idcs: set[str], index: int, c: int) -> list[MessageQueue]:
    kept = [mq for mq in kept_all if len(ref_split(mq.broker_name)) == 2 and ref_split(mq.broker_name)[0] in idcs]
    p = len(kept)
    mod, rem = p // c, p % c
    out = [kept[i] for i in range(index * mod, index * mod + mod)]
    if rem > index:
        out.append(kept[index + mod * c])
    return out


# ------------------------------------------------------------------ grids


@pytest.mark.parametrize(("n", "brokers", "c"), GRID)
def test_averagely_and_by_circle_equal_java_and_partition(n, brokers, c):
    mqs, cids = make_mqs(n, brokers), make_cids(c)
    for strategy, ref in ((AllocateMessageQueueAveragely(), ref_avg), (AllocateMessageQueueAveragelyByCircle(), ref_circle)):
        union: list[MessageQueue] = []
        for index, cid in enumerate(cids):
            got = strategy.allocate("g", cid, mqs, cids)
            assert got == [mqs[i] for i in ref(index, n, c)], (strategy.name, n, brokers, c, index)
            union.extend(got)
        assert sorted(union) == mqs


@pytest.mark.parametrize(("n", "brokers", "c"), GRID)
def test_consistent_hash_equals_java_and_partitions(n, brokers, c):
    mqs, cids = make_mqs(n, brokers), make_cids(c)
    strategy = AllocateMessageQueueConsistentHash()
    union: list[MessageQueue] = []
    for cid in cids:
        got = strategy.allocate("g", cid, mqs, cids)
        assert got == ref_consistent_hash(cids, mqs, cid)
        union.extend(got)
    assert sorted(union) == mqs


@pytest.mark.parametrize(("n", "brokers", "c"), GRID)
def test_by_machine_room_equals_java(n, brokers, c):
    rooms = ["hz", "sh", "bj"]
    names = tuple(f"{rooms[i]}@{b}" for i, b in enumerate(brokers))
    mqs, cids = make_mqs(n, names), make_cids(c)
    idcs = {"hz", "sh"}
    strategy = AllocateMessageQueueByMachineRoom(idcs)
    union: list[MessageQueue] = []
    for index, cid in enumerate(cids):
        got = strategy.allocate("g", cid, mqs, cids)
        assert got == ref_machine_room(mqs, idcs, index, c)
        union.extend(got)
    assert sorted(union) == [mq for mq in mqs if mq.broker_name.split("@")[0] in idcs]


class RoomByPrefix(MachineRoomResolver):
    """Broker ``<room>-broker-x`` lives in ``<room>``; consumer ids carry their room after ``#``."""

    def broker_deploy_in(self, mq):
        return mq.broker_name.split("-")[0]

    def consumer_deploy_in(self, client_id):
        return client_id.rsplit("#", 1)[1]


def ref_nearby(mqs, cids, current, inner_ref):
    res = RoomByPrefix()
    room_mqs, room_cids = {}, {}
    for mq in mqs:
        room_mqs.setdefault(res.broker_deploy_in(mq), []).append(mq)
    for cid in cids:
        room_cids.setdefault(res.consumer_deploy_in(cid), []).append(cid)
    mine = res.consumer_deploy_in(current)
    out = []
    if room_mqs.get(mine):
        out += inner_ref(room_mqs[mine], room_cids[mine], current)
    for room in sorted(r for r in room_mqs if r != mine):
        if room not in room_cids:
            out += inner_ref(room_mqs[room], cids, current)
    return out


def _avg_ref_mq(mqs, cids, current):
    if current not in cids:
        return []
    return [mqs[i] for i in ref_avg(cids.index(current), len(mqs), len(cids))]


@pytest.mark.parametrize(("n", "brokers", "c"), GRID)
def test_machine_room_nearby_equals_java_and_partitions(n, brokers, c):
    rooms = ["hz", "sh", "bj"]
    names = tuple(f"{rooms[i]}-{b}" for i, b in enumerate(brokers))
    mqs = make_mqs(n, names)
    # consumers live in hz and sh only: bj queues (3 brokers) are shared by everyone
    cids = sorted(f"10.0.0.{i}@{i}#{rooms[i % 2]}" for i in range(c))
    strategy = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), RoomByPrefix())
    assert strategy.name == "MACHINE_ROOM_NEARBY-AVG"
    union: list[MessageQueue] = []
    for cid in cids:
        got = strategy.allocate("g", cid, mqs, cids)
        assert got == ref_nearby(mqs, cids, cid, _avg_ref_mq)
        union.extend(got)
    # queues of a room with consumers are split among those; rooms without any, among all
    assert sorted(union) == mqs


# ------------------------------------------------------------------ pinned values and edges


def test_md5_hash_is_java_md5hash():
    assert md5_hash("") == 0xD41D8CD9
    assert md5_hash("abc") == 0x90015098
    assert md5_hash("10.0.0.1@1#DEFAULT-0") == ref_md5("10.0.0.1@1#DEFAULT-0")


def test_consistent_hash_hand_checked_owner():
    mq = MessageQueue("T", "b", 0)
    cids = ["a", "b"]
    ring = sorted((ref_md5(f"{c}-{i}"), c) for c in cids for i in range(10))
    h = ref_md5("MessageQueue [topic=T, brokerName=b, queueId=0]")
    owner = next((c for k, c in ring if k >= h), ring[0][1])
    got = {c: AllocateMessageQueueConsistentHash().allocate("g", c, [mq], cids) for c in cids}
    assert got[owner] == [mq] and got[({"a", "b"} - {owner}).pop()] == []


def test_consistent_hash_stays_stable_when_a_consumer_joins():
    mqs, cids = make_mqs(16, ("broker-a", "broker-b")), make_cids(4)
    s = AllocateMessageQueueConsistentHash()
    before = {mq: cid for cid in cids for mq in s.allocate("g", cid, mqs, cids)}
    more = sorted([*cids, "192.168.9.9@1#1"])
    after = {mq: cid for cid in more for mq in s.allocate("g", cid, mqs, more)}
    moved = [mq for mq in mqs if before[mq] != after[mq]]
    assert all(after[mq] == "192.168.9.9@1#1" for mq in moved)  # only the newcomer gains queues


def test_by_config_returns_the_configured_queues_unchecked():
    mine = [MessageQueue("T", "b", 3), MessageQueue("Other", "x", 0)]
    s = AllocateMessageQueueByConfig(mine)
    assert s.name == "CONFIG"
    assert s.allocate("g", "nobody", [], []) == mine


def test_java_split_drops_trailing_empty_parts():
    for s in ("a@b", "a@", "@b", "a@b@c", "", "a@@", "a"):
        assert java_split(s, "@") == ref_split(s), s
    assert java_split("hz@", "@") == ["hz"]


def test_machine_room_ignores_unqualified_broker_names():
    mqs = sorted([MessageQueue("T", "hz@a", 0), MessageQueue("T", "hz@", 1), MessageQueue("T", "plain", 0),
                  MessageQueue("T", "hz@a@b", 0), MessageQueue("T", "sh@a", 0)])
    got = AllocateMessageQueueByMachineRoom({"hz"}).allocate("g", "c1", mqs, ["c1"])
    assert got == [MessageQueue("T", "hz@a", 0)]


def test_nearby_requires_rooms_and_arguments():
    with pytest.raises(IllegalArgumentError):
        AllocateMachineRoomNearby(None, RoomByPrefix())  # type: ignore[arg-type]

    class NoRoom(RoomByPrefix):
        def broker_deploy_in(self, mq):
            return ""

    s = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), NoRoom())
    with pytest.raises(IllegalArgumentError, match="Machine room is null"):
        s.allocate("g", "x#hz", [MessageQueue("T", "hz-a", 0)], ["x#hz"])


@pytest.mark.parametrize("strategy", [AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle(),
                                      AllocateMessageQueueConsistentHash(), AllocateMessageQueueByMachineRoom({"hz"})])
def test_a_consumer_not_in_the_group_gets_nothing(strategy):
    assert strategy.allocate("g", "stranger", make_mqs(4, ("hz@a",)), make_cids(2)) == []
    with pytest.raises(IllegalArgumentError):
        strategy.allocate("g", "", make_mqs(4, ("hz@a",)), make_cids(2))
