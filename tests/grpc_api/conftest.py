"""Fixtures of the gRPC tests: an in-process name server + broker with the gRPC proxy in front,
and a runner for scripts driving the official RocketMQ 5.x Python client (rocketmq-python-client,
installed by ``make test`` into .venv/rmq5 because its import name ``rocketmq`` is also the C++
client's): each script runs in a subprocess with that directory on PYTHONPATH."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import pytest

pytest.importorskip("grpc", reason="the grpc extra (grpcio, protobuf) is not installed")

from rocketmq_broker import embedded  # noqa: E402
from rocketmq_broker.broker.controller import BrokerController  # noqa: E402
from rocketmq_broker.proxy import GrpcProxy  # noqa: E402

from tests.broker.conftest import server_process  # noqa: E402,F401 - the dev command's test

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RMQ5_DIR = os.path.join(ROOT, ".venv", "rmq5")
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "official")


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def grpc_cluster():
    """(cluster, proxy): a 5.x broker (POP, RECALL_MESSAGE enabled) checking transactions every
    second for half messages older than 1 s."""
    config = {"transaction_check_interval": 1000, "transaction_time_out": 1000, "broker_version": "5.3.3",
              "recall_message_enable": True}
    with embedded.start_dev_cluster(in_process=True, broker_config=config) as c:
        proxy = GrpcProxy(c.namesrv_addr)
        proxy.start()
        try:
            yield c, proxy
        finally:
            proxy.stop()


@pytest.fixture(scope="module")
def local_proxy(grpc_cluster):
    """(cluster, broker, proxy): a local-mode proxy on the in-process broker's loop."""
    cluster, _ = grpc_cluster
    broker = next(s for s in cluster._servers if isinstance(s, BrokerController))
    proxy = GrpcProxy(cluster.namesrv_addr, local_broker=(broker.server, broker.config.broker_addr))
    asyncio.run_coroutine_threadsafe(proxy.serve(), cluster._loop).result(20)
    try:
        yield cluster, broker, proxy
    finally:
        asyncio.run_coroutine_threadsafe(proxy.aclose(), cluster._loop).result(20)


def official_client_available() -> bool:
    return os.path.isdir(os.path.join(RMQ5_DIR, "rocketmq", "v5"))


@pytest.fixture
def official():
    """``official(script, *args)`` -> the script's JSON lines (a list of dicts), run with the
    official 5.x client; skips (one line) when .venv/rmq5 is missing."""
    if not official_client_available():
        pytest.skip("the official 5.x client is not in .venv/rmq5 (make test installs it)")
    procs: list[subprocess.Popen] = []

    def start(script: str, *args: str) -> subprocess.Popen:
        env = dict(os.environ, PYTHONPATH=RMQ5_DIR)
        p = subprocess.Popen([sys.executable, os.path.join(SCRIPTS, script), *args], env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=SCRIPTS)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def finish(p: subprocess.Popen, timeout_s: float = 90.0) -> list[dict]:
    """Close the script's stdin, wait for it, and return its JSON lines (fails on a non-zero exit)."""
    out, err = p.communicate(timeout=timeout_s)
    assert p.returncode == 0, f"official client script failed ({p.returncode}):\n{err[-4000:]}"
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def read_line(p: subprocess.Popen) -> dict:
    """The script's next JSON line (the script flushes each; a dead script fails the test)."""
    while True:
        line = p.stdout.readline()
        if not line:
            raise AssertionError(f"official client script ended early: {p.stderr.read()[-4000:]}")
        if line.startswith("{"):
            return json.loads(line)
