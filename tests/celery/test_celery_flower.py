"""Flower (PyPI ``flower``) against a ``rocketmq://`` broker: its HTTP API lists a real worker
and a task that worker ran (issue 26, item 4)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
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
from rocketmq_broker.embedded import free_fixed_port

from tests.conftest import wait_until

pytest.importorskip("flower", reason="flower cannot be imported (the dev extra installs it)", exc_type=ImportError)


def get_json(url: str):
    """The JSON body of ``GET url``, or None while Flower does not answer (yet)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return json.loads(resp.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
        return None


def test_flower_api_lists_the_worker_and_its_task(rocketmq_cluster, tmp_path):
    broker = f"rocketmq://{rocketmq_cluster.namesrv_addr}"
    options = isolated_options()
    env = dict(worker_env(broker, "rpc://", tmp_path, options), FLOWER_UNAUTHENTICATED_API="true")
    app = make_app(broker, "rpc://", str(tmp_path), options, define_tasks=False)
    port = free_fixed_port()
    api = f"http://127.0.0.1:{port}/api"
    log_path = tmp_path / "flower.log"
    with open(log_path, "wb") as log:
        flower = subprocess.Popen([sys.executable, "-m", "celery", "-A", "celery_worker_app", "flower",
                                   "--address=127.0.0.1", f"--port={port}", "--logging=info"],
                                  cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def flower_wait(cond, timeout_s: float, what: str) -> None:
        def alive_and(cond=cond):
            if flower.poll() is not None:
                raise AssertionError(f"flower exited ({flower.returncode}):\n{log_path.read_text(errors='replace')}")
            return cond()
        try:
            wait_until(alive_and, timeout_s, what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nflower's log:\n{log_path.read_text(errors='replace')[-3000:]}") from None
    try:
        with running_worker(env, tmp_path, "-P", "threads", "-c", "2", "-E") as worker:
            wait_ready(app, worker)
            # /api/workers?refresh=1 asks the workers through the broker (inspect broadcast + replies)
            flower_wait(lambda: worker.name in (get_json(f"{api}/workers?refresh=1") or {}), 60,
                        f"{worker.name} in Flower's /api/workers")
            result = RemoteTask(app, "add").delay(2, 3)
            assert result.get(timeout=30) == 5
            # /api/tasks comes from the worker's task events Flower consumes from the broker
            flower_wait(lambda: (get_json(f"{api}/tasks") or {}).get(result.id, {}).get("state") == "SUCCESS", 30,
                        f"task {result.id} SUCCESS in Flower's /api/tasks")
            task = get_json(f"{api}/tasks")[result.id]
            assert task["name"] == "worker_app.add"
            assert task["worker"] == worker.name
            assert task["result"] == "5"
    finally:
        flower.terminate()
        try:
            flower.wait(20)
        except subprocess.TimeoutExpired:
            flower.kill()
            flower.wait(10)
        close_app(app)
