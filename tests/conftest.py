"""Shared pytest configuration.

The golden data recorded from Apache RocketMQ 4.9.8 lives in ``tests/data/captures`` (described
in ``tests/data/README.md``); the suite reads nothing outside the repository.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

# The suite runs the SDK's and the brokers' loops on asyncio's loop (what users without uvloop
# get) unless $ROCKETMQ_EVENT_LOOP picks another: `ROCKETMQ_EVENT_LOOP=uvloop make test`.
os.environ.setdefault("ROCKETMQ_EVENT_LOOP", "asyncio")
if os.environ["ROCKETMQ_EVENT_LOOP"].strip().lower() == "uvloop":
    # the whole suite on uvloop: the SDK's and brokers' loops follow $ROCKETMQ_EVENT_LOOP, and the
    # tests' own asyncio.run() loops (remoting, TLS, protocol tests) follow this policy
    import uvloop

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA = REPO_ROOT / "tests" / "data"
CAPTURES = DATA / "captures"
#: every frame capture in ``tests/data/captures`` (one remoting frame a line), sorted; tests
#: parametrized over "every capture" use this list
CAPTURE_NAMES = sorted(p.stem for p in CAPTURES.glob("*.jsonl"))


def load_capture(name: str) -> list[dict]:
    """Return the frames of ``tests/data/captures/<name>.jsonl`` as dicts (line format in
    ``tests/data/README.md``); FileNotFoundError when there is no such capture."""
    path = CAPTURES / f"{name}.jsonl"
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def env_broker_config() -> dict:
    """``{"broker_version": $ROCKETMQ_BROKER_VERSION}`` when the variable is set (make test's 5.x
    pass, make test-rmq5), else ``{}``: for brokers started as a child process
    (``start_dev_cluster()`` without ``in_process``), whose ``dev --broker-version`` defaults to
    4.9.8 whatever the environment says (in-process brokers read the variable themselves)."""
    version = os.environ.get("ROCKETMQ_BROKER_VERSION")
    return {"broker_version": version} if version else {}


def wait_until(cond: Callable[[], object], timeout_s: float = 20.0, what: str = "condition") -> None:
    """Poll ``cond`` every 20 ms until it is truthy; AssertionError naming ``what`` after
    ``timeout_s`` seconds (the suite's one way to wait: never a bare sleep)."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def run_async(coro, timeout: float = 15.0):
    """``asyncio.run(coro)`` in a new event loop, cancelled after ``timeout`` seconds
    (TimeoutError); returns the coroutine's result."""
    async def guarded():
        async with asyncio.timeout(timeout):
            return await coro
    return asyncio.run(guarded())


async def wait_until_async(cond: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    """:func:`wait_until` inside a running event loop: poll ``cond`` every 5 ms (yielding to the
    loop) until it is truthy; AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


class Received:
    """A concurrent message listener for ``PushConsumer.register_message_listener`` that keeps
    every message it is handed in ``messages`` (in arrival order, appended under a lock) and
    answers CONSUME_SUCCESS."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.messages: list = []

    def __call__(self, msgs, ctx):
        from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus

        with self._lock:
            self.messages.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def bodies(self) -> list[bytes]:
        """The bodies received so far, in arrival order."""
        with self._lock:
            return [m.body for m in self.messages]


@pytest.fixture
def spans():
    """An ``InMemorySpanExporter`` behind a private ``TracerProvider`` that ``trace.get_tracer``
    and ``trace.get_tracer_provider`` answer for this test only (the global provider can be set
    once per process); skips when the optional opentelemetry packages are not installed."""
    pytest.importorskip("opentelemetry.sdk", reason="the optional opentelemetry packages are not installed")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    mp = pytest.MonkeyPatch()
    mp.setattr(trace, "get_tracer", lambda name, *a, **k: provider.get_tracer(name, *a, **k))
    mp.setattr(trace, "get_tracer_provider", lambda: provider)
    yield exporter
    mp.undo()
    provider.shutdown()
