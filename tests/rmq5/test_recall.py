"""Cancelling timer messages (RocketMQ 5.x): RECALL_MESSAGE (370) with the ``recallHandle`` of a
SEND answer, and ``TIMER_DEL_UNIQKEY`` delete entries; golden frames of 5.3.3 (rmq5_timer 39,
60-65, 122-123, 148-153)."""

from __future__ import annotations

import asyncio
import time

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import (
    IllegalArgumentError,
    IllegalOperationError,
    Message,
    MessageIllegalError,
    MQBrokerError,
    Producer,
    RequestCodeNotSupportedError,
    SimpleConsumer,
)
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.recall import RecallHandle, RecallMessageRequestHeader

from tests.rmq5.conftest import V4, broker_of
from tests.rmq5.frames import frame

TOPIC = "RecallTopic"
V5 = {"broker_version": "5.3.3", "revive_interval": 100, "recall_message_enable": True}


def _now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture
def recall_cluster(tmp_path):
    c = start_dev_cluster(str(tmp_path / "store"), in_process=True, broker_config=V5)
    yield c
    c.stop()


@pytest.fixture
def producer(recall_cluster):
    with Producer("recall_producer", recall_cluster.namesrv_addr) as p:
        p.send(Message(TOPIC, b"warm-up"))  # creates the topic
        yield p


def _drain(cluster, until: set[bytes], group: str, deadline_s: float = 15.0) -> dict[bytes, object]:
    """Receive (and ack) until every body of ``until`` came; everything received by body."""
    c = SimpleConsumer(group, cluster.namesrv_addr, await_duration=0.3, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(TOPIC)
    c.start()
    got: dict[bytes, object] = {}
    try:
        deadline = time.monotonic() + deadline_s
        while not until <= set(got):
            assert time.monotonic() < deadline, f"got {sorted(got)}, waiting for {sorted(until)}"
            for m in c.receive(32, 60):
                got[m.body] = m
                c.ack(m)
    finally:
        c.shutdown()
    return got


# -- the handle ---------------------------------------------------------------------------------
def test_handle_codec_is_5_3_3s():
    handle = frame("timer", 39)["header"]["extFields"]["recallHandle"]
    h = RecallHandle.decode(handle)
    assert h == RecallHandle("CapTimerDemo", "broker-a", "1795861997001", "C00002026C915FFD2B278D4F671C0001")
    assert h.encode() == handle
    assert RecallHandle.decode(handle.rstrip("=")) == h  # padding optional, as Java's decoder
    # the handle of capture 152 decodes (to another topic: the broker answers "topic not match")
    assert RecallHandle.decode(frame("timer", 152)["header"]["extFields"]["recallHandle"]).topic == "not"
    for bad in ("", "v1 a b c d", "djIgYSBiIGMgZA==", "djEgYSBi", "dj+gYSBi", "@@", "dj€"):  # v2 ...; v1 a b
        with pytest.raises(ValueError, match="recall handle is invalid"):
            RecallHandle.decode(bad)
    # stricter than 5.3.3: the fields become properties of the delete entry
    for fields in (("T", "b", "1", "id\x02REAL_TOPIC\x01Evil"), ("T", "b", "1", "x" * 256), ("T", "", "1", "id")):
        with pytest.raises(ValueError, match="recall handle is invalid"):
            RecallHandle.decode(RecallHandle(*fields).encode())


def test_recall_request_header_is_java_s():
    ext = frame("timer", 148)["header"]["extFields"]
    h = RecallMessageRequestHeader.from_ext_fields(ext)
    assert h.to_ext_fields() == ext


# -- the SEND answer --------------------------------------------------------------------------
def test_send_answer_carries_a_recall_handle_for_timer_messages_only(recall_cluster, producer):
    at = _now_ms() + 60_000
    r = producer.send(Message(TOPIC, b"timer", deliver_time_ms=at))
    h = RecallHandle.decode(r.recall_handle)
    out = at - at % 1000 - (1000 if at % 1000 == 0 else 0)
    assert h == RecallHandle(TOPIC, "broker-a", str(out + 1), r.msg_id)  # TIMER_OUT_MS + 1, as 5.3.3
    assert producer.send(Message(TOPIC, b"plain")).recall_handle is None
    assert producer.send(Message(TOPIC, b"level", delay_time_level=1)).recall_handle is None  # as timer:45
    assert producer.send(Message(TOPIC, b"past", deliver_time_ms=_now_ms() - 1000)).recall_handle is None


def test_4x_send_answer_has_no_recall_handle_and_recall_is_not_supported(tmp_path):
    c = start_dev_cluster(str(tmp_path / "store"), in_process=True, broker_config=V4)
    try:
        with Producer("recall_v4", c.namesrv_addr) as p:
            r = p.send(Message(TOPIC, b"x", delay_ms=60_000))
            assert r.recall_handle is None
            handle = RecallHandle(TOPIC, "broker-a", str(_now_ms() + 60_000), r.msg_id).encode()
            with pytest.raises(RequestCodeNotSupportedError):
                p.recall_message(TOPIC, handle)
    finally:
        c.stop()


# -- recall -----------------------------------------------------------------------------------
def test_recalled_timer_message_is_never_delivered_the_other_is(recall_cluster, producer):
    at = _now_ms() + 2000
    recalled = producer.send(Message(TOPIC, b"recalled", deliver_time_ms=at))
    kept = producer.send(Message(TOPIC, b"kept", deliver_time_ms=at))
    assert producer.recall_message(TOPIC, recalled.recall_handle) == recalled.msg_id
    # a second recall answers the same (timer:150-151)
    assert producer.recall_message(TOPIC, recalled.recall_handle) == recalled.msg_id
    got = _drain(recall_cluster, {b"warm-up", b"kept"}, "recall_group")
    assert b"recalled" not in got
    assert got[b"kept"].msg_id == kept.msg_id
    timer = broker_of(recall_cluster).timer
    assert timer.cancelled_count == 1 and timer.pending == 0  # the delete entries are gone too
    # after the slot: a recall is refused (the message is due or delivered)
    with pytest.raises(IllegalOperationError, match="recall failed, timestamp invalid"):
        producer.recall_message(TOPIC, kept.recall_handle)


def test_recall_answers_as_5_3_3_on_the_wire(recall_cluster, producer, v5_client):
    r = producer.send(Message(TOPIC, b"x", delay_ms=60_000))
    addr = broker_of(recall_cluster).config.broker_addr
    ext = {"producerGroup": "g", "bname": "broker-a", "topic": TOPIC, "recallHandle": r.recall_handle}
    resp = v5_client.invoke(addr, RequestCode.RECALL_MESSAGE, ext)
    want = frame("timer", 149)["header"]
    assert (resp.code, resp.remark, sorted(resp.ext_fields)) == (0, want["remark"], sorted(want["extFields"]))
    assert resp.ext_fields["msgId"] == r.msg_id
    bad = dict(ext, recallHandle=frame("timer", 152)["header"]["extFields"]["recallHandle"])
    resp = v5_client.invoke(addr, RequestCode.RECALL_MESSAGE, bad)
    want = frame("timer", 153)["header"]
    assert (resp.code, resp.remark, resp.ext_fields) == (want["code"], want["remark"], want["extFields"])
    resp = v5_client.invoke(addr, RequestCode.RECALL_MESSAGE, dict(ext, recallHandle="not base64!"))
    assert (resp.code, resp.remark) == (ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid")
    # a hostile handle trying to inject properties into the delete entry is refused, nothing stored
    store = broker_of(recall_cluster).store
    before = store.get_max_offset_in_queue("rmq_sys_wheel_timer", 0)
    evil = RecallHandle(TOPIC, "broker-a", str(_now_ms() + 60_000), "id\x02REAL_TOPIC\x01Evil").encode()
    resp = v5_client.invoke(addr, RequestCode.RECALL_MESSAGE, dict(ext, recallHandle=evil))
    assert (resp.code, resp.remark) == (ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid")
    assert store.get_max_offset_in_queue("rmq_sys_wheel_timer", 0) == before
    resp = v5_client.invoke(addr, RequestCode.RECALL_MESSAGE, dict(ext, topic="NoSuchTopic"))
    assert (resp.code, resp.remark) == (ResponseCode.TOPIC_NOT_EXIST, "recall failed, the topic[NoSuchTopic] not exist")


def test_recall_refusals(recall_cluster, producer):
    r = producer.send(Message(TOPIC, b"x", delay_ms=60_000))
    h = RecallHandle.decode(r.recall_handle)
    other_broker = RecallHandle(TOPIC, "broker-z", h.timestamp, h.message_id).encode()
    with pytest.raises(MQBrokerError):  # no route to broker-z: nothing to send it to
        producer.recall_message(TOPIC, other_broker)
    expired = RecallHandle(TOPIC, "broker-a", str(_now_ms() - 1), h.message_id).encode()
    with pytest.raises(IllegalOperationError, match="timestamp invalid") as info:
        producer.recall_message(TOPIC, expired)
    assert info.value.code == ResponseCode.ILLEGAL_OPERATION
    too_far = RecallHandle(TOPIC, "broker-a", str(_now_ms() + 4 * 86_400_000), h.message_id).encode()
    with pytest.raises(IllegalOperationError, match="timestamp invalid"):
        producer.recall_message(TOPIC, too_far)
    producer.send(Message("OtherRecallTopic", b"y"))  # exists, but the handle is of TOPIC
    with pytest.raises(IllegalOperationError, match="topic not match"):
        producer.recall_message("OtherRecallTopic", r.recall_handle)
    # refused before anything is sent: a plain message has no handle; garbage; bad topics
    with pytest.raises(IllegalArgumentError, match="not a timer message"):
        producer.recall_message(TOPIC, producer.send(Message(TOPIC, b"plain")).recall_handle)  # type: ignore[arg-type]
    with pytest.raises(IllegalArgumentError, match="recall handle is invalid"):
        producer.recall_message(TOPIC, "djEgYSBi")
    with pytest.raises(IllegalArgumentError):
        producer.recall_message("bad/topic", r.recall_handle)
    with pytest.raises(IllegalArgumentError, match="retry"):
        producer.recall_message("%RETRY%g", r.recall_handle)


def test_unknown_but_well_formed_handle_succeeds_as_5_3_3(recall_cluster, producer):
    handle = RecallHandle(TOPIC, "broker-a", str(_now_ms() + 60_000), "00000000000000000000000000000000").encode()
    assert producer.recall_message(TOPIC, handle) == "00000000000000000000000000000000"


def test_arecall_message(recall_cluster, producer):
    r = producer.send(Message(TOPIC, b"x", delay_ms=60_000))

    async def main():
        return await producer.arecall_message(TOPIC, r.recall_handle)

    assert asyncio.run(main()) == r.msg_id


def test_recall_disabled_by_default_is_no_permission_and_the_message_is_delivered(tmp_path):
    c = start_dev_cluster(str(tmp_path / "store"), in_process=True,
                          broker_config={"broker_version": "5.3.3", "revive_interval": 100})
    try:
        with Producer("recall_off", c.namesrv_addr) as p:
            p.send(Message(TOPIC, b"warm-up"))
            r = p.send(Message(TOPIC, b"delivered", delay_ms=1000))
            with pytest.raises(MQBrokerError) as info:
                p.recall_message(TOPIC, r.recall_handle)
            want = frame("timer", 123)["header"]
            assert (info.value.code, info.value.remark) == (want["code"], want["remark"])
        assert b"delivered" in _drain(c, {b"delivered"}, "recall_off_group")
    finally:
        c.stop()


def test_recall_survives_a_broker_restart(tmp_path):
    store = str(tmp_path / "store")
    c = start_dev_cluster(store, in_process=True, broker_config=V5)
    try:
        with Producer("recall_restart", c.namesrv_addr) as p:
            p.send(Message(TOPIC, b"warm-up"))
            at = _now_ms() + 2500
            recalled = p.send(Message(TOPIC, b"recalled", deliver_time_ms=at))
            p.send(Message(TOPIC, b"kept", deliver_time_ms=at))
            p.recall_message(TOPIC, recalled.recall_handle)
    finally:
        c.stop()
    c = start_dev_cluster(store, in_process=True, broker_config=V5)
    try:
        got = _drain(c, {b"warm-up", b"kept"}, "recall_restart_group")
        assert b"recalled" not in got
    finally:
        c.stop()


# -- TIMER_DEL_UNIQKEY delete entries ----------------------------------------------------------
def _delete_entry(target_uniq: str, deliver_ms: int, topic: str = TOPIC) -> Message:
    m = Message(topic, b"delete marker")
    m.put_property(MC.TIMER_DEL_UNIQKEY, f"{topic}+{target_uniq}")
    m.put_property(MC.TIMER_DELIVER_MS, str(deliver_ms))
    return m


def test_delete_entry_cancels_the_message_of_its_slot(recall_cluster, producer):
    at = _now_ms() + 2000
    cancelled = producer.send(Message(TOPIC, b"cancelled", deliver_time_ms=at))
    other_slot = producer.send(Message(TOPIC, b"other-slot", deliver_time_ms=at))
    producer.send(_delete_entry(cancelled.msg_id, at))  # same deliver time: same slot (timer:60-63)
    producer.send(_delete_entry(other_slot.msg_id, at + 1000))  # another slot: cancels nothing (5.x)
    # the delete entry first, then the message (5.x keeps the key for the rest of the slot)
    producer.send(_delete_entry("C0FFEE00000000000000000000000001", at))
    late = Message(TOPIC, b"deleted-before-sent", deliver_time_ms=at)
    late.put_property(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "C0FFEE00000000000000000000000001")
    producer.send(late)
    producer.send(Message(TOPIC, b"next-slot", deliver_time_ms=at + 1000))  # comes after slot `at` is done
    got = _drain(recall_cluster, {b"warm-up", b"other-slot", b"next-slot"}, "delete_group")
    assert b"cancelled" not in got and b"delete marker" not in got and b"deleted-before-sent" not in got
    timer = broker_of(recall_cluster).timer
    assert timer.cancelled_count == 2 and timer.pending == 0


def test_delete_entry_with_a_past_time_is_illegal_as_5_3_3(recall_cluster, producer):
    with pytest.raises(MessageIllegalError) as info:
        producer.send(_delete_entry("0000", _now_ms() - 1000))
    assert info.value.remark == frame("timer", 65)["header"]["remark"]
    m = Message(TOPIC, b"no time")
    m.put_property(MC.TIMER_DEL_UNIQKEY, f"{TOPIC}+0000")
    with pytest.raises(MessageIllegalError):
        producer.send(m)


def test_recall_with_a_namespace(recall_cluster):
    with Producer("recall_ns_producer", recall_cluster.namesrv_addr, namespace="ns1") as p:
        p.send(Message(TOPIC, b"warm-up"))
        r = p.send(Message(TOPIC, b"x", delay_ms=60_000))
        assert RecallHandle.decode(r.recall_handle).topic == "ns1%" + TOPIC
        assert p.recall_message(TOPIC, r.recall_handle) == r.msg_id  # the caller's own topic name
