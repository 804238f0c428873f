"""Monitoring and operations commands against a ``rocketmq://`` broker: ``celery purge``,
``celery beat`` (its schedule reaches the queue), ``celery events --dump`` (worker and task
events of a ``-E`` worker)."""

from __future__ import annotations

import subprocess
import sys

from celery_worker_app import make_app
from celery_workers import (
    HERE,
    RemoteTask,
    close_app,
    isolated_options,
    running_worker,
    wait_ready,
    worker_env,
)

from tests.conftest import wait_until


def celery_cmd(env: dict, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "celery", "-A", "celery_worker_app", *args], cwd=HERE, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_purge_counts_and_empties_the_queue(rocketmq_cluster, tmp_path):
    broker = f"rocketmq://{rocketmq_cluster.namesrv_addr}"
    options = isolated_options()
    env = worker_env(broker, "rpc://", tmp_path, options)
    app = make_app(broker, "rpc://", str(tmp_path), options, define_tasks=False)
    try:
        for _ in range(3):
            RemoteTask(app, "add").delay(1, 2)
        out = celery_cmd(env, "purge", "-f")
        assert out.returncode == 0, out.stderr
        assert "Purged 3 messages" in out.stdout, out.stdout + out.stderr
        out = celery_cmd(env, "purge", "-f")
        assert "No messages purged" in out.stdout, out.stdout + out.stderr
    finally:
        close_app(app)


def test_beat_schedule_reaches_the_queue(rocketmq_cluster, tmp_path):
    broker = f"rocketmq://{rocketmq_cluster.namesrv_addr}"
    options = isolated_options()
    env = dict(worker_env(broker, "rpc://", tmp_path, options), CELERY_TEST_BEAT_EVERY="0.5")
    app = make_app(broker, "rpc://", str(tmp_path), options, define_tasks=False)
    beat = subprocess.Popen([sys.executable, "-m", "celery", "-A", "celery_worker_app", "beat", "-s",
                             str(tmp_path / "schedule"), "--loglevel=INFO"], cwd=HERE, env=env,
                            stdout=open(tmp_path / "beat.log", "wb"), stderr=subprocess.STDOUT)
    try:
        with app.connection_for_write() as conn:
            channel = conn.default_channel

            def queued() -> int:
                try:
                    return channel.queue_declare("celery", passive=True).message_count
                except conn.channel_errors:      # beat has not declared the queue yet
                    return 0
            wait_until(lambda: queued() >= 2, 60, "two scheduled tasks in the queue")
    finally:
        beat.terminate()
        beat.wait(20)
        close_app(app)


def test_events_dump_shows_worker_and_task_events(rocketmq_cluster, tmp_path):
    broker = f"rocketmq://{rocketmq_cluster.namesrv_addr}"
    options = isolated_options()
    env = worker_env(broker, "rpc://", tmp_path, options)
    app = make_app(broker, "rpc://", str(tmp_path), options, define_tasks=False)
    dump_log = tmp_path / "events.log"
    dump = subprocess.Popen([sys.executable, "-u", "-m", "celery", "-A", "celery_worker_app", "events", "--dump"],
                            cwd=HERE, env=env, stdout=open(dump_log, "wb"), stderr=subprocess.STDOUT)
    try:
        with running_worker(env, tmp_path, "-P", "threads", "-c", "2", "-E") as worker:
            wait_ready(app, worker)
            # celery's dumper writes "<hostname> [<time>] started: ..." (worker-online), "heartbeat: ..."
            wait_until(lambda: f"{worker.name} [" in dump_log.read_text(errors="replace"), 60,
                       "the worker's events in the dump")
            assert RemoteTask(app, "add").delay(2, 3).get(timeout=30) == 5
            wait_until(lambda: "task succeeded" in dump_log.read_text(errors="replace"), 60,
                       "task-succeeded in the dump")
        text = dump_log.read_text(errors="replace")
        assert "task received" in text and "task started" in text
    finally:
        dump.terminate()
        dump.wait(20)
        close_app(app)


def test_purge_under_a_running_worker_drops_the_queued_tasks(rocketmq_cluster, tmp_path):
    """``celery purge`` while a worker runs: the tasks waiting behind a running one never run,
    as on Redis (Celery's suite purges this way between tests, ``Manager.wait_until_idle``)."""
    broker = f"rocketmq://{rocketmq_cluster.namesrv_addr}"
    options = isolated_options(queue_nums=1)   # one message queue: the worker takes them in order
    env = worker_env(broker, "rpc://", tmp_path, options)
    app = make_app(broker, "rpc://", str(tmp_path), options, define_tasks=False)
    try:
        with running_worker(env, tmp_path, "-P", "prefork", "-c", "1") as worker:
            wait_ready(app, worker)
            RemoteTask(app, "hold").delay("h", 60.0)
            wait_until(lambda: list(tmp_path.glob("h.started.*")), 60, "the held task started")
            for _ in range(5):
                RemoteTask(app, "stamp").delay("purged")
            out = celery_cmd(env, "purge", "-f")
            assert out.returncode == 0, out.stderr
            (tmp_path / "h.release").touch()
            # sent after the purge, so taken after anything left of the queue
            assert RemoteTask(app, "add").delay(1, 2).get(timeout=60) == 3
        assert list(tmp_path.glob("purged.ran.*")) == [], out.stdout
    finally:
        close_app(app)
