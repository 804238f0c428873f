"""Bytes on disk: docs/protocol.md §4.5 records, end-of-file blanks, 20-digit file names, docs/protocol.md §5.3 entries."""

from __future__ import annotations

import os
import struct

from rocketmq_broker.store import InnerMessage, PutMessageStatus
from rocketmq_sdk.protocol.javahash import java_string_hash
from rocketmq_sdk.protocol.message_codec import decode_messages
from rocketmq_sdk.protocol.msgid import decode_offset_msg_id
from store_helpers import CL_FILE, inner, read_commit_log, read_consume_queue


def test_put_and_read_back_round_trip(store):
    r = store.put_message(inner(body=b"payload-1", tags="TagA", keys="k1 k2"))
    assert r.put_message_status is PutMessageStatus.PUT_OK
    ar = r.append_message_result
    assert (ar.wrote_offset, ar.logics_offset, ar.msg_num) == (0, 0, 1)
    assert decode_offset_msg_id(ar.msg_id) == ("127.0.0.1", 10911, 0)
    rec = store.look_message_by_offset(0)
    assert rec is not None and len(rec) == ar.wrote_bytes
    msg = decode_messages(rec)[0]
    assert (msg.topic, msg.body, msg.tags, msg.keys) == ("TopicA", b"payload-1", "TagA", ["k1", "k2"])
    assert msg.store_timestamp == ar.store_timestamp
    assert msg.born_host == "10.0.0.7:50001" and msg.store_host == "127.0.0.1:10911"
    assert msg.offset_msg_id == ar.msg_id
    assert store.look_message_by_offset(1) is None
    assert store.look_message_by_offset(10**9) is None


def test_records_are_byte_exact_and_files_roll_with_blank_marker(store, config):
    results = []
    for i in range(60):
        r = store.put_message(inner(queue_id=i % 3, body=bytes([65 + i % 26]) * (50 + i), tags=f"t{i % 4}"))
        results.append(r.append_message_result)
    store.commit_log.flush()
    files = read_commit_log(config.store_path_root_dir)
    names = [name for name, _ in files]
    assert names[0] == "00000000000000000000"
    assert names[1] == "00000000000000004096"
    assert all(len(n) == 20 and int(n) == i * CL_FILE for i, n in enumerate(names))
    recs = []
    for idx, (name, items) in enumerate(files):
        assert os.path.getsize(os.path.join(config.commit_log_dir, name)) == CL_FILE
        if idx < len(files) - 1:
            kind, remaining, pos = items[-1]
            assert kind == "BLANK" and remaining == CL_FILE - pos
            items = items[:-1]
        for rec in items:
            assert rec.physical_offset // CL_FILE == idx  # never spans files
            assert rec.physical_offset % CL_FILE + rec.total <= CL_FILE - 8
            recs.append(rec)
    assert len(recs) == 60
    for i, (rec, ar) in enumerate(zip(recs, results, strict=True)):
        assert rec.physical_offset == ar.wrote_offset and rec.total == ar.wrote_bytes
        assert rec.queue_id == i % 3 and rec.queue_offset == i // 3 == ar.logics_offset
        assert rec.store_timestamp == ar.store_timestamp
        assert rec.body == bytes([65 + i % 26]) * (50 + i)
        assert rec.topic == "TopicA" and rec.born_host == "10.0.0.7:50001"
        assert f"TAGS\x01t{i % 4}" in rec.properties
    # consume queue entries (docs/protocol.md §5.3): (commitlog offset, size, tag hash) at N*20
    for qid in range(3):
        entries = read_consume_queue(config.store_path_root_dir, "TopicA", qid)
        expected = [(ar.wrote_offset, ar.wrote_bytes, java_string_hash(f"t{i % 4}"))
                    for i, ar in enumerate(results) if i % 3 == qid]
        assert entries == expected
        assert store.get_max_offset_in_queue("TopicA", qid) == 20
    cq_files = sorted(os.listdir(os.path.join(config.consume_queue_dir, "TopicA", "0")))
    assert cq_files == ["00000000000000000000", "00000000000000000200"]


def test_put_validation(store, config):
    big = store.put_message(inner(body=b"x" * (config.max_message_size + 1)))
    assert big.put_message_status is PutMessageStatus.MESSAGE_ILLEGAL
    too_big_for_file = store.put_message(inner(body=b"x" * CL_FILE))
    assert too_big_for_file.put_message_status is PutMessageStatus.MESSAGE_ILLEGAL
    props = InnerMessage(topic="T", queue_id=0, body=b"b", properties_string="a\x01" + "v" * 40000)
    assert store.put_message(props).put_message_status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    long_topic = InnerMessage(topic="T" * 128, queue_id=0, body=b"b")
    assert store.put_message(long_topic).put_message_status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.get_max_phy_offset() == 0
    store.shutdown()
    assert store.put_message(inner()).put_message_status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert store.get_message("g", "TopicA", 0, 0, 32) is None


def test_transaction_records_offsets(store):
    half = store.put_message(inner(topic="RMQ_SYS_TRANS_HALF_TOPIC", sys_flag=0x4))
    assert half.append_message_result.logics_offset == 0
    assert store.get_max_offset_in_queue("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 0  # not dispatched
    store.put_message(inner(topic="Tx", sys_flag=0x4))
    store.put_message(inner(topic="Tx", sys_flag=0xC))  # rollback: no offset either
    commit = store.put_message(inner(topic="Tx", sys_flag=0x8,
                                     prepared_transaction_offset=half.append_message_result.wrote_offset))
    normal = store.put_message(inner(topic="Tx"))
    assert commit.append_message_result.logics_offset == 0
    assert normal.append_message_result.logics_offset == 1
    assert store.get_max_offset_in_queue("Tx", 0) == 2
    rec = store.look_message_by_offset(commit.append_message_result.wrote_offset)
    assert struct.unpack_from(">q", rec, 20)[0] == 0
    m = decode_messages(rec)[0]
    assert m.prepared_transaction_offset == half.append_message_result.wrote_offset


def test_batch_has_consecutive_offsets_and_one_file(store):
    store.put_message(inner(queue_id=1))
    batch = [inner(queue_id=1, body=f"b{i}".encode()) for i in range(5)]
    r = store.put_messages(batch)
    ar = r.append_message_result
    assert r.put_message_status is PutMessageStatus.PUT_OK
    assert (ar.logics_offset, ar.msg_num) == (1, 5)
    ids = ar.msg_id.split(",")
    assert len(ids) == 5
    offsets = [decode_offset_msg_id(i)[2] for i in ids]
    assert offsets[0] == ar.wrote_offset
    assert offsets[-1] // CL_FILE == offsets[0] // CL_FILE
    got = store.get_message("g", "TopicA", 1, 1, 32)
    msgs = decode_messages(got.body())
    assert [m.queue_offset for m in msgs] == [1, 2, 3, 4, 5]
    assert [m.body for m in msgs] == [f"b{i}".encode() for i in range(5)]
    assert sum(len(b) for b in got.message_buffers) == ar.wrote_bytes
    assert store.put_messages([inner(sys_flag=0x4)]).put_message_status is PutMessageStatus.MESSAGE_ILLEGAL


def test_batch_rolls_whole_to_next_file(store):
    store.put_message(inner(body=b"x" * 3700))
    r = store.put_messages([inner(body=b"y" * 100) for _ in range(3)])
    assert r.append_message_result.wrote_offset == CL_FILE


def test_queue_first_written_at_nonzero_offset_is_prefilled_with_blanks(store, config):
    store.commit_log.topic_queue_table[("TopicA", 0)] = 3
    r = store.put_message(inner()).append_message_result
    store.shutdown()
    entries = read_consume_queue(config.store_path_root_dir, "TopicA", 0)
    assert entries == [(0, 0x7FFFFFFF, 0)] * 3 + [(r.wrote_offset, r.wrote_bytes, 0)]
