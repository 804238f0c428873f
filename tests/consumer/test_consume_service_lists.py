"""ConsumeMessageConcurrentlyService hands pulled lists to the pool: a fast listener consumes a
whole list in one pool task and the list settles once; a slow (or not yet measured) listener
gets one task per chunk, so the chunks of one list run in parallel as in Java."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from rocketmq_sdk.consumer.consume_service import ConsumeMessageConcurrentlyService
from rocketmq_sdk.consumer.listener import ConsumeConcurrentlyStatus
from rocketmq_sdk.consumer.offset_store import OffsetTable
from rocketmq_sdk.consumer.process_queue import ProcessQueue
from rocketmq_sdk.consumer.stats import ConsumerStats
from rocketmq_sdk.protocol.message import MessageExt, MessageQueue

MQ = MessageQueue("T", "broker-a", 0)
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER


def fake_context(sent_back: list) -> SimpleNamespace:
    """A stand-in for the consumer's ``ConsumeContext``: send-backs are recorded, not sent."""
    def send_message_back(m, delay, mq):
        sent_back.append(m.queue_offset)

    return SimpleNamespace(
        config=SimpleNamespace(consume_message_batch_max_size=1, consume_thread_max=8, consume_timeout=15),
        group="g", retry_topic="%RETRY%g", clustering=True, offset_store=OffsetTable(), msg_trace=None,
        client_id="127.0.0.1@test", timeout_s=4.0, send_message_back=send_message_back,
        instance=SimpleNamespace(run=lambda result, timeout: result), stats=ConsumerStats())


def pulled(start: int, n: int) -> list[MessageExt]:
    return [MessageExt(topic="T", body=b"x", queue_offset=start + i) for i in range(n)]


def wait_for(cond, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.001)


def consume_list(svc: ConsumeMessageConcurrentlyService, start: int, n: int) -> ProcessQueue:
    """Submit ``pulled(start, n)`` (held in a new ProcessQueue) and wait until the consume offset
    of MQ reaches ``start + n``; returns the process queue."""
    pq = ProcessQueue()
    msgs = pulled(start, n)
    pq.put_messages(msgs)
    svc.submit(msgs, pq, MQ)
    wait_for(lambda: svc.ctx.offset_store.read_memory(MQ) == start + n)
    return pq


@pytest.fixture
def service():
    made = []

    def make(listener, sent_back=None):
        svc = ConsumeMessageConcurrentlyService(fake_context(sent_back if sent_back is not None else []), listener)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.shutdown(5)


def test_a_fast_listener_consumes_a_whole_list_in_one_pool_task_and_commits_once(service):
    threads: list[str] = []
    seen: list[int] = []

    def listener(msgs, ctx):
        threads.append(threading.current_thread().name)
        seen.extend(m.queue_offset for m in msgs)
        return OK

    svc = service(listener)
    svc._listener_avg_s = 0.0  # measured fast
    pq = ProcessQueue()
    msgs = pulled(100, 32)
    pq.put_messages(msgs)
    removals = []
    real_remove = pq.remove_messages
    pq.remove_messages = lambda ms: removals.append(len(ms)) or real_remove(ms)  # type: ignore[method-assign]
    svc.submit(msgs, pq, MQ)
    wait_for(lambda: svc.ctx.offset_store.read_memory(MQ) == 132)
    assert seen == list(range(100, 132))  # every message once, in order
    assert len(set(threads)) == 1 and len(threads) == 32  # one listener call per chunk, one thread
    assert removals == [32]  # settled once
    assert pq.msg_count == 0


def test_chunks_of_one_list_run_in_parallel_until_the_listener_is_measured_fast(service):
    barrier = threading.Barrier(2, timeout=5)  # two chunks must be inside the listener at once

    def listener(msgs, ctx):
        if msgs[0].queue_offset < 2:
            barrier.wait()
        return OK

    svc = service(listener)
    consume_list(svc, 0, 4)
    assert not barrier.broken


def test_a_listener_turning_slow_spreads_the_rest_of_the_list(service):
    gate = threading.Barrier(2, timeout=5)

    def listener(msgs, ctx):
        off = msgs[0].queue_offset
        if off == 0:
            svc._listener_avg_s = 1.0  # as if this call had been slow
        elif off in (1, 2):
            gate.wait()  # chunks 1 and 2 only pass together: they run on two threads
        return OK

    svc = service(listener)
    svc._listener_avg_s = 0.0
    consume_list(svc, 0, 4)
    assert not gate.broken


def test_reconsume_later_sends_back_and_still_settles_the_list(service):
    sent_back: list[int] = []

    def listener(msgs, ctx):
        return LATER if msgs[0].queue_offset == 11 else OK

    svc = service(listener, sent_back)
    svc._listener_avg_s = 0.0
    pq = consume_list(svc, 10, 3)
    assert sent_back == [11]
    assert pq.msg_count == 0
