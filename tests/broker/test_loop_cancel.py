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


def test_every_broker_loop_ends_when_cancelled_as_it_is_woken(tmp_path):
    """Name-server registration, schedule (delay level 1), timer and transaction-check loops of an
    in-process 5.x broker: each cancelled in the step its wake-up event is set ends (a swallowed
    cancel left the registration loop re-registering a stopped broker and hung the others' stop())."""
    from rocketmq_broker.embedded import start_dev_cluster

    from tests.conftest import wait_until
    from tests.rmq5.conftest import broker_of

    cluster = start_dev_cluster(str(tmp_path / "store"), in_process=True, broker_config={"broker_version": "5.3.3"})
    try:
        broker, loop = broker_of(cluster), cluster._loop
        assert loop is not None and broker.timer is not None
        loops = {"registration": (broker._tasks[0], broker.ctx.register_soon),
                 "schedule level 1": (broker.schedule._tasks[0], broker.schedule._wakeups[1]),
                 "timer": (broker.timer._task, broker.timer._wake),
                 "transaction check": (broker.transactions.check_service._task, broker.transactions.check_service._wakeup)}
        for what, (task, event) in loops.items():
            assert task is not None and event is not None
            wait_until(lambda event=event: event._waiters, 10, f"the {what} loop waiting for its wake-up")

            def wake_and_cancel(task=task, event=event):
                event.set()
                task.cancel()

            loop.call_soon_threadsafe(wake_and_cancel)
            wait_until(task.done, 5, f"the {what} loop to end after its cancel")
            assert task.cancelled(), what
    finally:
        cluster.stop()
