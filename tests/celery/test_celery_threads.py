"""A real worker with the threads pool on the RocketMQ transport, results in a database
(SQLAlchemy + SQLite): tasks, retries, chain, group, chord, revoke, task events (``-E``),
``inspect active``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from celery import chain, chord, group
from celery.exceptions import TaskRevokedError
from celery_worker_app import make_app
from celery_workers import RemoteTask, close_app, isolated_options, running_worker, wait_ready, worker_env

pytest.importorskip("sqlalchemy")


@pytest.fixture(scope="module")
def app(rocketmq_cluster, tmp_path_factory):
    marks = tmp_path_factory.mktemp("marks")
    broker = f"rocketmq://{rocketmq_cluster.namesrv_addr}"
    backend = f"db+sqlite:///{marks / 'results.db'}"
    options = isolated_options()
    app = make_app(broker, backend, str(marks), options, define_tasks=False)
    with running_worker(worker_env(broker, backend, marks, options), marks, "-P", "threads", "-c", "4",
                        "-E") as worker:
        wait_ready(app, worker)
        app.test_worker, app.test_marks = worker, marks
        yield app
    close_app(app)


def test_task_result(app):
    results = [RemoteTask(app, "add").delay(i, 1) for i in range(20)]
    assert [r.get(timeout=30) for r in results] == [i + 1 for i in range(20)]


def test_retry_with_countdown(app):
    assert RemoteTask(app, "flaky").delay("retry-threads", 1).get(timeout=60) == 2


def test_chain_group_chord(app):
    add, xsum = RemoteTask(app, "add"), RemoteTask(app, "xsum")
    assert chain(add.s(2, 2), add.s(4)).apply_async().get(timeout=30) == 8
    assert group(add.s(i, i) for i in range(8)).apply_async().get(timeout=30) == [2 * i for i in range(8)]
    assert chord((add.s(i, i) for i in range(8)), xsum.s()).apply_async().get(timeout=60) == 56


def test_revoke(app):
    r = RemoteTask(app, "add").apply_async((2, 2), countdown=3)
    r.revoke()
    with pytest.raises(TaskRevokedError):
        r.get(timeout=30)


def test_task_events(app):
    seen = []
    with app.connection() as conn:
        receiver = app.events.Receiver(conn, handlers={"*": seen.append})
        events = receiver.itercapture(limit=None, timeout=30, wakeup=False)
        next(events)            # the event queue is bound: a first event (worker heartbeat) came
        r = RemoteTask(app, "add").delay(3, 4)

        def succeeded() -> bool:
            return any(e.get("type") == "task-succeeded" and e.get("uuid") == r.id for e in seen)
        deadline = time.monotonic() + 30
        while not succeeded():
            assert time.monotonic() < deadline, f"no task-succeeded event for {r.id}: {seen[-5:]}"
            next(events)
    assert r.get(timeout=10) == 7
    assert {"task-received", "task-started", "task-succeeded"} <= {e["type"] for e in seen if e.get("uuid") == r.id}


def test_inspect_active(app):
    name = app.test_worker.name
    r = RemoteTask(app, "hold").delay("active")
    try:
        deadline = time.monotonic() + 30
        while True:
            active = app.control.inspect(destination=[name], timeout=2).active() or {}
            if any(t["id"] == r.id for t in active.get(name, [])):
                break
            assert time.monotonic() < deadline, f"task not reported active: {active}"
    finally:
        (Path(app.test_marks) / "active.release").touch()
    assert r.get(timeout=30) > 0
