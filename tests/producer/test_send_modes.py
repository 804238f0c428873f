"""Send modes against the reference broker: sync, send_async (Future + callback, any thread),
asend (awaited on the application's own loop), oneway, batches and split_batches."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest
from rocketmq_sdk import Message, Producer, SendStatus
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.producer import split_batches
from rocketmq_sdk.producer.batch import encoded_size
from rocketmq_sdk.protocol.codes import RequestCode

from .conftest import stored_count, unique, wait_until


@pytest.fixture
def producer(cluster):
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        yield p


def test_send_async_returns_future_and_calls_callback_off_the_io_thread(cluster, producer):
    topic = unique("TopicAsync")
    seen: list[tuple] = []
    done = threading.Event()

    def callback(result, error):
        seen.append((result, error, threading.current_thread().name))
        done.set()

    fut = producer.send_async(Message(topic, b"async-1", tags="A"), callback)
    assert isinstance(fut, concurrent.futures.Future)
    result = fut.result(5)
    assert result.send_status is SendStatus.SEND_OK and result.queue_offset == 0
    assert done.wait(5)
    ((cb_result, cb_error, thread_name),) = seen
    assert cb_result is result and cb_error is None
    assert thread_name.startswith("rocketmq-send-callback")


def test_many_async_sends_in_flight_from_many_threads(cluster, producer):
    topic = unique("TopicMany")
    futures: list[concurrent.futures.Future] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        for i in range(50):
            f = producer.send_async(Message(topic, f"{n}-{i}".encode()))
            with lock:
                futures.append(f)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    results = [f.result(10) for f in futures]
    assert len({r.msg_id for r in results}) == 200
    assert all(r.send_status is SendStatus.SEND_OK for r in results)
    wait_until(lambda: stored_count(cluster.broker, topic) == 200, what="200 stored")
    # one connection to the broker carried them all
    assert len([a for a in producer.instance.remoting.addresses if a == cluster.broker_addr]) == 1


def test_send_async_error_reaches_future_and_callback(cluster):
    errors: list[BaseException] = []
    done = threading.Event()
    with Producer(unique("pg"), cluster.namesrv_addr, send_msg_timeout=1000) as p:
        # a queue on a broker nobody knows: no master address, one attempt (explicit mq)
        from rocketmq_sdk import MessageQueue
        fut = p.send_async(Message(unique("TopicErr"), b"x"), lambda r, e: (errors.append(e), done.set()),
                           mq=MessageQueue("T", "no-such-broker", 0))
        with pytest.raises(Exception) as info:
            fut.result(5)
        assert done.wait(5)
    assert errors == [info.value]


def test_asend_is_awaited_on_the_applications_own_loop(cluster, producer):
    topic = unique("TopicAsyncio")

    async def app() -> list:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        t = asyncio.create_task(ticker())
        results = await asyncio.gather(*(producer.asend(Message(topic, f"m{i}".encode())) for i in range(20)))
        t.cancel()
        assert ticks > 0  # the loop kept running while the sends were in flight
        return results

    results = asyncio.run(app())
    assert [r.send_status for r in results] == [SendStatus.SEND_OK] * 20
    wait_until(lambda: stored_count(cluster.broker, topic) == 20, what="20 stored")


def test_send_oneway_stores_without_an_answer(cluster, producer):
    topic = unique("TopicOneway")
    for i in range(10):
        assert producer.send_oneway(Message(topic, f"o{i}".encode())) is None
    wait_until(lambda: stored_count(cluster.broker, topic) == 10, what="10 oneway messages stored")


def test_oneway_sets_the_oneway_flag_on_the_wire(cluster):
    sent = []

    class Recorder:
        def before_request(self, addr, cmd):
            sent.append(cmd)

        def after_response(self, addr, cmd, resp):
            pass

    with Producer(unique("pg"), cluster.namesrv_addr, rpc_hooks=[Recorder()]) as p:
        p.send_oneway(Message(unique("TopicFlag"), b"x"))
    (req,) = [c for c in sent if c.code == RequestCode.SEND_MESSAGE_V2]
    assert req.is_oneway


def test_split_batches_then_send_batch_and_async_batch(cluster, producer):
    topic = unique("TopicBatch")
    msgs = [Message(topic, bytes([i % 256]) * 1000, keys=f"k{i}") for i in range(100)]
    batches = list(split_batches(msgs, 16 * 1024))
    assert [m for b in batches for m in b] == msgs
    assert all(sum(encoded_size(m) for m in b) <= 16 * 1024 for b in batches) and len(batches) == 7
    for b in batches[:-1]:
        result = producer.send_batch(b)
        assert len(result.msg_id.split(",")) == len(b)
    last = producer.send_async(batches[-1]).result(5)
    assert len(last.msg_id.split(",")) == len(batches[-1])
    wait_until(lambda: stored_count(cluster.broker, topic) == 100, what="100 batched messages stored")


def test_split_batches_refuses_a_message_larger_than_the_limit():
    with pytest.raises(IllegalArgumentError, match="does not fit"):
        list(split_batches([Message("T", b"x" * 100)], 50))


def test_shutdown_waits_for_in_flight_async_sends(cluster):
    topic = unique("TopicDrain")
    p = Producer(unique("pg"), cluster.namesrv_addr)
    p.start()
    futures = [p.send_async(Message(topic, b"d")) for _ in range(100)]
    p.shutdown()
    assert [(f.done(), f.exception()) for f in futures] == [(True, None)] * 100


def test_asend_also_works_on_the_clients_own_io_loop(cluster, producer):
    topic = unique("TopicOwnLoop")

    async def on_io_loop():
        return await producer.asend(Message(topic, b"from the I/O loop"))

    result = producer.instance.run(on_io_loop(), 10)
    assert result.send_status is SendStatus.SEND_OK


def test_in_flight_limit_bounds_send_async(cluster):
    from rocketmq_sdk.exceptions import RemotingTimeoutError

    with Producer(unique("pg"), cluster.namesrv_addr, async_send_max_in_flight=1, send_msg_timeout=200) as p:
        p.send(Message(unique("TopicGate"), b"warm"))
        p.in_flight.acquire()  # as if one send were in flight
        try:
            with pytest.raises(RemotingTimeoutError, match="in flight"):
                p.send_async(Message(unique("TopicGate"), b"x"))
        finally:
            p.in_flight.release()
        assert p.send_async(Message(unique("TopicGate"), b"y")).result(5).send_status is SendStatus.SEND_OK


def test_oneway_burst_is_drained_by_shutdown(cluster):
    topic = unique("TopicOnewayBurst")
    p = Producer(unique("pg"), cluster.namesrv_addr)
    p.start()
    p.send(Message(topic, b"route"))
    for i in range(500):
        p.send_oneway(Message(topic, f"b{i}".encode()))
    p.shutdown()  # waits for the queued oneway writes
    wait_until(lambda: stored_count(cluster.broker, topic) == 501, what="501 stored")


def _stored(cluster, topic, queue_id, offset, n):
    from rocketmq_sdk.protocol.message_codec import decode_messages

    got = cluster.broker.store.get_message("g", topic, queue_id, offset, n)
    return decode_messages(got.body())


def test_an_encoded_batch_is_sent_as_it_is_and_stored_like_a_list_batch(cluster, producer):
    from rocketmq_sdk.producer import EncodedBatch
    from rocketmq_sdk.protocol.message_codec import encode_batch
    from rocketmq_sdk.protocol.msgid import create_uniq_id

    topic = unique("TopicEncoded")
    msgs = [Message(topic, f"body-{i}".encode(), tags="T", keys=[f"k{i}", "x"], properties={"p": str(i)})
            for i in range(5)]
    for m in msgs:
        m.properties["UNIQ_KEY"] = create_uniq_id()
    ids = [m.properties["UNIQ_KEY"] for m in msgs]
    batch = EncodedBatch(topic, encode_batch(msgs), ids)
    assert len(batch) == 5 and [m.properties for m in batch.messages()] == [m.properties for m in msgs]
    r1 = producer.send_batch(batch)
    r2 = producer.send_async(batch, mq=r1.message_queue).result(5)
    assert r1.msg_id == r2.msg_id == ",".join(ids)
    assert (r1.message_queue, r2.queue_offset) == (r2.message_queue, r1.queue_offset + 5)
    wait_until(lambda: stored_count(cluster.broker, topic) == 10, what="10 messages stored")
    stored = _stored(cluster, topic, r1.message_queue.queue_id, 0, 10)
    assert [(m.body, m.tags, m.keys, m.properties["p"], m.msg_id) for m in stored] == \
        [(m.body, "T", [f"k{i}", "x"], str(i), m.properties["UNIQ_KEY"]) for i, m in enumerate(msgs)] * 2


def test_an_encoded_batch_is_checked_before_it_is_sent(producer):
    from rocketmq_sdk.producer import EncodedBatch

    with pytest.raises(IllegalArgumentError, match="empty"):
        producer.send_batch(EncodedBatch("T", b"", []))
    with pytest.raises(IllegalArgumentError, match="retry"):
        producer.send_batch(EncodedBatch("%RETRY%g", b"x", ["id"]))
    with pytest.raises(IllegalArgumentError, match="max_message_size"):
        producer.send_batch(EncodedBatch("T", b"x" * (producer.config.max_message_size + 1), ["id"]))
    with pytest.raises(IllegalArgumentError, match="topic"):
        producer.send_async(EncodedBatch("bad topic!", b"x", ["id"]))
