"""Idle client channels: a consumer connection that stops heartbeating is closed and removed
from its group after ``channelExpiredTimeout`` (Java ``ClientHousekeepingService`` scan), and
the group's remaining clients get NOTIFY_CONSUMER_IDS_CHANGED; a silent producer connection is
removed from its group and closed the same way (``ProducerManager.scanNotActiveChannel``)."""

from __future__ import annotations

import threading
import time

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode

from tests.broker.conftest import SyncClient

EXPIRE_MS = 800
GROUP = "cg_idle"
PRODUCER_GROUP = "pg_idle"


@pytest.fixture
def expiring_cluster(tmp_path):
    c = start_dev_cluster(str(tmp_path / "store"), in_process=True,
                          broker_config={"channel_expired_timeout": EXPIRE_MS, "client_channel_scan_interval": 50})
    yield c
    c.stop()


def _heartbeat(client: SyncClient, addr: str, client_id: str) -> None:
    hb = HeartbeatData(client_id, consumers=[ConsumerData(GROUP, subscriptions=[SubscriptionData.build("T", "*", 1)])])
    resp = client.invoke(addr, RequestCode.HEART_BEAT, body=hb.to_json())
    assert resp.code == ResponseCode.SUCCESS


def _producer_heartbeat(client: SyncClient, addr: str, client_id: str) -> None:
    resp = client.invoke(addr, RequestCode.HEART_BEAT, body=HeartbeatData(client_id, [PRODUCER_GROUP]).to_json())
    assert resp.code == ResponseCode.SUCCESS


def _beat_until(cond, beat, what: str, timeout_s: float = 10) -> None:
    """Call ``beat()`` (the live client's heartbeat) every 50 ms until ``cond()``."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        beat()
        time.sleep(0.05)  # heartbeat period of the live client, not a synchronisation


def _wait_closed(channel, timeout_s: float = 5) -> None:
    deadline = time.monotonic() + timeout_s
    while not channel.closed:
        assert time.monotonic() < deadline, "the broker did not close the silent connection"
        time.sleep(0.02)


def test_silent_consumer_channel_is_dropped_and_the_group_notified(expiring_cluster):
    c = expiring_cluster
    broker = c.broker
    alive, silent = SyncClient(), SyncClient()
    notifications: list[float] = []
    lock = threading.Lock()

    def on_notify(ch, cmd):
        assert cmd.ext_fields["consumerGroup"] == GROUP
        with lock:
            notifications.append(time.monotonic())

    alive.client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
    try:
        _heartbeat(alive, c.broker_addr, "client-alive")
        silent_since = time.monotonic()  # at or before the broker's last-heartbeat timestamp
        _heartbeat(silent, c.broker_addr, "client-silent")
        assert broker.consumers.groups[GROUP].client_ids() == ["client-alive", "client-silent"]
        silent_channel = silent.run(silent.client.get_channel(c.broker_addr))
        # the live client keeps heartbeating; the silent one sends nothing more
        _beat_until(lambda: broker.consumers.groups[GROUP].client_ids() == ["client-alive"],
                    lambda: _heartbeat(alive, c.broker_addr, "client-alive"), "the silent channel to be dropped")
        dropped_after = time.monotonic() - silent_since
        assert dropped_after >= EXPIRE_MS / 1000.0
        _wait_closed(silent_channel)
        deadline = time.monotonic() + 5
        while True:
            with lock:
                after_drop = [t for t in notifications if t >= silent_since + EXPIRE_MS / 1000.0]
            if after_drop:
                break
            assert time.monotonic() < deadline, "the remaining client was not notified"
            time.sleep(0.02)
        assert broker.consumers.groups[GROUP].client_ids() == ["client-alive"]  # the live one stays
    finally:
        alive.close()
        silent.close()


def test_silent_producer_channel_is_dropped_from_its_group_and_closed(expiring_cluster):
    c = expiring_cluster
    producers = c.broker.producers
    alive, silent = SyncClient(), SyncClient()
    try:
        _producer_heartbeat(alive, c.broker_addr, "producer-alive")
        silent_since = time.monotonic()
        _producer_heartbeat(silent, c.broker_addr, "producer-silent")
        silent_channel = silent.run(silent.client.get_channel(c.broker_addr))

        def client_ids() -> list[str]:
            return sorted(info.client_id for info in producers.groups.get(PRODUCER_GROUP, {}).values())

        assert client_ids() == ["producer-alive", "producer-silent"]
        _beat_until(lambda: client_ids() == ["producer-alive"],
                    lambda: _producer_heartbeat(alive, c.broker_addr, "producer-alive"),
                    "the silent producer channel to be dropped")
        assert time.monotonic() - silent_since >= EXPIRE_MS / 1000.0
        _wait_closed(silent_channel)
        # the live producer stays while it heartbeats; silent too, it goes and the group with it
        _producer_heartbeat(alive, c.broker_addr, "producer-alive")
        assert client_ids() == ["producer-alive"]
        deadline = time.monotonic() + 10
        while PRODUCER_GROUP in producers.groups:
            assert time.monotonic() < deadline, "the producer group outlived its last channel"
            time.sleep(0.02)
    finally:
        alive.close()
        silent.close()
