"""Retries and latency fault tolerance with two brokers: stop one, sends keep succeeding on the
other, and with ``send_latency_fault_enable`` the failed broker is avoided for the configured
duration (then tried once again)."""

from __future__ import annotations

import time

import pytest
from rocketmq_sdk import Message, Producer, SendStatus
from rocketmq_sdk.producer.fault import MQFaultStrategy
from rocketmq_sdk.protocol.codes import RequestCode

from .conftest import unique, wait_until
from .two_brokers import TwoBrokers

SENDS = (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE, RequestCode.SEND_BATCH_MESSAGE)


class SendRecorder:
    """RPC hook: the broker address of every send attempt."""

    def __init__(self) -> None:
        self.addrs: list[str] = []

    def before_request(self, addr, cmd):
        if cmd.code in SENDS:
            self.addrs.append(addr)

    def after_response(self, addr, cmd, resp):
        pass


@pytest.fixture
def brokers():
    with TwoBrokers() as b:
        yield b


def _producer(brokers, recorder, **config) -> Producer:
    return Producer(unique("pg"), brokers.namesrv_addr, rpc_hooks=[recorder], send_msg_timeout=3000, **config)


def test_both_brokers_receive_round_robin_sends(brokers):
    rec = SendRecorder()
    with _producer(brokers, rec) as p:
        topic = unique("TopicRR2")
        names = {p.send(Message(topic, b"x")).message_queue.broker_name for _ in range(8)}
    assert names == {"broker-a", "broker-b"}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_stopped_broker_sends_keep_succeeding_on_the_other(brokers, mode):
    rec = SendRecorder()
    topic = unique("TopicFail")
    with _producer(brokers, rec) as p:
        for _ in range(8):  # warm up: both brokers are used
            p.send(Message(topic, b"warm"))
        brokers.stop_broker("broker-b")
        send = p.send if mode == "sync" else (lambda m: p.send_async(m).result(10))
        results = [send(Message(topic, f"after-{i}".encode())) for i in range(20)]
    assert all(r.send_status is SendStatus.SEND_OK for r in results)
    assert {r.message_queue.broker_name for r in results} == {"broker-a"}
    # the refused connection refreshes the topic's route at once (issue 27: Java would keep trying
    # broker-b first until its 30 s route poll): broker-b unregistered at its stop, so it is tried
    # once and every later attempt goes to broker-a
    tail = rec.addrs[8:]
    b_addr = brokers.addr("broker-b")
    assert tail.count(b_addr) == 1
    assert b_addr not in tail[tail.index(b_addr) + 1:]


def test_latency_fault_tolerance_avoids_the_failed_broker_for_the_configured_duration(brokers):
    rec = SendRecorder()
    topic = unique("TopicLat")
    b_addr = brokers.addr("broker-b")
    # a failure counts as 30000 ms of latency → the last threshold → avoided for 1500 ms
    with _producer(brokers, rec, send_latency_fault_enable=True, latency_max=(0, 10_000),
                   not_available_duration=(0, 1500)) as p:
        # the latency fault strategy alone: no route refresh after the refused connection (which
        # would drop the unregistered broker-b from the route, issue 27)
        p._dispatcher.refresh_route = None
        for _ in range(8):
            p.send(Message(topic, b"warm"))
        assert b_addr in rec.addrs
        brokers.stop_broker("broker-b")
        before = len(rec.addrs)
        results = [p.send(Message(topic, f"m{i}".encode())) for i in range(30)]
        assert {r.message_queue.broker_name for r in results} == {"broker-a"}
        failed_at = time.monotonic()
        assert rec.addrs[before:].count(b_addr) == 1  # one failed attempt, then avoided
        item = p.fault_strategy.table.items()["broker-b"]
        assert not item.available
        # once the duration has passed broker-b is tried again (once), then avoided again
        wait_until(lambda: item.available, timeout_s=5, what="broker-b available again")
        assert time.monotonic() - failed_at >= 1.0
        before = len(rec.addrs)
        results = [p.send(Message(topic, f"n{i}".encode())) for i in range(30)]
        assert {r.message_queue.broker_name for r in results} == {"broker-a"}
        assert rec.addrs[before:].count(b_addr) == 1


def test_not_available_duration_tables():
    s = MQFaultStrategy(True)
    assert [s.compute_not_available(x) for x in (0, 49, 50, 549, 550, 999, 1000, 2000, 3000, 15000, 30000)] == \
        [0, 0, 0, 0, 30000, 30000, 60000, 120000, 180000, 600000, 600000]
    s.update_fault_item("slow", 700, False)
    s.update_fault_item("fast", 20, False)
    assert not s.table.is_available("slow") and s.table.is_available("fast")
    assert s.table.pick_one_at_least() == "fast"  # better half: available, lower latency
    off = MQFaultStrategy(False)
    off.update_fault_item("x", 30000, True)
    assert off.table.items() == {}
