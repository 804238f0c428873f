"""Fixtures of the producer tests: an in-process reference cluster and polling helpers."""

from __future__ import annotations

import itertools
import time

import pytest

from tests.conftest import wait_until  # noqa: F401 - shared with the producer tests

embedded = pytest.importorskip("rocketmq_broker.embedded")

_names = itertools.count()


def unique(prefix: str) -> str:
    """A name no other test uses (topics and groups persist in the module's broker)."""
    return f"{prefix}_{next(_names)}_{int(time.time() * 1000) % 100000}"



def stored_count(broker, topic: str, queues: int = 8) -> int:
    """Messages of ``topic`` in ``broker``'s consume queues."""
    return sum(broker.store.get_max_offset_in_queue(topic, q) for q in range(queues))


@pytest.fixture(scope="module")
def cluster():
    with embedded.start_dev_cluster(in_process=True) as c:
        yield c
