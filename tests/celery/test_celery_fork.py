"""Prefork: a pool process forked from a worker whose connection already consumes a queue makes its
own queue consumer and never uses nor closes the parent's (Celery collects the connections a child
inherited after the fork; the transport's consumers are held in the SDK's per-process cache)."""

from __future__ import annotations

import json
import os
import select
import signal
import traceback
import uuid

import kombu
import pytest
from celery_workers import isolated_options

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")


def drain(conn: kombu.Connection, queue: kombu.Queue, want: int) -> list:
    got: list = []
    with kombu.Consumer(conn, [queue], callbacks=[lambda body, msg: (got.append(body), msg.ack())]):
        while len(got) < want:
            conn.drain_events(timeout=10)
    return got


def run_child(fn) -> dict:
    """``fn()`` in an ``os.fork()`` child, its JSON answer; a child that does not answer in 60 s is
    killed."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            try:
                answer = fn()
            except BaseException:  # noqa: BLE001 - reported to the parent
                answer = {"error": traceback.format_exc()}
            os.write(w, json.dumps(answer).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        if not select.select([fh], [], [], 60)[0]:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child did not answer in 60 s")
        answer = fh.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, answer
    return json.loads(answer)


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

        answer = run_child(child)
        assert "error" not in answer, answer["error"]
        assert answer == {"inherited_closed": False, "own": True, "made_here": True}
        # the parent's consumer still works: it was neither closed nor unregistered by the child
        assert not parent_qc.closed
        producer.publish({"n": 3}, routing_key=queue.name, serializer="json")
        assert drain(parent, queue, 1) == [{"n": 3}]
    finally:
        parent.release()
