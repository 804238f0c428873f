"""SYNC_FLUSH group commit, flush timeout, listeners, concurrent readers, time search."""

from __future__ import annotations

import threading
import time

from rocketmq_broker.store import FlushDiskType, GetMessageStatus, MessageStore, PutMessageStatus
from rocketmq_sdk.protocol.message_codec import decode_messages
from store_helpers import hold_flushes, inner, make_config


def test_sync_flush_group_commit_with_many_threads(tmp_path):
    cfg = make_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=1 << 20,
                      mapped_file_size_consume_queue=20 * 100)
    with MessageStore(cfg) as store:
        statuses = []
        lock = threading.Lock()

        def producer(t):
            for i in range(40):
                r = store.put_message(inner(queue_id=t, body=f"{t}-{i}".encode()))
                assert store.commit_log.flushed_where >= r.append_message_result.wrote_offset + r.append_message_result.wrote_bytes
                with lock:
                    statuses.append(r.put_message_status)

        threads = [threading.Thread(target=producer, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(10)
        assert statuses == [PutMessageStatus.PUT_OK] * 320
        flushes = store._flush_commit_log.flush_count
        assert 1 <= flushes < 320  # one fsync served several writers
        for t in range(8):
            r = store.get_message("g", "TopicA", t, 0, 64)
            assert [m.body for m in decode_messages(r.body())] == [f"{t}-{i}".encode() for i in range(32)]


def test_sync_flush_timeout_reports_flush_disk_timeout(tmp_path):
    cfg = make_config(tmp_path, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=50)
    store = MessageStore(cfg)
    store.start()
    release = hold_flushes(store)
    try:
        r = store.put_message(inner())
        assert r.put_message_status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert r.is_ok()  # stored anyway
        nowait = inner()
        nowait.wait_store_msg_ok = False
        assert store.put_message(nowait).put_message_status is PutMessageStatus.PUT_OK
    finally:
        release.set()
        store.shutdown()


def test_async_flush_flushes_in_background(store):
    r = store.put_message(inner()).append_message_result
    deadline = time.monotonic() + 5
    while store.commit_log.flushed_where < r.wrote_offset + r.wrote_bytes:
        assert time.monotonic() < deadline, "async flush did not happen"
        time.sleep(0.01)


def test_arrival_listener_gets_max_offset(store):
    seen = []
    store.register_arrival_listener(lambda *args: seen.append(args))
    store.register_arrival_listener(lambda *args: 1 / 0)  # a failing listener is isolated
    store.put_message(inner(queue_id=3, tags="TagA"))
    store.put_messages([inner(queue_id=3), inner(queue_id=3)])
    store.put_message(inner(topic="Half", sys_flag=0x4))
    assert [(t, q, off) for t, q, off, _code, _props in seen] == [("TopicA", 3, 1), ("TopicA", 3, 2), ("TopicA", 3, 3)]
    assert seen[0][4]["TAGS"] == "TagA"


def test_readers_concurrent_with_writers(store):
    total = 300
    done = threading.Event()
    got = []
    errors = []

    def reader():
        offset = 0
        deadline = time.monotonic() + 10
        try:
            while len(got) < total and time.monotonic() < deadline:
                r = store.get_message("g", "TopicA", 0, offset, 32)
                if r.status is GetMessageStatus.FOUND:
                    got.extend(m.queue_offset for m in decode_messages(r.body()))
                offset = r.next_begin_offset
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            done.set()

    th = threading.Thread(target=reader)
    th.start()
    for i in range(total):
        store.put_message(inner(body=b"x" * (i % 200 + 1)))
    assert done.wait(10)
    th.join(5)
    assert not errors
    assert got == list(range(total))


def test_offset_by_time(store, monkeypatch):
    import rocketmq_broker.store.commit_log as cl_mod

    clock = {"now": 1000.0}

    class FakeTime:
        @staticmethod
        def time():
            return clock["now"]

    monkeypatch.setattr(cl_mod, "time", FakeTime)
    store.commit_log.last_store_timestamp = 0
    for ts in (1_000_000, 1_000_000, 1_002_000, 1_005_000, 1_009_000):
        clock["now"] = ts / 1000
        store.put_message(inner())
    by_time = store.get_offset_in_queue_by_time
    assert by_time("TopicA", 0, 1_000_000) == 0  # first of equal times
    assert by_time("TopicA", 0, 1_002_000) == 2
    assert by_time("TopicA", 0, 1_003_000) == 2  # nearer to 1_002_000
    assert by_time("TopicA", 0, 1_004_000) == 3  # nearer to 1_005_000
    assert by_time("TopicA", 0, 1_007_000) == 3  # tie → earlier
    assert by_time("TopicA", 0, 10) == 0
    assert by_time("TopicA", 0, 9_999_999) == 4
    assert by_time("Nope", 0, 5) == 0
    assert store.get_earliest_message_time("TopicA", 0) == 1_000_000


def test_delete_topics(store, config):
    import os
    store.put_message(inner(topic="Gone", queue_id=0))
    store.put_message(inner(topic="Gone", queue_id=1))
    assert store.delete_topics(["Gone"]) == 2
    assert not os.path.exists(os.path.join(config.consume_queue_dir, "Gone"))
    assert store.get_message("g", "Gone", 0, 0, 32).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    assert store.put_message(inner(topic="Gone")).append_message_result.logics_offset == 0
