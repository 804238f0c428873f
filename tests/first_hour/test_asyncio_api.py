"""asyncio as a first-class API (issue 17 item 7): async context managers, astart/ashutdown,
lite-pull ``apoll`` / ``async for`` / ``acommit`` on the caller's loop, and ``async def`` push
listeners on the application's loop."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import ConsumeConcurrentlyStatus, LitePullConsumer, Message, Producer, PushConsumer

from tests.conftest import run_async

FAST = {"suspend_timeout": 1000, "pull_timeout": 4000, "rebalance_interval": 500,
        "consume_from_where": "CONSUME_FROM_FIRST_OFFSET", "heartbeat_broker_interval": 500}


@pytest.fixture(scope="module")
def ns(tmp_path_factory):
    c = start_dev_cluster(str(tmp_path_factory.mktemp("aio") / "store"), in_process=True)
    yield c.namesrv_addr
    c.stop()


def test_producer_async_with_and_astart_ashutdown(ns):
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        tick_task = asyncio.create_task(ticker())
        async with Producer("aio_pg", ns) as producer:
            result = await producer.asend(Message("aio_topic", b"a"))
        other = Producer("aio_pg2", ns)
        await other.astart()
        result2 = await other.asend(Message("aio_topic", b"b"))
        await other.ashutdown()
        tick_task.cancel()
        return result, result2, ticks

    result, result2, ticks = run_async(main(), timeout=60)
    assert result.send_status.name == "SEND_OK" and result2.send_status.name == "SEND_OK"
    assert ticks > 0, "the application's loop kept running while the clients started and stopped"


def test_async_push_listener_runs_on_the_application_loop(ns):
    async def main():
        app_loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[bytes] = asyncio.Queue()  # not thread-safe: only the app loop may use it
        loops: list[asyncio.AbstractEventLoop] = []

        async def listener(msgs, context):
            loops.append(asyncio.get_running_loop())
            for m in msgs:
                inbox.put_nowait(m.body)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer("aio_push_cg", ns, **FAST)
        consumer.subscribe("aio_push_topic", "*")
        consumer.register_message_listener(listener)
        async with consumer:
            async with Producer("aio_push_pg", ns) as producer:
                await producer.asend(Message("aio_push_topic", b"hello"))
            body = await asyncio.wait_for(inbox.get(), 20)
        return body, loops, app_loop

    body, loops, app_loop = run_async(main(), timeout=60)
    assert body == b"hello"
    assert loops and all(loop is app_loop for loop in loops)


def test_lite_pull_apoll_async_for_and_acommit_on_the_callers_loop(ns):
    async def main():
        consumer = LitePullConsumer("aio_lite_cg", ns, auto_commit=False, **FAST)
        consumer.subscribe("aio_lite_topic", "*")
        async with consumer:
            # a poll cancelled while waiting loses nothing
            waiting = asyncio.create_task(consumer.apoll(10_000))
            await asyncio.sleep(0)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            async with Producer("aio_lite_pg", ns) as producer:
                sent = [await producer.asend(Message("aio_lite_topic", f"m{i}".encode())) for i in range(3)]
            got: list[bytes] = []
            async with asyncio.timeout(30):
                async for msg in consumer:
                    got.append(msg.body)
                    if len(got) == 3:
                        break
            await consumer.acommit()
            committed = {mq: await asyncio.to_thread(consumer.committed, mq) for mq in consumer.assignment()}
            empty = await consumer.apoll(50)
        return sent, got, committed, empty

    sent, got, committed, empty = run_async(main(), timeout=90)
    assert sorted(got) == [b"m0", b"m1", b"m2"]
    assert empty == []
    for s in sent:
        assert committed[s.message_queue] >= s.queue_offset + 1


def test_a_poll_cancelled_as_its_wake_up_arrives_ends_cancelled(ns):
    """``apoll`` cancelled (a caller's timeout, a task group) in the very step a pull wakes it:
    the cancel propagates. ``asyncio.wait_for`` on Python 3.11 swallowed it (gh-86296) and the
    poll went on waiting, so the caller's cancel (and a stop awaiting it) hung."""
    from tests.conftest import wait_until_async

    async def main():
        consumer = LitePullConsumer("aio_lite_cancel_cg", ns, auto_commit=False, **FAST)
        consumer.subscribe("aio_lite_cancel_topic", "*")  # never sent to: the poll waits
        async with consumer:
            waiting = asyncio.create_task(consumer.apoll(10_000))
            await wait_until_async(lambda: consumer._async_waiters, what="the poll waiting")
            with consumer._cond:
                (_, waiter), = consumer._async_waiters
            waiter.set_result(None)  # a pull's wake-up, in the same step as the cancel
            waiting.cancel()
            done, _ = await asyncio.wait({waiting}, timeout=5)
            return bool(done) and waiting.cancelled()

    assert run_async(main(), timeout=60), "the poll went on after its cancel"
