"""A broker loop cancelled (its service's ``stop()``) in the very step its wait for a wake-up
ends must end. ``asyncio.wait_for(event.wait(), t)`` on Python 3.11 returns the event's result
and swallows such a cancel (gh-86296): the loop went on and the ``stop()`` awaiting it hung (as
the HA client's did, tests/broker/test_ha_frames.py). Each test sets the event and cancels the
waiting task in one step of the loop, which makes the race happen every time on 3.11."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from rocketmq_broker.aio import wait_event
from rocketmq_broker.broker.transaction.service import TransactionCheckService

from tests.conftest import run_async, wait_until_async


async def _cancelled_as_woken(task: asyncio.Task, event: asyncio.Event) -> bool:
    """Wait until ``task`` waits on ``event``; set it and cancel ``task`` at once; True when
    ``task`` then ends cancelled (within 5 s)."""
    await wait_until_async(lambda: event._waiters, what="the loop waiting for its wake-up")  # type: ignore[attr-defined]
    event.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=5)
    return bool(done) and task.cancelled()


def test_wait_event_passes_on_a_cancel_that_comes_as_the_event_is_set():
    async def main():
        event = asyncio.Event()
        assert await wait_event(event, 0.01) is False  # timed out
        event.set()
        assert await wait_event(event, 0.01) is True
        event.clear()

        async def loop():
            while True:
                await wait_event(event, 60)
                event.clear()

        task = asyncio.get_running_loop().create_task(loop())
        return await _cancelled_as_woken(task, event)

    assert run_async(main()), "wait_event swallowed the cancel"


def test_the_transaction_check_loop_ends_when_stopped_as_a_round_is_asked_for():
    broker = SimpleNamespace(
        is_master=True, topics=SimpleNamespace(get=lambda topic: SimpleNamespace(read_queue_nums=0)),
        config=SimpleNamespace(transaction_check_interval=60_000, transaction_time_out=6_000,
                               transaction_check_max=15))

    async def main():
        service = TransactionCheckService(broker, bridge=None)  # type: ignore[arg-type]
        service.start(asyncio.get_running_loop())
        task, event = service._task, service._wakeup
        assert task is not None and event is not None
        try:
            return await _cancelled_as_woken(task, event)
        finally:
            service._task = None
            task.cancel()

    assert run_async(main()), "the transaction check loop went on after its cancel"
