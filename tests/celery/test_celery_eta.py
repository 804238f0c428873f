"""Celery ETA / countdown tasks with a real ``celery worker`` (threads pool) on a reference broker
answering as RocketMQ 5.3.3 and as 4.9.8.

On 5.3.3 an ETA task is a timer message: until it is due it is in the broker (the queue's topic
holds nothing, the worker has nothing scheduled or reserved), then it runs once, not before its
ETA; revoking it while it waits still works. On 4.9.8 the worker receives it at once and keeps it
until due (Celery's own ETA handling), and it runs once, not before its ETA."""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid

import kombu
import pytest
from celery.exceptions import TaskRevokedError
from celery_worker_app import make_app
from celery_workers import RemoteTask, close_app, isolated_options, running_worker, wait_ready, worker_env
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.integrations.celery.eta import task_eta_ms

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


def _task_message(eta: str | None) -> dict:
    return {"headers": {"task": "worker_app.stamp", "id": str(uuid.uuid4()), "eta": eta}}


def test_task_eta_ms_reads_aware_task_etas_only():
    at = dt.datetime(2026, 11, 28, 12, 0, 0, 250000, tzinfo=dt.UTC)
    assert task_eta_ms(_task_message(at.isoformat())) == int(at.timestamp() * 1000)
    assert task_eta_ms(_task_message(at.astimezone(dt.timezone(dt.timedelta(hours=8))).isoformat())) == \
        int(at.timestamp() * 1000)
    assert task_eta_ms(_task_message(at.replace(tzinfo=None).isoformat())) is None   # naive: the worker's zone
    assert task_eta_ms(_task_message(None)) is None
    assert task_eta_ms(_task_message("not a time")) is None
    assert task_eta_ms({"headers": {"eta": at.isoformat()}}) is None                 # not a Celery task
    assert task_eta_ms({"body": "x"}) is None


def test_eta_beyond_the_brokers_timer_maximum_or_naive_is_sent_at_once(caplog):
    """A broker with a smaller ``timerMaxDelaySec`` refuses such timers (MESSAGE_ILLEGAL): the
    task is sent at once (the worker keeps it, as on 4.x), with one WARNING per topic; a task
    within the maximum is a timer; a naive ETA is sent at once."""
    config = {"broker_version": "5.3.3", "timer_max_delay_sec": 10}
    with start_dev_cluster(in_process=True, broker_config=config) as cluster, \
            kombu.Connection(f"rocketmq://{cluster.namesrv_addr}", transport_options=isolated_options()) as conn, \
            AdminClient(cluster.namesrv_addr) as admin:
        queue = kombu.Queue("eta")
        producer = kombu.Producer(conn.default_channel)
        now = dt.datetime.now(dt.UTC)

        def send(eta: dt.datetime) -> None:
            producer.publish({"eta": eta.isoformat()}, routing_key="eta", declare=[queue], serializer="json",
                             headers=_task_message(eta.isoformat())["headers"])

        with caplog.at_level(logging.WARNING, "rocketmq_sdk.integrations.celery"):
            send(now + dt.timedelta(seconds=3))             # within the maximum: waits in the broker
            send(now + dt.timedelta(seconds=30))            # refused as a timer: sent at once
            send(now + dt.timedelta(seconds=60))            # at once, without asking the broker again
            send((now + dt.timedelta(seconds=3)).replace(tzinfo=None))   # naive: at once
        topic = conn.transport.broker_client.naming.queue_topic("eta")

        def stored() -> int:
            return sum(q.max_offset for q in admin.topic_status(topic))

        assert stored() == 3
        refused = [r for r in caplog.records if "refused an ETA task" in r.getMessage()]
        assert len(refused) == 1, caplog.text
        deadline = time.monotonic() + 15
        while stored() < 4:
            assert time.monotonic() < deadline, "the timer task was never delivered"
            time.sleep(0.1)
        assert time.time() >= now.timestamp() + 3
