"""When the transport hands messages over: an acknowledgement that frees prefetch room wakes a
waiting ``drain_events`` at once (not at the next arrival or polling slice); Celery task
messages past their ``expires`` reach the worker, which records them REVOKED."""

from __future__ import annotations

import threading
import time

import kombu
import pytest
from celery_workers import isolated_options


@pytest.fixture()
def conn(rocketmq_cluster):
    # a polling slice far longer than the drain timeout: only a wake-up can deliver in time
    c = kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}",
                         transport_options=isolated_options(queue_nums=1, polling_interval=60.0))
    yield c
    c.release()


def test_ack_freeing_prefetch_room_wakes_a_waiting_drain(conn):
    q = kombu.Queue("wake")
    producer = kombu.Producer(conn.default_channel)
    for body in (1, 2):
        producer.publish(body, routing_key=q.name, declare=[q], serializer="json")
    got = []
    with kombu.Consumer(conn, [q], callbacks=[lambda body, msg: got.append(msg)], prefetch_count=1):
        conn.drain_events(timeout=10)
        assert [m.payload for m in got] == [1]
        transport = conn.transport
        waiting = threading.Event()
        real_wait = transport.broker_client.waker.wait

        def wait(timeout_s):
            waiting.set()           # the drain below is blocked with message 2 buffered
            return real_wait(timeout_s)

        transport.broker_client.waker.wait = wait
        acker = threading.Thread(target=lambda: waiting.wait(10) and got[0].ack())
        acker.start()
        began = time.monotonic()
        conn.drain_events(timeout=10)
        acker.join(10)
        assert [m.payload for m in got] == [1, 2]
        assert time.monotonic() - began < 5, "the ack did not wake drain_events"


def test_celery_task_past_its_expires_reaches_the_worker_plain_ttl_message_does_not(conn):
    """A task sent with ``expires`` also gets that TTL (Celery sets ``expiration``); dropping it
    here would leave its result PENDING forever (issue 26's hanging ``test_expired``): the
    worker must see it to record REVOKED. A kombu message without Celery's header is dropped."""
    q = kombu.Queue("expired")
    producer = kombu.Producer(conn.default_channel)
    producer.publish("plain", routing_key=q.name, declare=[q], serializer="json", expiration=0.001)
    producer.publish("task", routing_key=q.name, declare=[q], serializer="json", expiration=0.001,
                     headers={"task": "t.add", "id": "1", "expires": "2000-01-01T00:00:00+00:00"})
    producer.publish("live", routing_key=q.name, declare=[q], serializer="json")
    got = []
    with kombu.Consumer(conn, [q], callbacks=[lambda body, msg: (got.append(body), msg.ack())]):
        while len(got) < 2:
            conn.drain_events(timeout=10)
    assert got == ["task", "live"]
