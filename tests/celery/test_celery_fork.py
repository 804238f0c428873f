"""Prefork: a pool process forked from a worker whose connection already consumes a queue makes its
own queue consumer and never uses nor closes the parent's (Celery collects the connections a child
inherited after the fork; the transport's consumers are held in the SDK's per-process cache)."""

from __future__ import annotations

import uuid

import kombu
from celery_workers import isolated_options

from tests.forking import in_child, needs_fork

pytestmark = needs_fork


def drain(conn: kombu.Connection, queue: kombu.Queue, want: int) -> list:
    got: list = []
    with kombu.Consumer(conn, [queue], callbacks=[lambda body, msg: (got.append(body), msg.ack())]):
        while len(got) < want:
            conn.drain_events(timeout=10)
    return got


def test_a_forked_child_makes_its_own_queue_consumer_and_never_closes_the_parents(rocketmq_cluster):
    url = f"rocketmq://{rocketmq_cluster.namesrv_addr}"
    options = isolated_options(queue_nums=1, commit_interval=200)
    queue = kombu.Queue(f"fork_{uuid.uuid4().hex[:8]}")
    parent = kombu.Connection(url, transport_options=options)
    try:
        producer = kombu.Producer(parent.default_channel)
        producer.publish({"n": 1}, routing_key=queue.name, declare=[queue], serializer="json")
        assert drain(parent, queue, 1) == [{"n": 1}]
        parent_qc = parent.transport.broker_client.running_consumer(queue.name)
        assert parent_qc is not None
        # the child's connection joins the queue's group, so the queue is rebalanced away and back;
        # a queue changes hands from its persisted offset (as in RocketMQ), so an ack persisted only
        # by the next commit_interval tick could come back as a duplicate of {"n": 1}: persist it
        parent_qc.commit_now()

        def child() -> dict:
            parent.collect()  # what Celery does with the pool connection a child inherits
            inherited_closed = parent_qc.closed
            conn = kombu.Connection(url, transport_options=options)
            try:
                conn.connect()
                mine = conn.transport.broker_client.consumer(queue.name)
                return {"inherited_closed": inherited_closed, "own": mine is not parent_qc,
                        "made_here": mine.lite.running and not mine.closed}
            finally:
                conn.release()

        assert in_child(child) == {"inherited_closed": False, "own": True, "made_here": True}
        # the parent's consumer still works: it was neither closed nor unregistered by the child
        assert not parent_qc.closed
        producer.publish({"n": 3}, routing_key=queue.name, serializer="json")
        assert drain(parent, queue, 1) == [{"n": 3}]
    finally:
        parent.release()
