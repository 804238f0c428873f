"""Broadcasting: every instance gets every message; offsets live in a local file written
atomically (``.tmp`` → rename, previous content in ``.bak``, Java's form, docs/protocol.md §6.7) and a restarted
instance resumes from it."""

from __future__ import annotations

import asyncio
import threading

import pytest
from rocketmq_sdk import Message, PushConsumer
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus
from rocketmq_sdk.consumer.offset_store import LocalFileOffsetStore, ReadOffsetType
from rocketmq_sdk.protocol import MessageQueue
from rocketmq_sdk.protocol.fastjson import loads

from .helpers import FAST, unique, wait_until

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


class Seen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: list[bytes] = []

    def __call__(self, msgs, ctx):
        with self.lock:
            self.bodies.extend(m.body for m in msgs)
        return OK

    def snapshot(self) -> list[bytes]:
        with self.lock:
            return list(self.bodies)


def start(cluster, group, topic, name, seen, store_dir, **config) -> PushConsumer:
    c = PushConsumer(group, cluster.namesrv_addr, instance_name=name, message_model="BROADCASTING",
                     local_offset_store_dir=str(store_dir), **{**FAST, **config})
    c.subscribe(topic, "*")
    c.register_message_listener(seen)
    c.start()
    return c


def test_every_instance_gets_every_message_and_resumes_from_its_file(cluster, producer, tmp_path):
    topic, group = unique("TopicBcast"), unique("cg")
    first = [f"a{i}".encode() for i in range(24)]
    for b in first:
        producer.send(Message(topic, b))
    s1, s2 = Seen(), Seen()
    c1 = start(cluster, group, topic, "b1", s1, tmp_path)
    c2 = start(cluster, group, topic, "b2", s2, tmp_path)
    try:
        assert c1.retry_topic not in c1.subscriptions()  # no %RETRY% in broadcasting
        wait_until(lambda: len(s1.snapshot()) >= 24 and len(s2.snapshot()) >= 24, what="24 each")
        assert sorted(s1.snapshot()) == sorted(first) == sorted(s2.snapshot())
        assert len(c1.process_queues()) == len(c2.process_queues()) == 4
    finally:
        c1.shutdown()
    path = c1.offset_store.path
    assert path.parent == tmp_path / c1.offset_store.path.parent.parent.name / group
    assert path.parent.parent.name.endswith("@b1")  # <dir>/<clientId>/<group>/offsets.json
    raw = path.read_text()
    assert raw.startswith('{"offsetTable":{{"brokerName":')  # Java's object-key form
    table = {(d["topic"], d["queueId"]): off for d, off in loads(raw)["offsetTable"].items()}
    assert sum(table.values()) == 24 and {t for t, _ in table} == {topic}
    assert not path.with_name("offsets.json.tmp").exists()
    second = [f"b{i}".encode() for i in range(12)]
    for b in second:
        producer.send(Message(topic, b))
    wait_until(lambda: len(s2.snapshot()) >= 36, what="c2 gets the next 12")
    again = Seen()
    c1 = start(cluster, group, topic, "b1", again, tmp_path)
    try:
        wait_until(lambda: len(again.snapshot()) >= 12, what="the restarted c1 catching up")
        wait_until(lambda: all(pq.msg_count == 0 for pq in c1.process_queues().values()), what="drained")
    finally:
        c1.shutdown()
        c2.shutdown()
    assert sorted(again.snapshot()) == sorted(second)  # resumed: nothing of the first 24 again
    assert path.with_name("offsets.json.bak").exists()


def test_failed_broadcast_messages_are_dropped_not_sent_back(cluster, producer, tmp_path):
    topic, group = unique("TopicBcastFail"), unique("cg")
    producer.send(Message(topic, b"x"))
    calls = Seen()

    def listener(msgs, ctx):
        calls(msgs, ctx)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    c = start(cluster, group, topic, "bf", listener, tmp_path)
    try:
        wait_until(lambda: len(calls.snapshot()) >= 1, what="the delivery")
        wait_until(lambda: sum(c.offset_store.snapshot().values()) == 1, what="the offset moving past it")
    finally:
        c.shutdown()
    assert calls.snapshot() == [b"x"]


def run(coro):
    return asyncio.run(coro)


def test_local_store_file_round_trip_backup_and_corruption(tmp_path):
    mq0, mq1 = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)
    store = LocalFileOffsetStore(tmp_path, "1.2.3.4@DEFAULT", "g")
    assert store.path == tmp_path / "1.2.3.4@DEFAULT" / "g" / "offsets.json"
    store.update_offset(mq0, 5, increase_only=False)
    run(store.persist_all({mq0}))
    assert not store.path.with_name("offsets.json.bak").exists()  # nothing to back up yet
    store.update_offset(mq0, 9, increase_only=True)
    store.update_offset(mq1, 3, increase_only=False)
    run(store.persist_all({mq0, mq1}))
    assert store.path.with_name("offsets.json.bak").read_bytes() == \
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}'
    fresh = LocalFileOffsetStore(tmp_path, "1.2.3.4@DEFAULT", "g")
    fresh.load()
    assert fresh.snapshot() == {mq0: 9, mq1: 3}
    assert run(fresh.read_offset(MessageQueue("T", "b", 2), ReadOffsetType.READ_FROM_STORE)) == -1
    store.path.write_text("{not json")  # a torn file: the backup is used
    fresh = LocalFileOffsetStore(tmp_path, "1.2.3.4@DEFAULT", "g")
    fresh.load()
    assert fresh.snapshot() == {mq0: 5}
    # Java's pretty form (tabs, newlines) is read too
    store.path.write_text('{\n\t"offsetTable":{{\n\t\t"brokerName":"b",\n\t\t"queueId":1,\n\t\t"topic":"T"\n\t}:77\n\t}\n}')
    fresh = LocalFileOffsetStore(tmp_path, "1.2.3.4@DEFAULT", "g")
    fresh.load()
    assert fresh.snapshot() == {mq1: 77}


def test_default_store_dir_is_under_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    store = LocalFileOffsetStore(None, "cid", "g")
    assert store.path == tmp_path / ".rocketmq_offsets" / "cid" / "g" / "offsets.json"


@pytest.mark.parametrize("model", ["BROADCASTING", "CLUSTERING"])
def test_broadcasting_client_id_keeps_default(model):
    from rocketmq_sdk.config import ConsumerConfig
    cid = ConsumerConfig(message_model=model, client_ip="10.0.0.1").build_client_id()
    assert (cid == "10.0.0.1@DEFAULT") == (model == "BROADCASTING")


def test_queue_created_after_start_is_read_from_its_first_offset(cluster, producer, tmp_path):
    """Issue 25, defect 4: a broadcasting consumer (CONSUME_FROM_LAST_OFFSET) started before its
    topic exists reads the queues that appear later from their first offset, so the messages
    sent before its next route update are not lost; a topic that existed at start still
    starts at its max offset (only new messages)."""
    new_topic, old_topic, group = unique("TopicBcastLate"), unique("TopicBcastOld"), unique("cg")
    producer.send(Message(old_topic, b"before-start"))  # exists at start: skipped (LAST_OFFSET)
    seen = Seen()
    c = PushConsumer(group, cluster.namesrv_addr, instance_name="late", message_model="BROADCASTING",
                     local_offset_store_dir=str(tmp_path),
                     **{**FAST, "consume_from_where": "CONSUME_FROM_LAST_OFFSET", "poll_name_server_interval": 500})
    c.subscribe(new_topic, "*")
    c.subscribe(old_topic, "*")
    c.register_message_listener(seen)
    c.start()
    try:
        wait_until(lambda: len([q for q in c.process_queues() if q.topic == old_topic]) == 4, what="old topic owned")
        for i in range(8):  # creates the topic; the consumer learns of it at its next route poll
            producer.send(Message(new_topic, f"n{i}".encode()))
        producer.send(Message(old_topic, b"after-start"))
        wait_until(lambda: len(seen.snapshot()) >= 9, what="8 messages of the new topic and 1 of the old")
        wait_until(lambda: all(pq.msg_count == 0 for pq in c.process_queues().values()), what="drained")
    finally:
        c.shutdown()
    assert sorted(seen.snapshot()) == sorted([b"after-start", *(f"n{i}".encode() for i in range(8))])
