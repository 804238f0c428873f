"""The trace dispatcher's batching, keys and overload behaviour, with a recording producer in
place of the internal trace producer (no broker)."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest
from rocketmq_sdk.config import ProducerConfig
from rocketmq_sdk.trace import TraceRecord, TraceType, decode_trace_text, dispatcher

from tests.conftest import wait_until


class RecordingProducer:
    instances: list[RecordingProducer] = []

    def __init__(self, group: str, **settings: object) -> None:
        self.group, self.settings, self.sent = group, settings, []
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()
        RecordingProducer.instances.append(self)

    def start(self) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def send_async(self, msg):
        self.gate.wait(10)
        with self.lock:
            self.sent.append(msg)
        fut: concurrent.futures.Future = concurrent.futures.Future()
        fut.set_result(None)
        return fut


@pytest.fixture
def recording():
    from rocketmq_sdk.producer import Producer

    RecordingProducer.instances.clear()
    dispatcher.set_trace_producer_factory(RecordingProducer)
    yield RecordingProducer.instances
    dispatcher.set_trace_producer_factory(Producer)


def pub(msg_id: str, keys: str | None = None, group: str = "g") -> TraceRecord:
    return TraceRecord(TraceType.Pub, time_stamp=1, region_id="DefaultRegion", group_name=group, topic="T",
                       msg_id=msg_id, keys=keys, store_host="127.0.0.1:10911", body_length=1, offset_msg_id="O")


def test_records_become_one_trace_message_with_their_keys(recording) -> None:
    cfg = ProducerConfig.from_kwargs(namesrv_addr="127.0.0.1:9876", access_key="ak", secret_key="sk12345")
    d = dispatcher.TraceDispatcher("order_pg", "PRODUCE", None, cfg)
    d.start()
    try:
        d.append([pub("M1", "k1 k2"), pub("M2"), pub("M3", "k2")])
        assert d.flush(10)
    finally:
        d.shutdown()
    (prod,) = recording
    assert prod.group == d.trace_group and d.trace_group.startswith("_INNER_TRACE_PRODUCER-order_pg-PRODUCE-")
    assert prod.settings["instance_name"] == "PID_CLIENT_INNER_TRACE_PRODUCER_127.0.0.1:9876"
    assert (prod.settings["access_key"], prod.settings["send_msg_timeout"]) == ("ak", 5000)
    (msg,) = prod.sent
    assert msg.topic == "RMQ_SYS_TRACE_TOPIC" and msg.tags is None
    assert [r.msg_id for r in decode_trace_text(msg.body.decode())] == ["M1", "M2", "M3"]
    assert set(msg.keys) == {"M1", "M2", "M3", "k1", "k2"}


def test_batch_is_sent_when_its_first_record_is_half_a_second_old(recording) -> None:
    d = dispatcher.TraceDispatcher("cg", "CONSUME", "CustomTrace", ProducerConfig.from_kwargs(namesrv_addr="x:9876"))
    d.start()
    try:
        d.append([pub("M1")])
        wait_until(lambda: recording[0].sent, 5, "the time-triggered send")
        assert recording[0].sent[0].topic == "CustomTrace"
    finally:
        d.shutdown()


def test_large_batches_are_split_at_118000_characters(recording) -> None:
    d = dispatcher.TraceDispatcher("g", "PRODUCE", None, ProducerConfig.from_kwargs(namesrv_addr="x:9876"))
    d.start()
    try:
        long_keys = "k" * 5000
        d.append([pub(f"M{i}", long_keys) for i in range(60)])  # ~5.1 kB each: ~306 kB in all
        assert d.flush(10)
    finally:
        d.shutdown()
    bodies = [m.body.decode() for m in recording[0].sent]
    assert len(bodies) == 3
    assert all(len(b) < dispatcher.BATCH_TEXT_LIMIT + 6000 for b in bodies)
    assert [r.msg_id for b in bodies for r in decode_trace_text(b)] == [f"M{i}" for i in range(60)]


def test_a_full_queue_drops_records_instead_of_blocking(recording, monkeypatch) -> None:
    monkeypatch.setattr(dispatcher, "QUEUE_SIZE", 4)
    d = dispatcher.TraceDispatcher("g", "PRODUCE", None, ProducerConfig.from_kwargs(namesrv_addr="x:9876"))
    d.start()
    prod = recording[0]
    prod.gate.clear()  # the worker blocks in its first send
    try:
        d.append([pub("first")])
        assert d.flush(0.2) is False  # the worker is stuck in the send
        d.append([pub(f"M{i}") for i in range(20)])  # returns at once
        assert d.discarded >= 15
    finally:
        prod.gate.set()
        d.shutdown()


def test_kind_is_checked() -> None:
    with pytest.raises(ValueError, match="PRODUCE or CONSUME"):
        dispatcher.TraceDispatcher("g", "OTHER", None, ProducerConfig.from_kwargs(namesrv_addr="x:9876"))
