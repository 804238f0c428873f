"""Fixtures of the consumer tests: one in-process reference cluster per module (all delay
levels 1 s so redeliveries come quickly) and a producer."""

from __future__ import annotations

import pytest
from rocketmq_sdk import Producer

from .helpers import unique

embedded = pytest.importorskip("rocketmq_broker.embedded")


@pytest.fixture(scope="module")
def cluster():
    levels = " ".join(["1s"] * 18)
    with embedded.start_dev_cluster(in_process=True, broker_config={"message_delay_level": levels}) as c:
        yield c


@pytest.fixture
def producer(cluster):
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        yield p
