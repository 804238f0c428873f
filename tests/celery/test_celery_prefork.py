"""A real prefork worker (2 processes) on the RocketMQ transport, results over ``rpc://`` (the
result messages travel over the same transport): tasks, retries with countdown, canvas,
revoke, ``celery inspect ping``."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from celery import chain, chord, group
from celery.exceptions import TaskRevokedError
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


@pytest.fixture(scope="module")
def setup(rocketmq_cluster, tmp_path_factory):
    marks = tmp_path_factory.mktemp("marks")
    broker = f"rocketmq://{rocketmq_cluster.namesrv_addr}"
    options = isolated_options()
    env = worker_env(broker, "rpc://", marks, options)
    app = make_app(broker, "rpc://", str(marks), options, define_tasks=False)
    with running_worker(env, marks, "-P", "prefork", "-c", "2") as worker:
        wait_ready(app, worker)
        yield app, worker, env, marks
    close_app(app)


def test_task_result(setup):
    app, *_ = setup
    results = [RemoteTask(app, "add").delay(i, i) for i in range(20)]
    assert [r.get(timeout=30) for r in results] == [2 * i for i in range(20)]


def test_retry_with_countdown(setup):
    app, _, _, marks = setup
    started = time.monotonic()
    r = RemoteTask(app, "flaky").delay("retry1", 2)
    assert r.get(timeout=60) == 3
    assert (marks / "retry1.attempts").read_text() == "3"
    assert time.monotonic() - started >= 2.0   # two retries, countdown 1 s each


def test_chain_and_group(setup):
    app, *_ = setup
    add = RemoteTask(app, "add")
    assert chain(add.s(1, 2), add.s(3), add.s(4)).apply_async().get(timeout=30) == 10
    assert group(add.s(i, 1) for i in range(10)).apply_async().get(timeout=30) == [i + 1 for i in range(10)]


def test_group_of_chains(setup):
    app, *_ = setup
    add = RemoteTask(app, "add")
    canvas = group(chain(add.s(i, i), add.s(1)) for i in range(5))
    assert canvas.apply_async().get(timeout=30) == [2 * i + 1 for i in range(5)]


def test_chord_needs_a_chord_backend(setup):
    # Celery's rpc:// backend refuses chords itself (test_celery_threads.py runs them on the
    # database backend)
    app, *_ = setup
    add, xsum = RemoteTask(app, "add"), RemoteTask(app, "xsum")
    with pytest.raises(NotImplementedError, match="does not support chords"):
        chord((add.s(i, i) for i in range(3)), xsum.s()).apply_async()


def test_revoke(setup):
    app, *_ = setup
    r = RemoteTask(app, "add").apply_async((1, 1), countdown=3)
    r.revoke()
    with pytest.raises(TaskRevokedError):
        r.get(timeout=30)


def test_inspect_ping_command(setup):
    _, worker, env, _ = setup
    out = subprocess.run([sys.executable, "-m", "celery", "-A", "celery_worker_app", "inspect", "ping", "-d", worker.name,
                          "--timeout", "5"], cwd=HERE, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "pong" in out.stdout and worker.name in out.stdout


def test_control_shutdown(setup):
    # last test of the module: the worker stops on a broadcast
    app, worker, _, _ = setup
    assert worker.proc.poll() is None
    app.control.shutdown(destination=[worker.name])     # no reply: the worker just stops
    worker.proc.wait(60)
    assert worker.proc.returncode == 0, worker.log()[-2000:]
