"""Producer behaviour on the wire, against scripted fakes (no reference broker needed)."""

from __future__ import annotations

import json
import zlib

import pytest
from rocketmq_sdk.exceptions import ClientStateError, IllegalArgumentError, MQBrokerError
from rocketmq_sdk.producer import Producer, SelectMessageQueueByHash
from rocketmq_sdk.protocol import Message, SendStatus, decode_batch
from rocketmq_sdk.protocol.codes import RequestCode

from tests.conftest import wait_until

from .fakes import ScriptedCluster

SEND = RequestCode.SEND_MESSAGE_V2


@pytest.fixture
def cluster():
    with ScriptedCluster() as c:
        yield c


def test_send_writes_java_v2_header_and_returns_uniq_key(cluster):
    with Producer("pg_wire", cluster.addr) as producer:
        msg = Message("TopicW", b"hello", tags="TagA", keys=["k1", "k2"], properties={"p": "v"})
        result = producer.send(msg)
    assert result.send_status is SendStatus.SEND_OK
    (req,) = cluster.requests_of(SEND)
    ext = req.ext_fields
    assert sorted(ext) == list("abcdefghijkmn")  # no 'l' outside retry topics, as Java
    assert (ext["a"], ext["b"], ext["c"], ext["d"], ext["f"], ext["h"], ext["j"], ext["k"], ext["m"], ext["n"]) == \
        ("pg_wire", "TopicW", "TBW102", "4", "0", "0", "0", "false", "false", "fake-broker")
    props = dict(item.split("\x01") for item in ext["i"].split("\x02"))
    assert props["TAGS"] == "TagA" and props["KEYS"] == "k1 k2" and props["p"] == "v" and props["WAIT"] == "true"
    assert result.msg_id == props["UNIQ_KEY"] == msg.uniq_key and len(result.msg_id) == 32
    assert result.message_queue.queue_id == int(ext["e"]) and result.queue_offset == 0
    assert req.language == 3  # PYTHON
    assert cluster.stored("TopicW")[0].body == b"hello"


def test_body_at_threshold_is_zlib_compressed_with_sys_flag(cluster):
    big, small = bytes(range(256)) * 16, b"y" * 4095  # 4096 bytes: compressed; 4095: not
    with Producer("pg_zip", cluster.addr) as producer:
        producer.send(Message("TopicZ", big))
        producer.send(Message("TopicZ", small))
    first, second = cluster.requests_of(SEND)
    assert first.ext_fields["f"] == "1" and zlib.decompress(first.body) == big
    assert second.ext_fields["f"] == "0" and second.body == small


def test_invalid_messages_are_refused_before_the_network(cluster):
    with Producer("pg_bad", cluster.addr, max_message_size=1024) as producer:
        with pytest.raises(IllegalArgumentError, match="max_message_size"):
            producer.send(Message("T", b"x" * 1025))
        with pytest.raises(IllegalArgumentError, match="empty"):
            producer.send(Message("T", b""))
        with pytest.raises(IllegalArgumentError, match="illegal characters"):
            producer.send(Message("bad topic", b"x"))
        with pytest.raises(IllegalArgumentError, match="forbidden"):
            producer.send(Message("SCHEDULE_TOPIC_XXXX", b"x"))
    assert cluster.requests_of(SEND) == []


def test_illegal_group_and_unknown_setting_are_refused():
    with pytest.raises(IllegalArgumentError):
        Producer("bad group!")
    with pytest.raises(IllegalArgumentError, match="send_msg_timout"):
        Producer("pg", "127.0.0.1:9876", send_msg_timout=5)


def test_round_robin_spreads_sends_over_all_queues(cluster):
    with Producer("pg_rr", cluster.addr) as producer:
        queues = [producer.send(Message("TopicRR", b"m")).message_queue.queue_id for _ in range(8)]
    assert sorted(queues) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert all((b - a) % 4 == 1 for a, b in zip(queues, queues[1:], strict=False))
    # one route lookup for all sends (the route is cached); TBW102's is the start-up broker discovery
    lookups = [r.ext_fields["topic"] for r in cluster.requests_of(RequestCode.GET_ROUTEINFO_BY_TOPIC)]
    assert lookups.count("TopicRR") == 1 and set(lookups) <= {"TopicRR", "TBW102"}


def test_hash_selector_puts_each_key_on_the_java_queue(cluster):
    with Producer("pg_ord", cluster.addr) as producer:
        for key, expected in (("abc", 96354 % 4), ("hello", 99162322 % 4), (-7, 3)):
            r = producer.send(Message("TopicO", b"m"), SelectMessageQueueByHash(), key)
            assert r.message_queue.queue_id == expected
        r = producer.send_orderly(Message("TopicO", b"m"), lambda mqs, msg, arg: mqs[arg], 1)
        assert r.message_queue.queue_id == 1


def test_retry_avoids_the_broker_that_failed():
    with ScriptedCluster(brokers=("broker-a", "broker-b"), fail_send={"broker-a": 14}) as c:
        with Producer("pg_retry", c.addr) as producer:
            results = [producer.send(Message("TopicR", b"m")) for _ in range(6)]
        assert all(r.message_queue.broker_name == "broker-b" for r in results)
        sends = [r.ext_fields["n"] for r in c.requests_of(SEND)]
        # every failed attempt on broker-a is followed by one on broker-b
        assert sends.count("broker-b") == 6
        assert all(b == "broker-b" for a, b in zip(sends, sends[1:], strict=False) if a == "broker-a")


def test_retries_stop_after_retry_times_and_raise_the_broker_code():
    with ScriptedCluster(fail_send={"fake-broker": 14}) as c:
        with Producer("pg_fail", c.addr, retry_times_when_send_failed=2) as producer:
            with pytest.raises(MQBrokerError) as info:
                producer.send(Message("TopicF", b"m"))
        assert info.value.code == 14
        assert len(c.requests_of(SEND)) == 3


def test_non_retryable_code_and_ordered_sends_are_tried_once():
    with ScriptedCluster(fail_send={"fake-broker": 13}) as c:
        with Producer("pg_once", c.addr) as producer:
            with pytest.raises(MQBrokerError) as info:
                producer.send(Message("TopicN", b"m"))
            assert info.value.code == 13
            assert len(c.requests_of(SEND)) == 1
            c.fail_send["fake-broker"] = 14  # retryable, but an ordered send never retries
            with pytest.raises(MQBrokerError):
                producer.send(Message("TopicN", b"m"), SelectMessageQueueByHash(), "k")
            assert len(c.requests_of(SEND)) == 2


def test_unknown_topic_falls_back_to_tbw102_route():
    with ScriptedCluster(missing_topics=frozenset({"NewTopic"})) as c:
        with Producer("pg_new", c.addr) as producer:
            results = [producer.send(Message("NewTopic", b"m")) for _ in range(8)]
        # TBW102 has 8 queues, but a new topic gets min(defaultTopicQueueNums=4, 8)
        assert {r.message_queue.queue_id for r in results} == {0, 1, 2, 3}
        looked_up = [r.ext_fields["topic"] for r in c.requests_of(RequestCode.GET_ROUTEINFO_BY_TOPIC)]
        # the send looks up NewTopic, then falls back to TBW102 (the start-up broker discovery
        # may ask for TBW102 before that, as Java's producer does)
        i = looked_up.index("NewTopic")
        assert looked_up[i + 1] == "TBW102"


def test_heartbeat_carries_producer_group_and_shutdown_unregisters(cluster):
    producer = Producer("pg_hb", cluster.addr)
    producer.start()
    producer.send(Message("TopicH", b"m"))
    inst = producer.instance
    # like Java's producer, the first heartbeat goes out right after start, before any send
    wait_until(lambda: cluster.requests_of(RequestCode.HEART_BEAT), what="the start-up heartbeat")
    inst.run(inst.send_heartbeat_to_all(), 5)
    heartbeats = cluster.requests_of(RequestCode.HEART_BEAT)
    assert len(heartbeats) == 2
    body = json.loads(heartbeats[-1].body)
    assert body["producerDataSet"] == [{"groupName": "pg_hb"}] and body["clientID"] == inst.client_id
    producer.shutdown()
    (unreg,) = cluster.requests_of(RequestCode.UNREGISTER_CLIENT)
    assert unreg.ext_fields == {"clientID": inst.client_id, "producerGroup": "pg_hb"}
    with pytest.raises(ClientStateError):
        producer.send(Message("TopicH", b"m"))
    producer.shutdown()  # idempotent
    assert not inst.loop_thread.is_running


def test_batch_is_one_320_request_with_uniq_keys_and_no_compression(cluster):
    msgs = [Message("TopicB", b"z" * 5000, keys=f"k{i}", tags="T") for i in range(3)]
    with Producer("pg_batch", cluster.addr) as producer:
        result = producer.send_batch(msgs)
        with pytest.raises(IllegalArgumentError, match="same"):
            producer.send_batch([Message("TopicB", b"a"), Message("Other", b"b")])
        with pytest.raises(IllegalArgumentError, match="delayed"):
            producer.send_batch([Message("TopicB", b"a", delay_time_level=2)])
        with pytest.raises(IllegalArgumentError, match="empty"):
            producer.send_batch([])
    (req,) = [r for r in cluster.requests if r.code == RequestCode.SEND_BATCH_MESSAGE]
    ext = req.ext_fields
    assert (ext["m"], ext["f"], ext["i"], ext["b"]) == ("true", "0", "WAIT\x01true", "TopicB")
    assert result.msg_id == ",".join(m.uniq_key for m in msgs)
    entries = decode_batch(req.body)
    assert [e.body for e in entries] == [b"z" * 5000] * 3  # batches are never compressed
    assert all(f"UNIQ_KEY\x01{m.uniq_key}" in e.properties for e, m in zip(entries, msgs, strict=True))
