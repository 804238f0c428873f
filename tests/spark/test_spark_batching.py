"""Per-queue batching of the writer (fake producer, no broker)."""

from __future__ import annotations

import json

import pytest
from rocketmq_sdk.integrations.spark import RowMessageMapper, send_rows
from rocketmq_sdk.integrations.spark.batching import QueueBatcher
from rocketmq_sdk.protocol.message import Message


class BatchProducer:
    queues = ["q0", "q1", "q2"]

    def __init__(self) -> None:
        self.requests: list[tuple[str, object, list[bytes]]] = []

    def fetch_publish_queues(self, topic):
        return list(self.queues)

    def send(self, msg, selector=None, arg=None, *, mq=None, timeout_ms=3000):
        self.requests.append(("send", mq, [msg.body]))

    def send_batch(self, msgs, *, mq=None, timeout_ms=3000):
        self.requests.append(("batch", mq, [m.body for m in msgs]))


class ModSelector:
    def select(self, mqs, msg, arg):
        return mqs[int(arg) % len(mqs)]


def send_keyed_rows(producer: BatchProducer, count: int) -> dict[str, list[int]]:
    """Send rows 0..count-1 keyed by i % 3 in batches of 2; the row numbers each queue got, in order."""
    rows = [{"k": i % 3, "i": i} for i in range(count)]
    mapper = RowMessageMapper("t", body=lambda r: str(r["i"]), selector_col="k")
    assert send_rows(rows, mapper, producer, selector=ModSelector(), batch_size=2) == count
    per_queue: dict[str, list[int]] = {}
    for kind, mq, bodies in producer.requests:
        assert kind == ("batch" if len(bodies) > 1 else "send") and len(bodies) <= 2
        per_queue.setdefault(mq, []).extend(int(b) for b in bodies)
    return per_queue


def test_rows_are_batched_per_selected_queue_in_row_order():
    producer = BatchProducer()
    per_queue = send_keyed_rows(producer, 14)
    assert per_queue == {"q0": [0, 3, 6, 9, 12], "q1": [1, 4, 7, 10, 13], "q2": [2, 5, 8, 11]}
    assert producer.requests[-1][0] == "send"  # the odd leftover of a queue goes alone


def test_without_selector_one_buffer_and_the_producer_picks_the_queue():
    producer = BatchProducer()
    assert send_rows([{"i": i} for i in range(5)], RowMessageMapper("t"), producer, batch_size=4) == 5
    assert [(k, mq, len(b)) for k, mq, b in producer.requests] == [("batch", None, 4), ("send", None, 1)]


def test_buffer_is_flushed_before_it_exceeds_the_byte_limit():
    producer = BatchProducer()
    batcher = QueueBatcher(producer, batch_size=100, send_timeout_ms=1000, max_batch_bytes=10)
    for body in (b"aaaa", b"bbbb", b"cccc", b"dd"):
        batcher.add(Message("t", body), "q0")
    batcher.flush_all()
    assert [b for _, _, b in producer.requests] == [[b"aaaa", b"bbbb"], [b"cccc", b"dd"]]
    assert batcher.sent == 4


def test_batch_size_below_one_is_refused():
    from rocketmq_sdk.exceptions import IllegalArgumentError
    from rocketmq_sdk.integrations.spark import write_dataframe

    with pytest.raises(IllegalArgumentError):
        write_dataframe(object(), "x:1", "t", batch_size=0)


class AsyncProducer(BatchProducer):
    """send_async answers later: a request stays in flight until the next call of the writer
    needs it (the future completes when its result is asked for, recording the overlap)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight: list[object] = []
        self.most_in_flight_per_queue = 0
        self.most_in_flight = 0

    def send_async(self, msg, *, mq=None, timeout_ms=3000):
        bodies = [m.body for m in msg] if isinstance(msg, list) else [msg.body]
        self.in_flight.append(mq)
        self.most_in_flight = max(self.most_in_flight, len(self.in_flight))
        self.most_in_flight_per_queue = max(self.most_in_flight_per_queue, self.in_flight.count(mq))
        producer = self

        class Answer:
            def result(self, timeout=None):
                producer.in_flight.remove(mq)
                producer.requests.append(("batch" if isinstance(msg, list) else "send", mq, bodies))
                return None

        return Answer()


def test_async_sends_keep_one_request_in_flight_per_queue_and_the_queue_order():
    producer = AsyncProducer()
    assert send_keyed_rows(producer, 30) == {f"q{k}": list(range(k, 30, 3)) for k in range(3)}
    assert producer.most_in_flight_per_queue == 1 and producer.most_in_flight == 3  # the queues overlap
    assert not producer.in_flight


def test_async_sends_without_selector_overlap_up_to_the_limit():
    from rocketmq_sdk.integrations.spark.batching import MAX_IN_FLIGHT

    producer = AsyncProducer()
    assert send_rows([{"i": i} for i in range(100)], RowMessageMapper("t"), producer, batch_size=4) == 100
    assert producer.most_in_flight == MAX_IN_FLIGHT and not producer.in_flight
    assert [json.loads(b)["i"] for _, _, bodies in producer.requests for b in bodies] == list(range(100))
