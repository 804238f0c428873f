"""Crash recovery: SIGKILL a SYNC_FLUSH broker process while several threads are sending, restart
it on the same store (abnormal recovery: the ``abort`` file is still there) and check that every
acknowledged message is consumed, exactly once, at the queue offset its SendResult reported.

SIGKILL keeps what reached the page cache, so this checks the recovery logic (CommitLog scan,
consume queues rebuilt without duplicates, torn tail cut), not the fsync itself."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter

import pytest
from rocketmq_sdk import Message, Producer, SendStatus
from rocketmq_sdk.admin.client import AdminClient
from rocketmq_sdk.consumer.pull_consumer import PullConsumer
from rocketmq_sdk.protocol.message import PullStatus
from rocketmq_sdk.protocol.msgid import decode_offset_msg_id

TOPIC = "TopicCrash"
THREADS = 6
FILE_SIZE = 64 * 1024  # small CommitLog files: the recovery scan crosses several


def _dev_cmd(store: str) -> list[str]:
    return [sys.executable, "-m", "rocketmq_broker", "dev", "--store-dir", store, "--flush-disk-type", "SYNC_FLUSH",
            "--namesrv-port", "0", "--broker-port", "0",
            "--commit-log-file-size", str(FILE_SIZE)]


def _body(key: str) -> bytes:
    return f"body of {key}".encode() * 4


def _send_then_kill(broker, acked_before_kill: int) -> tuple[dict[str, tuple[int, int, str]], list[BaseException]]:
    """Send from THREADS threads until ``acked_before_kill`` SEND_OK results, SIGKILL the broker with
    sends in flight; returns {key: (queue id, queue offset, offset msg id)} of the SEND_OK sends
    and the send errors."""
    with AdminClient(broker.lines["NAMESRV"]) as admin:
        admin.create_topic(TOPIC, broker_addr=broker.lines["BROKER"], read_queue_nums=4, write_queue_nums=4)
    acked: dict[str, tuple[int, int, str]] = {}
    failures: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def sender(producer: Producer, n: int) -> None:
        i = 0
        while not stop.is_set():
            key = f"t{n}-{i}"
            try:
                r = producer.send(Message(TOPIC, _body(key), keys=key))
            except Exception as exc:  # the broker is gone: in flight or sent after the kill
                with lock:
                    failures.append(exc)
                return
            if r.send_status is SendStatus.SEND_OK:
                with lock:
                    acked[key] = (r.message_queue.queue_id, r.queue_offset, r.offset_msg_id)
            i += 1

    producer = Producer("pg_crash", broker.lines["NAMESRV"], retry_times_when_send_failed=0, send_msg_timeout=3000)
    producer.start()
    threads = [threading.Thread(target=sender, args=(producer, n), daemon=True) for n in range(THREADS)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 15
        while len(acked) < acked_before_kill and not failures:
            assert time.monotonic() < deadline, f"only {len(acked)} sends acknowledged in 15 s"
            time.sleep(0.01)
        assert not failures, failures[:3]
        broker.kill()  # SIGKILL with sends in flight: no flush, no checkpoint, abort file kept
        stop.set()
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads), "a send hung after the broker died"
    finally:
        stop.set()
        producer.shutdown()
    assert failures, "no send was in flight at the kill"
    return dict(acked), failures


def _consume_all(namesrv: str) -> list[tuple[int, int, str, str, bytes]]:
    """(queue id, queue offset, keys, msg id, body) of every message of TOPIC, pulled from offset 0."""
    consumed = []
    with PullConsumer("cg_crash", namesrv) as pc:
        mqs = pc.fetch_subscribe_message_queues(TOPIC)
        assert len(mqs) == 4
        for mq in mqs:
            offset = 0
            while True:
                r = pc.pull(mq, "*", offset, 32)
                if r.pull_status is not PullStatus.FOUND:
                    assert r.pull_status is PullStatus.NO_NEW_MSG, r
                    break
                consumed.extend((m.queue_id, m.queue_offset, " ".join(m.keys), m.msg_id, m.body)
                                for m in r.msg_found_list)
                offset = r.next_begin_offset
            assert pc.max_offset(mq) == offset
    return consumed


def _assert_each_acknowledged_message_once(acked: dict[str, tuple[int, int, str]],
                                           consumed: list[tuple[int, int, str, str, bytes]]) -> None:
    by_key = {key: (qid, qoff) for qid, qoff, key, _, _ in consumed}
    missing = sorted(set(acked) - set(by_key))
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:5]}"
    moved = {k: (v[:2], by_key[k]) for k, v in acked.items() if by_key[k] != v[:2]}
    assert not moved, f"acknowledged messages at another queue offset after recovery: {list(moved.items())[:5]}"
    assert all(body == _body(key) for _, _, key, _, body in consumed)
    dup_keys = [k for k, n in Counter(key for _, _, key, _, _ in consumed).items() if n > 1]
    dup_ids = [k for k, n in Counter(mid for _, _, _, mid, _ in consumed).items() if n > 1]
    assert not dup_keys and not dup_ids, f"duplicated in the consume queue: {dup_keys[:5]} {dup_ids[:5]}"
    for qid in range(4):  # each queue: offsets 0..n-1, each once
        offsets = sorted(qoff for q, qoff, _, _, _ in consumed if q == qid)
        assert offsets == list(range(len(offsets)))
    # at most the sends in flight at the kill were stored without an acknowledgement
    assert len(consumed) - len(acked) <= THREADS


def test_sigkill_during_sync_flush_sends_loses_and_duplicates_no_acknowledged_message(tmp_path, server_process):
    store = str(tmp_path / "store")
    acked, _ = _send_then_kill(server_process(_dev_cmd(store)), 2000)
    assert os.path.exists(os.path.join(store, "abort"))
    assert len(os.listdir(os.path.join(store, "commitlog"))) >= 4

    restarted = server_process(_dev_cmd(store))
    assert "abnormal recovery" in restarted.log()
    _assert_each_acknowledged_message_once(acked, _consume_all(restarted.lines["NAMESRV"]))


def _commit_log_end(store: str) -> tuple[str, int]:
    """(last CommitLog file, file-relative end of its data): files are preallocated with zeros
    and a record never ends with a zero byte (its properties end with a separator)."""
    cl = os.path.join(store, "commitlog")
    last = os.path.join(cl, sorted(os.listdir(cl))[-1])
    with open(last, "rb") as fh:
        data = fh.read()
    return last, len(data.rstrip(b"\0"))


def test_torn_record_at_the_commit_log_end_is_cut_and_overwritten(tmp_path, server_process):
    store = str(tmp_path / "store")
    acked, _ = _send_then_kill(server_process(_dev_cmd(store)), 300)
    # a torn write: the first half of an acknowledged record copied after the last record
    # (valid magic code and size, the rest never written)
    _, _, phys = decode_offset_msg_id(max(acked.values(), key=lambda v: decode_offset_msg_id(v[2])[2])[2])
    cl = os.path.join(store, "commitlog")
    with open(os.path.join(cl, f"{phys // FILE_SIZE * FILE_SIZE:020d}"), "rb") as fh:
        fh.seek(phys % FILE_SIZE)
        size = int.from_bytes(fh.read(4), "big")
        fh.seek(phys % FILE_SIZE)
        record = fh.read(size)
    last, end = _commit_log_end(store)
    if end + size > FILE_SIZE:  # about 1 run in 250
        pytest.skip(f"the last CommitLog file is nearly full ({end} of {FILE_SIZE} bytes): no room for a torn record")
    with open(last, "r+b") as fh:
        fh.seek(end)
        fh.write(record[: size // 2])
    torn_at = int(os.path.basename(last)) + end

    restarted = server_process(_dev_cmd(store))
    assert f"invalid record at {torn_at}, truncating there" in restarted.log()
    consumed = _consume_all(restarted.lines["NAMESRV"])
    _assert_each_acknowledged_message_once(acked, consumed)
    with Producer("pg_crash_after", restarted.lines["NAMESRV"]) as p:  # the next record takes the torn one's place
        r = p.send(Message(TOPIC, _body("after"), keys="after"))
    assert decode_offset_msg_id(r.offset_msg_id)[2] == torn_at
    after = _consume_all(restarted.lines["NAMESRV"])
    assert len(after) == len(consumed) + 1
    assert (r.message_queue.queue_id, r.queue_offset, "after") in {(q, o, k) for q, o, k, _, _ in after}

