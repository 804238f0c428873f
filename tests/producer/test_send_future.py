"""``SendFuture`` (the future of a Task-free ``send_async``) behaves as a
``concurrent.futures.Future`` completed by ``set_running_or_notify_cancel`` + ``set_result`` /
``set_exception``, and frees its in-flight slot exactly once, before the done callbacks: with
``Future``'s CPython internals on the tested versions (3.11-3.13), and with the public methods
only (the fallback of any other interpreter or version) — every behaviour test runs both."""

from __future__ import annotations

import concurrent.futures
import sys
import threading

import pytest
from rocketmq_sdk.producer import async_send
from rocketmq_sdk.producer.async_send import InFlight, SendFuture


@pytest.fixture(autouse=True, params=["internals", "public"])
def future_mode(request, monkeypatch):
    if request.param == "public":
        monkeypatch.setattr(async_send, "FUTURE_INTERNALS", False)
    elif not async_send.FUTURE_INTERNALS:
        pytest.skip(f"Python {sys.version_info[:2]}: the Future internals are not used here")
    return request.param


def test_the_internals_are_used_exactly_on_the_tested_cpython_versions():
    cpython = sys.implementation.name == "cpython"
    assert async_send._future_internals_usable() is (cpython and sys.version_info[:2] in ((3, 11), (3, 12), (3, 13)))
    assert not async_send._future_internals_usable((3, 14))  # untested: the public methods
    assert not async_send._future_internals_usable((3, 10))
    assert async_send._future_internals_usable((3, 13)) is cpython


def _future() -> tuple[SendFuture, InFlight, list]:
    slots = InFlight(10)
    assert slots.acquire(0)
    fut = SendFuture(slots)
    seen: list = []
    fut.add_done_callback(lambda f: seen.append((slots.async_count, f.cancelled())))
    return fut, slots, seen


def test_finish_with_a_result_or_an_error():
    fut, slots, seen = _future()
    fut.finish("result")
    assert fut.done() and not fut.running() and fut.result(0) == "result" and fut.exception(0) is None
    assert seen == [(0, False)] and slots.total == 0 and slots.idle.is_set()
    fut.finish("again")  # a second completion is ignored, nothing released twice
    assert fut.result(0) == "result" and slots.async_count == 0

    fut, slots, seen = _future()
    error = RuntimeError("boom")
    fut.finish(None, error)
    assert fut.exception(0) is error and seen == [(0, False)]
    with pytest.raises(RuntimeError, match="boom"):
        fut.result(0)


def test_cancel_frees_the_slot_at_once_and_a_late_answer_is_dropped():
    fut, slots, seen = _future()
    assert fut.cancel() and fut.cancelled()
    assert seen == [(0, True)] and slots.async_count == 0
    fut.finish("late")
    assert fut.cancelled() and seen == [(0, True)] and slots.async_count == 0
    with pytest.raises(concurrent.futures.CancelledError):
        fut.result(0)


@pytest.mark.parametrize("outcome", ["result", "error", "cancel"])
def test_waiters_of_wait_and_as_completed_wake_up(outcome):
    fut, _slots, _seen = _future()
    started = threading.Event()
    box: dict = {}

    def waiter() -> None:
        started.set()
        box["wait"] = concurrent.futures.wait([fut], timeout=10)
        box["as_completed"] = list(concurrent.futures.as_completed([fut], timeout=10))

    t = threading.Thread(target=waiter)
    t.start()
    assert started.wait(5)
    if outcome == "result":
        fut.finish(1)
    elif outcome == "error":
        fut.finish(None, ValueError("x"))
    else:
        fut.cancel()
        fut.finish()  # what AsyncSend does when it finds its future cancelled
    t.join(10)
    assert not t.is_alive()
    assert box["wait"].done == {fut} and box["as_completed"] == [fut]


def test_result_wakes_a_blocked_caller():
    fut, _slots, _seen = _future()
    box: list = []
    t = threading.Thread(target=lambda: box.append(fut.result(timeout=10)))
    t.start()
    fut.finish("answer")
    t.join(10)
    assert box == ["answer"]


def test_in_flight_bounds_async_and_queued_oneway_sends_apart():
    slots = InFlight(1, oneway_limit=2)
    assert slots.enter(0) and slots.enter(0) and not slots.enter(0)  # two oneway queued: full
    assert slots.acquire(0) and not slots.acquire(0)  # the async bound is its own
    assert slots.total == 3 and not slots.idle.is_set()
    box: list = []
    t = threading.Thread(target=lambda: box.append(slots.enter(10)))
    t.start()
    slots.leave()  # a queued oneway send was written: the waiting sender gets its slot
    t.join(10)
    assert box == [True] and slots.total == 3
    slots.release()
    slots.leave()
    slots.leave()
    assert slots.total == 0 and slots.idle.is_set()
    with pytest.raises(ValueError):
        slots.leave()


def test_result_with_a_timeout_times_out_then_completes(future_mode):
    fut, _slots, _seen = _future()
    with pytest.raises(concurrent.futures.TimeoutError):
        fut.result(0.01)
    with pytest.raises(concurrent.futures.TimeoutError):
        fut.result(0)  # a zero timeout polls
    if future_mode == "internals":
        assert fut._condition._waiters is not None and not fut._condition._waiters  # timed-out waiters left
    fut.finish("late")
    assert fut.result(0) == "late"


def test_many_threads_waiting_on_one_future_all_wake():
    fut, _slots, _seen = _future()
    results: list = []
    started = threading.Barrier(9)

    def waiter():
        started.wait(5)
        results.append(fut.result(5))

    threads = [threading.Thread(target=waiter) for _ in range(8)]
    for t in threads:
        t.start()
    started.wait(5)
    fut.finish("r")
    for t in threads:
        t.join(5)
    assert results == ["r"] * 8


@pytest.mark.parametrize("future_mode", ["internals"], indirect=True)  # the fallback keeps Future's condition
def test_the_condition_is_light(future_mode):
    """A SendFuture holds no threading.Condition (eight GC-tracked objects per future)."""
    fut, _slots, _seen = _future()
    assert not isinstance(fut._condition, threading.Condition)
    assert not hasattr(fut._condition, "__dict__")
    assert fut._condition._waiters is None  # made only when someone waits
