"""ConsumePool (the concurrent consumer's listener threads): FIFO order, a thread started only
when none is idle, up to ``max_workers`` calls at once, and ThreadPoolExecutor's shutdown
(queued calls dropped, running ones waited for)."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from rocketmq_sdk.consumer.consume_pool import ConsumePool

pytestmark = pytest.mark.timeout(30)


def wait_for(cond, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.001)


@pytest.fixture
def pools():
    made: list[ConsumePool] = []

    def make(n: int) -> ConsumePool:
        pool = ConsumePool(n, "test-pool")
        made.append(pool)
        return pool

    yield make
    for pool in made:
        pool.shutdown(5)


def test_one_thread_runs_calls_in_submission_order(pools):
    pool = pools(1)
    seen: list[int] = []
    for i in range(200):
        assert pool.submit(seen.append, i)
    wait_for(lambda: len(seen) == 200)
    assert seen == list(range(200)) and pool.thread_count == 1


def test_an_idle_thread_is_reused_before_a_new_one_starts(pools):
    pool = pools(8)
    names: list[str] = []
    for _ in range(20):  # one call at a time: the first thread is idle again at every submit
        done = threading.Event()
        pool.submit(lambda d=done: (names.append(threading.current_thread().name), d.set()))
        assert done.wait(5)
        wait_for(lambda: pool._idle == 1)
    assert set(names) == {"test-pool_0"} and pool.thread_count == 1


def test_calls_run_in_parallel_up_to_max_workers(pools):
    pool = pools(4)
    barrier = threading.Barrier(4, timeout=5)  # passes only with four calls inside at once
    passed: list[int] = []
    for i in range(8):
        pool.submit(lambda i=i: (barrier.wait(), passed.append(i)))
    wait_for(lambda: len(passed) == 8)
    assert not barrier.broken and pool.thread_count == 4


def test_a_failing_call_is_logged_and_the_thread_goes_on(pools, caplog):
    pool = pools(1)
    seen: list[int] = []

    def fail():
        raise ValueError("listener bug")

    with caplog.at_level(logging.ERROR, logger="rocketmq_sdk.consumer.consume"):
        pool.submit(fail)
        pool.submit(seen.append, 1)
        wait_for(lambda: seen == [1])
    assert "listener bug" in caplog.text and pool.thread_count == 1


def test_shutdown_drops_queued_calls_and_waits_for_running_ones(pools):
    pool = pools(1)
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []
    pool.submit(lambda: (started.set(), release.wait(5), ran.append("running")))
    pool.submit(ran.append, "queued")
    assert started.wait(5)
    assert pool.shutdown(0.05) is False  # the running call is still inside
    assert pool.submit(ran.append, "late") is False
    release.set()
    assert pool.shutdown(5) is True
    assert ran == ["running"]
    assert not any(t.is_alive() for t in pool._threads)

