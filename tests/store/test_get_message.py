"""``get_message`` follows docs/protocol.md §3.4 step 3, case by case."""

from __future__ import annotations

from rocketmq_broker.store import GetMessageStatus as S
from rocketmq_sdk.protocol.javahash import java_string_hash
from rocketmq_sdk.protocol.message_codec import decode_messages
from store_helpers import inner


def fill(store, n, topic="TopicA", queue_id=0, **kw):
    return [store.put_message(inner(topic=topic, queue_id=queue_id, body=f"m{i}".encode(), **kw))
            for i in range(n)]


def test_no_matched_logic_queue(store):
    r = store.get_message("g", "Nope", 0, 5, 32)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset, r.message_count) == (
        S.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0, 0)


def test_no_message_in_queue(store):
    store.find_consume_queue("Empty", 0)  # exists, nothing written
    r = store.get_message("g", "Empty", 0, 3, 32)
    assert (r.status, r.next_begin_offset, r.max_offset) == (S.NO_MESSAGE_IN_QUEUE, 0, 0)


def test_offset_too_small(store):
    store.commit_log.topic_queue_table[("TopicA", 0)] = 5  # queue first written at offset 5
    fill(store, 3)
    assert store.get_min_offset_in_queue("TopicA", 0) == 5
    assert store.get_max_offset_in_queue("TopicA", 0) == 8
    r = store.get_message("g", "TopicA", 0, 2, 32)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (S.OFFSET_TOO_SMALL, 5, 5, 8)
    r = store.get_message("g", "TopicA", 0, 5, 32)
    assert r.status is S.FOUND and [m.body for m in decode_messages(r.body())] == [b"m0", b"m1", b"m2"]


def test_offset_overflow_one_and_badly(store):
    fill(store, 4)
    r = store.get_message("g", "TopicA", 0, 4, 32)
    assert (r.status, r.next_begin_offset, r.max_offset) == (S.OFFSET_OVERFLOW_ONE, 4, 4)
    r = store.get_message("g", "TopicA", 0, 9, 32)
    assert (r.status, r.next_begin_offset, r.max_offset) == (S.OFFSET_OVERFLOW_BADLY, 4, 4)


def test_found_next_begin_offset_and_limits(store):
    fill(store, 8)
    r = store.get_message("g", "TopicA", 0, 2, 3)
    assert r.status is S.FOUND and r.next_begin_offset == 5 and r.message_count == 3
    assert r.message_queue_offsets == [2, 3, 4]
    msgs = decode_messages(r.body())
    assert [m.queue_offset for m in msgs] == [2, 3, 4]
    assert r.buffer_total_size == len(r.body())
    one = len(r.message_buffers[0])
    r = store.get_message("g", "TopicA", 0, 0, 32, max_total_bytes=2 * one + 1)
    assert r.message_count == 2 and r.next_begin_offset == 2
    # a consume-queue file holds 10 entries here: a lookup stops at the file end
    fill(store, 5)
    r = store.get_message("g", "TopicA", 0, 7, 32)
    assert (r.message_count, r.next_begin_offset) == (3, 10)
    r = store.get_message("g", "TopicA", 0, 10, 32)
    assert (r.message_count, r.next_begin_offset) == (3, 13)


def test_at_most_32_messages_per_lookup(tmp_path):
    from rocketmq_broker.store import MessageStore
    from store_helpers import make_config
    with MessageStore(make_config(tmp_path, mapped_file_size_commit_log=1 << 20,
                                  mapped_file_size_consume_queue=20 * 1000)) as store:
        fill(store, 40)
        r = store.get_message("g", "TopicA", 0, 0, 64)
        assert (r.message_count, r.next_begin_offset) == (32, 32)


def test_tag_filter_found_and_no_matched(store):
    for i in range(6):
        store.put_message(inner(body=f"m{i}".encode(), tags="A" if i in (3, 5) else "B"))
    want = {java_string_hash("A")}
    r = store.get_message("g", "TopicA", 0, 0, 32, tag_filter=lambda code: code in want)
    assert r.status is S.FOUND
    assert [m.body for m in decode_messages(r.body())] == [b"m3", b"m5"]
    assert r.message_queue_offsets == [3, 5] and r.next_begin_offset == 6
    r = store.get_message("g", "TopicA", 0, 0, 1, tag_filter=lambda code: code in want)
    assert (r.status, r.message_count, r.next_begin_offset) == (S.FOUND, 1, 4)
    r = store.get_message("g", "TopicA", 0, 0, 32, tag_filter=lambda code: False)
    assert (r.status, r.next_begin_offset, r.message_count) == (S.NO_MATCHED_MESSAGE, 6, 0)


def test_offset_found_null_when_consume_queue_file_is_gone(store):
    fill(store, 12)  # consume-queue files [0, 10) and [10, 20)
    store.find_consume_queue("TopicA", 0).mapped_file_queue.delete_first_files(1)
    r = store.get_message("g", "TopicA", 0, 4, 32)
    assert (r.status, r.next_begin_offset) == (S.OFFSET_FOUND_NULL, 10)


def test_message_was_removing_when_commit_log_file_is_gone(store):
    results = [store.put_message(inner(body=b"z" * 300)) for _ in range(20)]
    first_in_second_file = next(i for i, r in enumerate(results) if r.append_message_result.wrote_offset >= 4096)
    store.commit_log.mapped_file_queue.delete_first_files(1)
    r = store.get_message("g", "TopicA", 0, 0, 4)
    assert r.status is S.MESSAGE_WAS_REMOVING and r.message_count == 0
    offset = 0
    for _ in range(3):  # the consumer follows next_begin_offset past the removed records
        r = store.get_message("g", "TopicA", 0, offset, 32)
        if r.status is S.FOUND:
            break
        assert r.status is S.MESSAGE_WAS_REMOVING and r.next_begin_offset > offset
        offset = r.next_begin_offset
    assert r.status is S.FOUND
    assert r.message_queue_offsets[0] == first_in_second_file


def test_offset_helpers(store):
    res = fill(store, 3, queue_id=2)
    assert store.get_commit_log_offset_in_queue("TopicA", 2, 1) == res[1].append_message_result.wrote_offset
    assert store.get_commit_log_offset_in_queue("TopicA", 2, 7) == 0
    assert store.get_message_store_timestamp("TopicA", 2, 2) == res[2].append_message_result.store_timestamp
    assert store.get_message_store_timestamp("TopicA", 2, 3) == -1
    assert store.get_earliest_message_time("TopicA", 2) == res[0].append_message_result.store_timestamp
    assert store.get_earliest_message_time("Nope", 0) == -1
    assert (store.get_min_offset_in_queue("Nope", 0), store.get_max_offset_in_queue("Nope", 0)) == (0, 0)


def test_expired_files_are_deleted_and_offsets_move(store, config):
    import os
    for i in range(30):
        m = inner(body=b"e" * 300, keys=f"k{i}")
        store.put_message(m)
    files = store.commit_log.mapped_file_queue.files
    assert len(files) >= 3
    for mf in files[:2]:
        os.utime(mf.path, (1, 1))
    assert store.delete_expired_files(force=True) == 2
    assert store.delete_expired_files() == 0  # not the delete hour, or nothing left to expire
    assert store.get_min_phy_offset() == 2 * 4096
    assert sorted(os.listdir(config.commit_log_dir))[0] == f"{2 * 4096:020d}"
    low = store.get_min_offset_in_queue("TopicA", 0)
    assert low > 0
    assert store.get_commit_log_offset_in_queue("TopicA", 0, low) >= 2 * 4096
    r = store.get_message("g", "TopicA", 0, 0, 32)
    assert (r.status, r.next_begin_offset) == (S.OFFSET_TOO_SMALL, low)
    r = store.get_message("g", "TopicA", 0, low, 32)
    assert r.status is S.FOUND
    assert store.query_message("TopicA", "k29", 32).message_buffers
