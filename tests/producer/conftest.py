"""Fixtures of the producer tests: an in-process reference cluster and polling helpers."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import pytest

embedded = pytest.importorskip("rocketmq_broker.embedded")

_names = itertools.count()


def unique(prefix: str) -> str:
    """A name no other test uses (topics and groups persist in the module's broker)."""
    return f"{prefix}_{next(_names)}_{int(time.time() * 1000) % 100000}"


def wait_until(cond: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.01)


def stored_count(broker, topic: str, queues: int = 8) -> int:
    """Messages of ``topic`` in ``broker``'s consume queues."""
    return sum(broker.store.get_max_offset_in_queue(topic, q) for q in range(queues))


@pytest.fixture(scope="module")
def cluster():
    with embedded.start_dev_cluster(in_process=True) as c:
        yield c
