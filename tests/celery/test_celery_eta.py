"""Celery ETA / countdown tasks with a real ``celery worker`` (threads pool) on a reference broker
answering as RocketMQ 5.3.3 and as 4.9.8.

On 5.3.3 an ETA task is a timer message: until it is due it is in the broker (the queue's topic
holds nothing, the worker has nothing scheduled or reserved), then it runs once, not before its
ETA; revoking it while it waits still works. On 4.9.8 the worker receives it at once and keeps it
until due (Celery's own ETA handling), and it runs once, not before its ETA."""

from __future__ import annotations

import time

import pytest
from celery.exceptions import TaskRevokedError
from celery_worker_app import make_app
from celery_workers import RemoteTask, close_app, isolated_options, running_worker, wait_ready, worker_env
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk.admin import AdminClient

pytest.importorskip("sqlalchemy")

COUNTDOWN_S = 4.0
#: a 5.x broker delivers a timer within one precision step (1 s) after it is due; the rest is the
#: worker's reaction on a loaded 2-core machine
LATE_S = 6.0


@pytest.fixture(scope="module", params=["5.3.3", "4.9.8"])
def app(request, tmp_path_factory):
    version = request.param
    marks = tmp_path_factory.mktemp(f"eta-{version}")
    with start_dev_cluster(broker_config={"broker_version": version}) as cluster:
        broker = f"rocketmq://{cluster.namesrv_addr}"
        backend = f"db+sqlite:///{marks / 'results.db'}"
        options = isolated_options()
        app = make_app(broker, backend, str(marks), options, define_tasks=False)
        admin = AdminClient(cluster.namesrv_addr)
        try:
            with running_worker(worker_env(broker, backend, marks, options), marks, "-P", "threads",
                                "-c", "2") as worker:
                wait_ready(app, worker)
                app.test_worker, app.test_marks, app.test_version = worker, marks, version
                app.test_topic = f"{options['topic_prefix']}celery"
                app.test_admin = admin
                yield app
        finally:
            admin.close()
            close_app(app)


def _stored(app) -> int:
    """Messages stored in the default queue's topic."""
    return sum(q.max_offset for q in app.test_admin.topic_status(app.test_topic))


def _held_by_worker(app) -> int:
    """Tasks the worker has scheduled (ETA) or reserved, by ``celery inspect``."""
    inspect = app.control.inspect(destination=[app.test_worker.name], timeout=2.0)
    name = app.test_worker.name
    return len((inspect.scheduled() or {}).get(name, [])) + len((inspect.reserved() or {}).get(name, []))


def _runs(app, key: str) -> list[float]:
    return sorted(float(p.read_text()) for p in app.test_marks.glob(f"{key}.ran.*"))


def test_countdown_task_waits_in_the_broker_on_5x_in_the_worker_on_4x_and_runs_once_when_due(app):
    stamp = RemoteTask(app, "stamp")
    stamp.delay("warm-up").get(timeout=30)     # the queue's topic exists and the worker consumes
    before = _stored(app)
    key = f"countdown-{app.test_version}"
    sent = time.time()
    r = stamp.apply_async((key,), countdown=COUNTDOWN_S)
    due = sent + COUNTDOWN_S
    held = []
    while time.time() < due - 1.5:
        held.append((_stored(app) - before, _held_by_worker(app)))
    assert held, "the machine is too slow to look before the task is due"
    if app.test_version == "5.3.3":
        # in the broker's timer wheel: not in the queue's topic, not in the worker
        assert set(held) == {(0, 0)}, held
    else:
        # stored at once, received at once and kept by the worker until due
        assert held[-1] == (1, 1), held
    ran = r.get(timeout=COUNTDOWN_S + 30)
    assert due <= ran <= due + LATE_S, (ran - due)
    assert _runs(app, key) == [ran]
    assert _stored(app) - before == 1


def test_eta_task_revoked_while_waiting_never_runs(app):
    stamp = RemoteTask(app, "stamp")
    stamp.delay("warm-up-revoke").get(timeout=30)
    key = f"revoked-{app.test_version}"
    r = stamp.apply_async((key,), countdown=COUNTDOWN_S)
    r.revoke()
    with pytest.raises(TaskRevokedError):
        r.get(timeout=COUNTDOWN_S + 30)
    assert _runs(app, key) == []
