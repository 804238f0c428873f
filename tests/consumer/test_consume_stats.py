"""Consume statistics (Java ``ConsumerStatsManager``) in a push consumer's running info: the
``statusTable`` that ``mqadmin consumerStatus`` and the console show, per topic."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from rocketmq_sdk import Message, PushConsumer
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from rocketmq_sdk.consumer.stats import TopicStats

from .helpers import FAST, unique, wait_until

embedded = pytest.importorskip("rocketmq_broker.embedded")

FIELDS = {"pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS", "consumeFailedMsgs"}


def test_minute_rates_and_the_hour_of_failures() -> None:
    ts = TopicStats()
    ts.record_pull(10.0, 5, now=1000.0)
    ts.record_pull(30.0, 7, now=1001.5)
    ts.record_consume(2.0, 3, 0, now=1002.0)
    ts.record_consume(4.0, 0, 2, now=1010.0)
    ts.record_consume(9.0, 0, 0, calls=3, now=1010.2)  # three calls of 3 ms in one record
    s = ts.consume_status(now=1030.0)
    assert set(s) == FIELDS
    assert s["pullRT"] == 20.0 and s["pullTPS"] == pytest.approx(12 / 60)
    assert s["consumeRT"] == 3.0 and s["consumeOKTPS"] == pytest.approx(3 / 60)
    assert s["consumeFailedTPS"] == pytest.approx(2 / 60) and s["consumeFailedMsgs"] == 2
    later = ts.consume_status(now=1100.0)  # the minute is over, the hour is not
    assert later["pullRT"] == later["pullTPS"] == later["consumeOKTPS"] == later["consumeFailedTPS"] == 0.0
    assert later["consumeRT"] == 3.0 and later["consumeFailedMsgs"] == 2  # Java: the hour's RT if none this minute
    gone = ts.consume_status(now=1000.0 + 3600 + 120)
    assert gone["consumeFailedMsgs"] == 0 and gone["consumeRT"] == 0.0


def test_fields_and_types_as_a_java_consumer_sends_them() -> None:
    """The statusTable entry of a Java 4.9 consumer (tests/data/captures/admin.jsonl): same
    names, same order on the wire, consumeFailedMsgs an integer and the others floats."""
    capture = Path(__file__).parents[1] / "data" / "captures" / "admin.jsonl"
    body = next(json.loads(line)["body_text"] for line in capture.open() if "statusTable" in line)
    java = json.loads(re.search(r'"statusTable":(\{.*?\}\})', body).group(1))
    ours = TopicStats().consume_status()
    for entry in java.values():
        assert list(entry) == list(ours)
        assert {k: type(v) for k, v in entry.items()} == {k: type(v) for k, v in ours.items()}


def running_status(cluster, group: str, client_id: str) -> dict:
    with AdminClient(cluster.namesrv_addr) as admin:
        return admin.consumer_running_info(group, client_id=client_id)[client_id].status_table


def test_status_table_counts_consumed_and_failed_messages(cluster, producer):
    """10 messages, 3 of them fail once (RECONSUME_LATER) and succeed when redelivered through
    %RETRY%group: the running info fetched through AdminClient counts them per topic, as Java."""
    topic, group = unique("TopicStats"), unique("cg")
    lock = threading.Lock()
    first: list[str] = []
    retried: list[str] = []

    def listener(msgs, ctx):
        with lock:
            for m in msgs:
                (retried if m.reconsume_times else first).append(m.body)
        if any(m.body.startswith(b"fail") and not m.reconsume_times for m in msgs):
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer(group, cluster.namesrv_addr, instance_name="stats", consume_message_batch_max_size=1, **FAST)
    c.subscribe(topic)
    c.register_message_listener(listener)
    c.start()
    try:
        for i in range(10):
            producer.send(Message(topic, f"fail-{i}" if i < 3 else f"ok-{i}"))
        wait_until(lambda: len(first) == 10 and len(retried) == 3, timeout_s=30, what="10 deliveries + 3 retries")
        client_id = c.instance.client_id
        table: dict = {}

        def settled(topic: str) -> float:  # listener results recorded (after their pool task ends)
            s = table.get(topic, {})
            return (s.get("consumeOKTPS", 0) + s.get("consumeFailedTPS", 0)) * 60

        wait_until(lambda: table.update(running_status(cluster, group, client_id)) or
                   (round(settled(topic)), round(settled(f"%RETRY%{group}"))) == (10, 3), what="all results recorded")
    finally:
        c.shutdown()
    main, retry = table[topic], table[f"%RETRY%{group}"]
    assert set(main) == FIELDS and set(retry) == FIELDS
    assert main["consumeOKTPS"] * 60 == pytest.approx(7)
    assert main["consumeFailedTPS"] * 60 == pytest.approx(3)
    assert main["consumeFailedMsgs"] == 3
    assert main["pullTPS"] * 60 == pytest.approx(10)
    assert main["pullRT"] > 0 and main["consumeRT"] >= 0
    assert retry["consumeOKTPS"] * 60 == pytest.approx(3) and retry["consumeFailedMsgs"] == 0
    assert retry["pullTPS"] * 60 == pytest.approx(3)


def test_orderly_suspend_counts_as_failed(cluster, producer):
    topic, group = unique("TopicStatsOrd"), unique("cg")
    calls: list[int] = []

    def listener(msgs, ctx):
        calls.append(len(msgs))
        # the very first call suspends its queue (1 failed); that message comes again and succeeds
        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT if len(calls) == 1 else ConsumeOrderlyStatus.SUCCESS

    c = PushConsumer(group, cluster.namesrv_addr, instance_name="stats-ord", consume_message_batch_max_size=1,
                     suspend_current_queue_time=10, **FAST)
    c.subscribe(topic)
    c.register_message_listener(listener, orderly=True)
    c.start()
    try:
        for i in range(4):
            producer.send(Message(topic, b"x", keys=f"o-{i}"))
        wait_until(lambda: len(calls) == 5, timeout_s=30, what="4 messages + 1 suspended call")
        # recorded right after each listener call returns
        status: dict = {}
        wait_until(lambda: status.update(c.consumer_running_info().status_table.get(topic, {})) or
                   round((status.get("consumeOKTPS", 0) + status.get("consumeFailedTPS", 0)) * 60) == 5,
                   what="5 calls recorded")
    finally:
        c.shutdown()
    assert status["consumeOKTPS"] * 60 == pytest.approx(4)
    assert status["consumeFailedTPS"] * 60 == pytest.approx(1) and status["consumeFailedMsgs"] == 1
