"""BatchedSubmitter: results, exceptions and cancellation cross threads like
run_coroutine_threadsafe's; a burst is started in submission order."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest
from rocketmq_sdk.exceptions import ClientStateError
from rocketmq_sdk.producer.submit import BatchedSubmitter
from rocketmq_sdk.remoting.loop import EventLoopThread


@pytest.fixture
def loop_thread():
    lt = EventLoopThread(name="submit-test")
    yield lt
    lt.stop()


def test_results_errors_and_order(loop_thread):
    sub = BatchedSubmitter(loop_thread)
    started: list[int] = []

    async def work(i: int) -> int:
        started.append(i)
        if i == 3:
            raise ValueError("three")
        await asyncio.sleep(0)
        return i * 10

    futs = [sub.submit(work(i)) for i in range(100)]
    done, _ = concurrent.futures.wait(futs, timeout=5)
    assert len(done) == 100
    assert [f.result() for i, f in enumerate(futs) if i != 3] == [i * 10 for i in range(100) if i != 3]
    with pytest.raises(ValueError, match="three"):
        futs[3].result()
    assert started == list(range(100))


def test_cancelling_the_future_cancels_the_task(loop_thread):
    sub = BatchedSubmitter(loop_thread)
    cancelled = concurrent.futures.Future()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set_result(True)
            raise

    started = concurrent.futures.Future()

    async def run() -> None:
        started.set_result(True)
        await forever()

    fut = sub.submit(run())
    assert started.result(5)
    assert fut.cancel()
    assert cancelled.result(5) is True


def test_stopped_loop_refuses(loop_thread):
    sub = BatchedSubmitter(loop_thread)
    loop_thread.stop()

    async def nothing() -> None:
        return None

    with pytest.raises(ClientStateError):
        sub.submit(nothing())


def test_start_calls_and_coroutines_run_in_submission_order_and_errors_are_logged(loop_thread, caplog):
    """``start(op)`` queues ``op`` itself and runs ``op.start()`` on the loop, in order with
    ``call`` (and ``submit``, whose task starts on the next loop iteration); an exception is
    logged and the rest of the burst still runs."""
    sub = BatchedSubmitter(loop_thread)
    order: list[str] = []

    class Op:
        def __init__(self, name: str, fail: bool = False) -> None:
            self.name, self.fail = name, fail

        def start(self) -> None:
            assert loop_thread.in_loop_thread
            order.append(self.name)
            if self.fail:
                raise RuntimeError(f"{self.name} failed")

    async def coro() -> None:
        order.append("coro")

    sub.start(Op("a"))
    sub.call(lambda: order.append("call"))
    sub.start(Op("bad", fail=True))
    fut = sub.submit(coro())
    sub.start(Op("b"))
    fut.result(5)
    loop_thread.run(asyncio.sleep(0), 5)
    # the coroutine became a task in its turn; its body runs after the burst, as a Task does
    assert order == ["a", "call", "bad", "b", "coro"]
    assert "start of" in caplog.text and "bad failed" in caplog.text


def test_start_on_a_stopped_loop_refuses(loop_thread):
    sub = BatchedSubmitter(loop_thread)
    loop_thread.stop()
    with pytest.raises(ClientStateError):
        sub.start(object())
