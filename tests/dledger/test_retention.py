"""DLedger file retention (DLedger 0.3.1.2's CleanSpaceService as the 4.9.8 broker configures it:
files kept ``fileReservedTime`` + 1 hours, deleted at the ``deleteWhen`` hour or at once when the
disk is over ``diskMaxUsedSpaceRatio``): never the file being written, never a file holding an
entry not yet stored on every member, so a member that was down catches up afterwards."""

from __future__ import annotations

import os
import time

import pytest
from rocketmq_broker.store.disk_space import CommitLogCleaner
from rocketmq_sdk import Message, Producer

pytestmark = pytest.mark.timeout(180)

TOPIC = "DLRetention"
BODY = os.urandom(3900)  # incompressible, under the 4 KiB compression threshold: ~250 a 1 MiB file


def age(broker, hours: float) -> None:
    """Make every data file of the broker look last written ``hours`` ago."""
    then = time.time() - hours * 3600
    for mf in broker.dledger.node.ledger.data.files:
        os.utime(mf.path, (then, then))


def on_loop(group, fn):
    async def call():
        return fn()
    return group.run(call())


def send(group, producer, n: int, start: int) -> None:
    for i in range(start, start + n):
        assert producer.send(Message(TOPIC, BODY, keys=f"k{i}")).send_status.name == "SEND_OK"


def test_retention_keeps_unreplicated_files_and_the_lagging_member_catches_up(group):
    master = group.wait_master()
    leader = master.dledger.node
    lagging = next(i for i in group.brokers if i != leader.config.self_id)
    with Producer("dl_retention_pg", namesrv_addr=group.namesrv_addr) as producer:
        send(group, producer, 560, 0)
        group.wait_for(lambda: group.brokers[lagging].dledger.node.ledger.end_index == leader.ledger.end_index, 20,
                       "the member to stop holding the whole log")
        group.stop_broker(lagging)
        send(group, producer, 400, 560)
    ledger = leader.ledger
    files_before = [mf.file_from_offset for mf in ledger.data.files]
    assert len(files_before) >= 4, files_before
    store = master.store
    # young files, or not the delete hour: nothing goes
    assert on_loop(group, lambda: store.delete_expired_files(force=True)) == 0
    age(master, store.config.file_reserved_time + 2)
    not_now = next(h for h in range(24) if str(h).zfill(2) not in store.config.delete_when.split(";"))
    now_ms = int(time.mktime(time.localtime()[:3] + (not_now, 30, 0, 0, 0, -1)) * 1000)
    assert on_loop(group, lambda: store.delete_expired_files(now_ms)) == 0
    # expired and the disk over diskMaxUsedSpaceRatio (the store's periodic cleaner, its disk
    # measure replaced): only the files the stopped member already holds
    mark = leader.peer_status()[lagging]
    limit = ledger.pos_after(mark)
    cleaner = CommitLogCleaner(store, used_ratio=lambda path: store.config.disk_max_used_space_ratio / 100 + 0.01)
    deleted = on_loop(group, cleaner.run_once)
    expected = [f for f in files_before[:-1] if f + ledger.data_file_size <= limit]
    assert deleted == len(expected) >= 1, (deleted, expected, limit, files_before)
    assert [mf.file_from_offset for mf in ledger.data.files] == files_before[len(expected):]
    assert ledger.begin_index <= mark + 1 and ledger.begin_index > 0
    assert ledger.get(ledger.begin_index).pos == files_before[len(expected)]
    cq_min = min(cq.get_min_offset_in_queue() for cq in store.all_consume_queues() if cq.topic == TOPIC)
    assert cq_min > 0, "consume queues still point into deleted files"
    # a member still missing entries of every remaining file: nothing more goes, even forcibly
    assert on_loop(group, lambda: store.delete_expired_files(force=True, clean_at_once=10)) == 0
    # the stopped member comes back and catches up from what is left
    group.start_broker(lagging)
    back = group.brokers[lagging].dledger.node
    group.wait_for(lambda: back.ledger.end_index == ledger.end_index and back.ledger.committed_index
                   == ledger.committed_index, 30, "the restarted member caught up")
    for index in range(mark + 1, ledger.end_index + 1):
        assert back.ledger.get(index).same_as(ledger.get(index))
    # every member replicated: a forced clean may now take all but the file being written
    group.wait_for(lambda: min(leader.peer_status().values()) == ledger.end_index, 20, "every water mark at the end")
    assert on_loop(group, lambda: store.delete_expired_files(force=True)) == len(files_before) - 1 - deleted
    assert len(ledger.data.files) == 1
    print(f"deleted {deleted} of {len(files_before)} files while {lagging} was down (its mark {mark}); "
          f"it caught up to {ledger.end_index}")
