"""Batch puts are dispatched in bulk (one consume-queue append, one index pass with the header
written once): the files hold exactly the bytes the record-by-record path writes, including a
roll to a new index file and a consume queue whose file is nearly full."""

from __future__ import annotations

import os

from rocketmq_broker.store.consume_queue import ConsumeQueue
from rocketmq_broker.store.index_file import IndexService
from rocketmq_sdk.protocol.codes import MessageSysFlag


def _records(n: int, start_phy: int = 0):
    out = []
    for i in range(n):
        props = {"UNIQ_KEY": f"7F0000010A2B18B4AAC2{i:012X}", "TAGS": "T"}
        if i % 3 == 0:
            props["KEYS"] = f"order-{i} shared"
        sys_flag = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE if i == 5 else 0
        out.append(("TopicB", start_phy + i * 200, 1_700_000_000_000 + i * 700, sys_flag, props))
    return out


def _files(svc: IndexService) -> list[bytes]:
    return [bytes(f._mm.buf[:]) for f in svc.files]


def test_index_many_writes_the_same_bytes_as_one_by_one(tmp_path):
    one = IndexService(str(tmp_path / "one"), 97, 40)  # 39 entries per file: the batch rolls over
    many = IndexService(str(tmp_path / "many"), 97, 40)
    first, second = _records(30), _records(30, start_phy=6000)
    for recs in (first, second):
        for topic, phy, ts, sys_flag, props in recs:
            one.build_index(topic, phy, ts, sys_flag, props)
        many.build_index_many(recs)
    assert len(one.files) == len(many.files) == 3  # 98 keys, 39 per file
    assert _files(one) == _files(many)
    for key in ("7F0000010A2B18B4AAC2000000000004", "order-3", "shared"):
        assert (one.query_offset("TopicB", key, 64, 0, 2**62).phy_offsets
                == many.query_offset("TopicB", key, 64, 0, 2**62).phy_offsets)
    assert many.query_offset("TopicB", "shared", 64, 0, 2**62).phy_offsets  # found across files
    many.build_index_many(first)  # re-dispatch of indexed offsets is skipped
    assert _files(one) == _files(many)
    one.shutdown()
    many.shutdown()


def test_consume_queue_bulk_append_matches_entry_by_entry(tmp_path):
    file_size = 20 * 50
    one = ConsumeQueue("TopicB", 0, str(tmp_path / "one"), file_size)
    many = ConsumeQueue("TopicB", 0, str(tmp_path / "many"), file_size)
    batches = [[(1000 + 200 * (b * 20 + i), 200, 7, b * 20 + i) for i in range(20)] for b in range(4)]
    for batch in batches:  # 80 entries in files of 50: the third batch crosses a file end
        for e in batch:
            one.put_message_position_info(*e)
        many.put_message_position_infos(batch)
    assert one.get_max_offset_in_queue() == many.get_max_offset_in_queue() == 80
    assert one.max_physic_offset == many.max_physic_offset
    for d in ("one", "many"):
        assert sorted(os.listdir(tmp_path / d / "TopicB" / "0")) == sorted(os.listdir(tmp_path / "one" / "TopicB" / "0"))
    for i in range(80):
        assert one.get_entry(i) == many.get_entry(i)
    one.shutdown()
    many.shutdown()
