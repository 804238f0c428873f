"""Fixtures for the RocketMQ 5.x tests: an in-process name server + broker answering as 5.3.3
(POP, timers), with a fast revive interval, and a producer on it."""

from __future__ import annotations

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import Producer

from tests.broker.conftest import SyncClient


@pytest.fixture
def v5_cluster(tmp_path):
    c = start_dev_cluster(str(tmp_path / "store"), in_process=True,
                          broker_config={"broker_version": "5.3.3", "revive_interval": 100,
                                         "pop_from_retry_probability": 0})
    yield c
    c.stop()


@pytest.fixture
def v5_client():
    c = SyncClient()
    yield c
    c.close()


@pytest.fixture
def v5_producer(v5_cluster):
    p = Producer("pop_test_producer", namesrv_addr=v5_cluster.namesrv_addr)
    p.start()
    yield p
    p.shutdown()


def broker_of(cluster):
    """The in-process ``BrokerController`` of a ``start_dev_cluster(in_process=True)`` cluster."""
    from rocketmq_broker.broker.controller import BrokerController
    return next(s for s in cluster._servers if isinstance(s, BrokerController))


#: an explicitly 4.9.8 broker (``make test-rmq5`` makes 5.3.3 the default)
V4 = {"broker_version": "4.9.8"}


def recording_listener():
    """``(bodies, listener)``: a concurrent listener recording the bodies it consumes (thread-safe)
    and answering CONSUME_SUCCESS."""
    import threading

    from rocketmq_sdk import ConsumeConcurrentlyStatus
    bodies: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs, ctx):
        with lock:
            bodies.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    return bodies, listener
