"""Fixtures of the Celery / kombu transport tests: one embedded dev cluster (name server and
broker in a child process on free 127.0.0.1 ports) per session, kombu connections isolated per
test by a topic prefix."""

from __future__ import annotations

import pytest

pytest.importorskip("celery")
kombu = pytest.importorskip("kombu")

import rocketmq_sdk.integrations.celery  # noqa: E402,F401  - registers rocketmq://
from celery_workers import dead_addr, isolated_options  # noqa: E402
from rocketmq_broker.embedded import start_dev_cluster  # noqa: E402

from tests.conftest import env_broker_config  # noqa: E402


@pytest.fixture(scope="session")
def rocketmq_cluster():
    with start_dev_cluster(broker_config=env_broker_config() or None) as cluster:
        yield cluster


@pytest.fixture()
def connection(rocketmq_cluster):
    conn = kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}", transport_options=isolated_options())
    yield conn
    conn.release()


@pytest.fixture()
def invalid_connection():
    conn = kombu.Connection(f"rocketmq://{dead_addr()}", connect_timeout=2)
    yield conn
    conn.release()


@pytest.fixture()
def failover_connection(rocketmq_cluster):
    conn = kombu.Connection(f"rocketmq://{dead_addr()};rocketmq://{rocketmq_cluster.namesrv_addr}",
                            transport_options=isolated_options(), connect_timeout=2)
    yield conn
    conn.release()
