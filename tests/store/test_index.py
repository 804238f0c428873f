"""IndexFile (docs/protocol.md §5.4): on-disk layout, lookups by key and UNIQ_KEY, rolling, restart."""

from __future__ import annotations

import os
import struct
import time

from rocketmq_broker.store import MessageStore
from rocketmq_broker.store.index_file import IndexFile, index_key_hash
from rocketmq_sdk.protocol.javahash import java_string_hash
from rocketmq_sdk.protocol.message_codec import decode_messages
from store_helpers import inner, make_config, simulate_crash


def keyed(i, topic="TopicA"):
    m = inner(topic=topic, body=f"b{i}".encode(), keys=[f"order-{i}", "common"])
    m.get_properties()["UNIQ_KEY"] = f"UNIQ{i:04d}"
    m.properties_string += f"\x02UNIQ_KEY\x01UNIQ{i:04d}"
    return m


def test_key_hash_is_abs_java_hash():
    assert index_key_hash("TopicA#k") == abs(java_string_hash("TopicA#k"))
    assert index_key_hash("TopicA#k") >= 0


def test_query_by_key_and_uniq_key(store):
    offsets = [store.put_message(keyed(i)).append_message_result.wrote_offset for i in range(10)]
    last = store.put_message(keyed(99, topic="Other")).append_message_result.wrote_offset
    r = store.query_message("TopicA", "order-3", 32)
    assert [m.body for m in decode_messages(r.body())] == [b"b3"]
    r = store.query_message("TopicA", "UNIQ0007", 32)
    assert [m.body for m in decode_messages(r.body())] == [b"b7"]
    r = store.query_message("TopicA", "common", 32)
    assert [m.commit_log_offset for m in decode_messages(r.body())] == offsets[::-1]  # newest first
    assert len(store.query_message("TopicA", "common", 4).message_buffers) == 4
    assert store.query_message("TopicA", "nope", 32).message_buffers == []
    assert [m.topic for m in decode_messages(store.query_message("Other", "common", 32).body())] == ["Other"]
    assert r.index_last_update_phyoffset == last
    future = store.query_message("TopicA", "common", 32, begin=r.index_last_update_timestamp + 10_000)
    assert future.message_buffers == []


def test_index_file_layout_on_disk(store, config):
    store.put_message(keyed(1))
    store.shutdown()
    names = os.listdir(config.index_dir)
    assert len(names) == 1 and len(names[0]) == 17 and names[0].isdigit()
    data = open(os.path.join(config.index_dir, names[0]), "rb").read()
    assert len(data) == 40 + 64 * 4 + 256 * 20
    begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count = struct.unpack_from(">qqqqii", data)
    assert (begin_phy, end_phy, index_count) == (0, 0, 4)  # UNIQ_KEY + 2 keys, entry 0 unused
    assert begin_ts == end_ts > 0
    key = "TopicA#order-1"
    h = abs(java_string_hash(key))
    slot = struct.unpack_from(">i", data, 40 + (h % 64) * 4)[0]
    assert 1 <= slot <= 3
    kh, phy, diff, prev = struct.unpack_from(">iqii", data, 40 + 64 * 4 + slot * 20)
    assert (kh, phy, diff) == (h, 0, 0)


def test_index_rolls_to_new_file_when_full(tmp_path):
    cfg = make_config(tmp_path, max_index_num=8)
    with MessageStore(cfg) as store:
        for i in range(10):
            store.put_message(keyed(i))
        assert len(os.listdir(cfg.index_dir)) >= 3
        assert [m.body for m in decode_messages(store.query_message("TopicA", "order-0", 32).body())] == [b"b0"]
        assert len(store.query_message("TopicA", "common", 64).message_buffers) == 10


def test_index_survives_restart_and_crash(config):
    with MessageStore(config) as s:
        for i in range(5):
            s.put_message(keyed(i))
    with MessageStore(config) as s:
        assert len(s.query_message("TopicA", "common", 32).message_buffers) == 5
        s.put_message(keyed(5))
    s = MessageStore(config)
    s.start()
    s.put_message(keyed(6))
    simulate_crash(s)
    with MessageStore(config) as s:
        bodies = sorted(m.body for m in decode_messages(s.query_message("TopicA", "common", 32).body()))
        assert bodies == [f"b{i}".encode() for i in range(7)]


def test_index_file_direct_chain():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        f = IndexFile(os.path.join(d, "20260101000000000"), 4, 16)
        for i in range(10):
            assert f.put_key(f"k{i % 3}", i * 100, 1_000_000 + i * 1000)
        assert f.select_phy_offset("k1", 10, 0, 2**62) == [700, 400, 100]
        assert f.select_phy_offset("k1", 10, 1_005_000, 2**62) == [700]
        f.close()


def test_a_busy_index_is_flushed_once_quiet_or_after_the_longest_interval(tmp_path, monkeypatch):
    """The periodic flush leaves the index files alone while entries keep coming (a flush
    write-protects their pages: each later key would fault), flushes them and records
    ``indexMsgTimestamp`` in the first round that finds none added since the previous one, and
    under steady traffic once ``INDEX_FLUSH_MAX_INTERVAL_S`` has passed; flush_all() always."""
    from rocketmq_broker.store import flush as flush_mod
    with MessageStore(make_config(tmp_path, flush_interval_consume_queue=600_000)) as s:  # rounds by hand
        svc, ck, index = s._flush_consume_queue, s.checkpoint, s.index_service
        flushed = []
        monkeypatch.setattr(index, "flush", lambda: flushed.append(index.progress()))
        ck.index_msg_timestamp = 0
        for i in range(3):  # a key per round: busy
            s.put_message(keyed(i))
            svc.flush_round()
        assert flushed == [] and ck.index_msg_timestamp == 0
        assert ck.logics_msg_timestamp == s.commit_log.last_store_timestamp  # the queues' every round
        svc.flush_round()  # quiet since the previous round
        assert flushed == [index.progress()] and ck.index_msg_timestamp == s.commit_log.last_store_timestamp
        svc.flush_round()  # nothing new since that flush
        assert len(flushed) == 1
        monkeypatch.setattr(flush_mod, "INDEX_FLUSH_MAX_INTERVAL_S", 0.0)
        s.put_message(keyed(3))
        svc.flush_round()  # busy, but the longest interval has passed
        assert flushed[-1] == index.progress() and len(flushed) == 2
        svc.flush_all()
        assert len(flushed) == 3


def test_a_quiet_index_is_checkpointed_and_kept_through_a_crash(tmp_path):
    """Two flush rounds after the last key the index is on disk and checkpointed: a crash then
    keeps its file (no re-dispatch needed to find the keys)."""
    config = make_config(tmp_path)  # a flush round every 50 ms
    s = MessageStore(config)
    s.start()
    for i in range(5):
        s.put_message(keyed(i))
    deadline = time.monotonic() + 10
    while s.checkpoint.index_msg_timestamp < s.commit_log.last_store_timestamp:
        assert time.monotonic() < deadline, "the quiet index was not checkpointed"
        time.sleep(0.01)
    files = sorted(os.listdir(config.index_dir))
    entries = s.index_service.files[-1].index_count
    assert entries == 1 + 5 * 3  # UNIQ_KEY, order-i and common per message
    simulate_crash(s)
    with MessageStore(config) as s:
        assert sorted(os.listdir(config.index_dir)) == files  # kept (a dropped file is made anew)
        assert s.index_service.files[-1].index_count >= entries
        bodies = {m.body for m in decode_messages(s.query_message("TopicA", "common", 32).body())}
        assert bodies == {f"b{i}".encode() for i in range(5)}
