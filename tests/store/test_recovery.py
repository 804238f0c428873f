"""Restart after a clean shutdown and after a crash (``abort`` left behind)."""

from __future__ import annotations

import os
import shutil
import struct

import pytest
from rocketmq_broker.store import GetMessageStatus, MessageStore, StoreError
from rocketmq_sdk.protocol.message_codec import decode_messages
from store_helpers import CL_FILE, inner, read_consume_queue, simulate_crash


def put_many(store, n, start=0):
    return [store.put_message(inner(queue_id=i % 2, body=f"msg-{i}".encode() * 8, tags=f"t{i % 3}")).append_message_result
            for i in range(start, start + n)]


def bodies(store, queue_id, offset=0):
    out = []
    while True:
        r = store.get_message("g", "TopicA", queue_id, offset, 32)
        if r.status is not GetMessageStatus.FOUND:
            return out
        out += [m.body for m in decode_messages(r.body())]
        offset = r.next_begin_offset


def test_normal_restart_keeps_everything(config):
    with MessageStore(config) as s:
        results = put_many(s, 50)
        end = s.get_max_phy_offset()
    assert not os.path.exists(config.abort_path)
    with MessageStore(config) as s:
        assert s.last_exit_ok
        assert s.get_max_phy_offset() == end
        assert bodies(s, 0) == [f"msg-{i}".encode() * 8 for i in range(0, 50, 2)]
        assert s.get_max_offset_in_queue("TopicA", 1) == 25
        more = put_many(s, 2, start=50)
        assert more[0].wrote_offset in (end, end + CL_FILE - end % CL_FILE)  # maybe rolled
        assert [r.logics_offset for r in more] == [25, 25]
        assert os.path.exists(config.abort_path)
    assert results[-1].logics_offset == 24


def test_second_store_on_same_directory_is_refused(store, config):
    with pytest.raises(StoreError, match="locked"):
        MessageStore(config).start()


def test_abnormal_recovery_truncates_torn_tail_and_rebuilds_consume_queues(config):
    s = MessageStore(config)
    s.start()
    put_many(s, 30)
    end = s.get_max_phy_offset()
    last_file = s.commit_log.mapped_file_queue.last_mapped_file().path
    simulate_crash(s)
    # a torn record after the last good one: valid header, truncated body, then garbage
    rec = bytes(inner(body=b"Q" * 200).body)
    head = struct.pack(">ii", 400, -626843481) + b"\x01" * 40
    with open(last_file, "r+b") as f:
        f.seek(end % CL_FILE)
        f.write(head + rec[:50] + os.urandom(100))
    shutil.rmtree(config.consume_queue_dir)  # consume queues lost too
    s2 = MessageStore(config)
    s2.start()
    try:
        assert not s2.last_exit_ok
        assert s2.get_max_phy_offset() == end
        assert bodies(s2, 0) == [f"msg-{i}".encode() * 8 for i in range(0, 30, 2)]
        assert bodies(s2, 1) == [f"msg-{i}".encode() * 8 for i in range(1, 30, 2)]
        r = s2.put_message(inner(queue_id=0, body=b"after"))
        assert r.append_message_result.wrote_offset == end
        assert r.append_message_result.logics_offset == 15
        with open(last_file, "rb") as f:  # the garbage after the new record was zeroed
            f.seek(end % CL_FILE + r.append_message_result.wrote_bytes)
            assert f.read(64) == bytes(64)
    finally:
        s2.shutdown()
    with MessageStore(config) as s3:
        assert s3.last_exit_ok and bodies(s3, 0)[-1] == b"after"


def test_abnormal_recovery_stops_at_crc_mismatch_and_drops_dirty_cq_entries(config):
    s = MessageStore(config)
    s.start()
    results = put_many(s, 20)
    simulate_crash(s)
    bad = results[-3]  # corrupt the body of the third-last record
    path = os.path.join(config.commit_log_dir, f"{bad.wrote_offset - bad.wrote_offset % CL_FILE:020d}")
    with open(path, "r+b") as f:
        f.seek(bad.wrote_offset % CL_FILE + 88 + 2)  # inside the body
        f.write(b"#")
    s2 = MessageStore(config)
    s2.start()
    try:
        assert s2.get_max_phy_offset() == bad.wrote_offset
        assert s2.get_max_offset_in_queue("TopicA", 0) + s2.get_max_offset_in_queue("TopicA", 1) == 17
        assert bodies(s2, 1)[-1] == b"msg-15" * 8
        entries = read_consume_queue(config.store_path_root_dir, "TopicA", 0)
        assert all(off < bad.wrote_offset for off, _, _ in entries)
    finally:
        s2.shutdown()


def test_normal_restart_rebuilds_missing_consume_queues(config):
    with MessageStore(config) as s:
        put_many(s, 24)
    shutil.rmtree(config.consume_queue_dir)  # re-dispatch starts after the highest indexed record
    with MessageStore(config) as s:
        assert bodies(s, 1) == [f"msg-{i}".encode() * 8 for i in range(1, 24, 2)]
        assert s.put_message(inner(queue_id=1)).append_message_result.logics_offset == 12


def test_checkpoint_records_flushed_store_times(config):
    with MessageStore(config) as s:
        last = put_many(s, 3)[-1]
    with open(config.checkpoint_path, "rb") as f:
        data = f.read()
    assert len(data) == 4096
    physic, logics, _index = struct.unpack_from(">qqq", data)
    assert physic == logics == last.store_timestamp


def test_empty_commit_log_drops_stale_consume_queues(config):
    with MessageStore(config) as s:
        put_many(s, 4)
    shutil.rmtree(config.commit_log_dir)
    with MessageStore(config) as s:
        assert s.get_max_offset_in_queue("TopicA", 0) == 0
        r = s.put_message(inner())
        assert (r.append_message_result.wrote_offset, r.append_message_result.logics_offset) == (0, 0)


def test_schedule_topic_deliver_times_count_from_the_store_time_and_survive_recovery(config):
    """A delayed message's consume-queue tag code is its deliver time: the record's store time plus
    its level's delay (Java computes it so at dispatch). The put path and a rebuild from the commit
    log (recovery, or a slave's dispatch) must write the same entry (regression: the put path used
    the broker's clock before the store time was taken, 1 ms apart now and then, so a slave's
    queue differed from its master's)."""
    from rocketmq_broker.store.commit_log import SCHEDULE_TOPIC
    from rocketmq_broker.store.inner_message import InnerMessage
    from rocketmq_sdk import Message

    s = MessageStore(config)
    s.start()
    stamps = []
    for i in range(5):
        m = InnerMessage.from_message(Message("Orders", b"later-%d" % i, delay_time_level=3), 2,
                                      born_host="10.0.0.7:50001", store_host="127.0.0.1:10911")
        m.topic, m.tags_code = SCHEDULE_TOPIC, 1  # as the schedule service's transform hands it over (queue = level - 1)
        r = s.put_message(m)
        stamps.append(s.commit_log.get_store_timestamp(r.append_message_result.wrote_offset))
    put_entries = read_consume_queue(config.store_path_root_dir, SCHEDULE_TOPIC, 2)
    assert [tags for _, _, tags in put_entries] == [ts + 10_000 for ts in stamps]  # level 3 = 10 s
    simulate_crash(s)
    shutil.rmtree(config.consume_queue_dir)
    with MessageStore(config) as s2:
        assert not s2.last_exit_ok
    assert read_consume_queue(config.store_path_root_dir, SCHEDULE_TOPIC, 2) == put_entries
