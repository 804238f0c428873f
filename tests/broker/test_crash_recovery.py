"""Crash recovery: SIGKILL a SYNC_FLUSH broker process while several threads are sending, restart
it on the same store (abnormal recovery: the ``abort`` file is still there) and check that every
acknowledged message is consumed, exactly once, at the queue offset its SendResult reported."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter

from rocketmq_sdk import Message, Producer, SendStatus
from rocketmq_sdk.admin.client import AdminClient
from rocketmq_sdk.consumer.pull_consumer import PullConsumer
from rocketmq_sdk.protocol.message import PullStatus

TOPIC = "TopicCrash"
THREADS = 6
ACKED_BEFORE_KILL = 2000


def _dev_cmd(store: str) -> list[str]:
    return [sys.executable, "-m", "rocketmq_broker", "dev", "--store-dir", store, "--flush-disk-type", "SYNC_FLUSH",
            "--commit-log-file-size", str(64 * 1024)]  # small files: the recovery scan crosses several


def test_sigkill_during_sync_flush_sends_loses_and_duplicates_no_acknowledged_message(tmp_path, server_process):
    store = str(tmp_path / "store")
    broker = server_process(_dev_cmd(store))
    with AdminClient(broker.lines["NAMESRV"]) as admin:
        admin.create_topic(TOPIC, broker_addr=broker.lines["BROKER"], read_queue_nums=4, write_queue_nums=4)

    acked: dict[str, tuple[int, int]] = {}  # key -> (queue id, queue offset) from SEND_OK results
    failures: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def sender(producer: Producer, n: int) -> None:
        i = 0
        while not stop.is_set():
            key = f"t{n}-{i}"
            try:
                r = producer.send(Message(TOPIC, f"body of {key}".encode() * 4, keys=key))
            except Exception as exc:  # the broker is gone: in flight or sent after the kill
                with lock:
                    failures.append(exc)
                return
            if r.send_status is SendStatus.SEND_OK:
                with lock:
                    acked[key] = (r.message_queue.queue_id, r.queue_offset)
            i += 1

    producer = Producer("pg_crash", broker.lines["NAMESRV"], retry_times_when_send_failed=0, send_msg_timeout=3000)
    producer.start()
    threads = [threading.Thread(target=sender, args=(producer, n), daemon=True) for n in range(THREADS)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 15
        while len(acked) < ACKED_BEFORE_KILL and not failures:
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
    assert os.path.exists(os.path.join(store, "abort"))
    acked_at_kill = dict(acked)

    restarted = server_process(_dev_cmd(store))
    assert "abnormal recovery" in restarted.log()

    consumed: list[tuple[int, int, str, str, bytes]] = []  # queue id, queue offset, key, msg id, body
    with PullConsumer("cg_crash", restarted.lines["NAMESRV"]) as pc:
        mqs = pc.fetch_subscribe_message_queues(TOPIC)
        assert len(mqs) == 4
        for mq in mqs:
            offset = 0
            while True:
                r = pc.pull(mq, "*", offset, 32)
                if r.pull_status is not PullStatus.FOUND:
                    assert r.pull_status is PullStatus.NO_NEW_MSG, r
                    break
                consumed.extend((m.queue_id, m.queue_offset, " ".join(m.keys), m.msg_id, m.body) for m in r.msg_found_list)
                offset = r.next_begin_offset
            assert pc.max_offset(mq) == offset

    by_key = {key: (qid, qoff) for qid, qoff, key, _, _ in consumed}
    missing = sorted(set(acked_at_kill) - set(by_key))
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:5]}"
    moved = {k: (v, by_key[k]) for k, v in acked_at_kill.items() if by_key[k] != v}
    assert not moved, f"acknowledged messages at another queue offset after recovery: {list(moved.items())[:5]}"
    assert all(body == f"body of {key}".encode() * 4 for _, _, key, _, body in consumed)
    dup_keys = [k for k, n in Counter(key for _, _, key, _, _ in consumed).items() if n > 1]
    dup_ids = [k for k, n in Counter(mid for _, _, _, mid, _ in consumed).items() if n > 1]
    assert not dup_keys and not dup_ids, f"duplicated in the consume queue: {dup_keys[:5]} {dup_ids[:5]}"
    for qid in range(4):  # each queue: offsets 0..n-1, each once
        offsets = sorted(qoff for q, qoff, _, _, _ in consumed if q == qid)
        assert offsets == list(range(len(offsets)))
    # at most the sends in flight at the kill were stored without an acknowledgement
    assert len(consumed) - len(acked_at_kill) <= THREADS
