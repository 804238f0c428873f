"""SDK-side helpers for the interop tests: skip while the public API is missing, and a recording
listener with deadline-bounded waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from .cpp_client import CppConsumer

PROBE = CppConsumer.PROBE_KEY_PREFIX


def sdk_api() -> Any:
    """The ``rocketmq_sdk`` module once its public API exists; otherwise skip the test."""
    try:
        import rocketmq_sdk as api

        for name in ("Producer", "PushConsumer", "Message", "ConsumeConcurrentlyStatus"):
            getattr(api, name)
    except (ImportError, AttributeError) as exc:
        pytest.skip(f"rocketmq_sdk public API not available yet: {exc}")
    return api


class Collector:
    """An SDK message listener that records every message and answers CONSUME_SUCCESS."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.messages: list = []
        self.cond = threading.Condition()

    def __call__(self, msgs: list, _context: Any) -> Any:
        with self.cond:
            self.messages.extend(msgs)
            self.cond.notify_all()
        return self.api.ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def wait(self, predicate: Callable[[list], bool], timeout_s: float) -> bool:
        """Wait until ``predicate(messages)`` holds; False after ``timeout_s`` seconds."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while not predicate(self.messages):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.cond.wait(remaining)
            return True

    def real(self) -> list:
        """Messages received so far, probes excluded."""
        with self.cond:
            return [m for m in self.messages if not any(k.startswith(PROBE) for k in m.keys)]

    def wait_real(self, n: int, timeout_s: float) -> list:
        """Wait for ``n`` non-probe messages; fail the test with what arrived on timeout."""
        if not self.wait(lambda _ms: len(self.real()) >= n, timeout_s):
            pytest.fail(f"SDK consumer got {len(self.real())} of {n} messages in {timeout_s} s: {self.real()}")
        return self.real()


def start_sdk_consumer(api: Any, namesrv: str, topic: str, group: str, expression: str, collector: Collector,
                       probe: Callable[[str], None], timeout_s: float = 30.0) -> Any:
    """Start an SDK ``PushConsumer`` and return it once it consumed one probe (``probe(key)``
    sends a message with keys ``key`` the expression accepts)."""
    consumer = api.PushConsumer(group, namesrv_addr=namesrv)
    consumer.subscribe(topic, expression)
    consumer.register_message_listener(collector)
    consumer.start()
    deadline = time.monotonic() + timeout_s
    n = 0
    while True:
        probe(f"{PROBE}{n}")
        n += 1
        if collector.wait(lambda ms: any(k.startswith(PROBE) for m in ms for k in m.keys), 1.0):
            return consumer
        if time.monotonic() > deadline:
            consumer.shutdown()
            pytest.fail(f"SDK consumer consumed none of {n} probes in {timeout_s} s")
