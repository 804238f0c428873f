"""The per-process producer cache and send_rows, with a fake producer (no broker needed)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
from rocketmq_sdk.integrations.spark import ProducerCache, ProducerSpec, RowMessageMapper, send_rows


class FakeProducer:
    def __init__(self, spec: ProducerSpec) -> None:
        self.spec = spec
        self.started = self.stopped = 0
        self.sent: list[tuple] = []

    def start(self) -> None:
        self.started += 1

    def shutdown(self) -> None:
        self.stopped += 1

    def send(self, msg, selector=None, arg=None, *, timeout_ms=3000):
        self.sent.append((msg, selector, arg, timeout_ms))
        return None


def test_one_started_producer_per_spec_reused_across_calls():
    made: list[FakeProducer] = []
    cache = ProducerCache(lambda spec: made.append(FakeProducer(spec)) or made[-1])
    a = ProducerSpec.create("127.0.0.1:9876", "g", {"retry_times": 2})
    same = ProducerSpec.create("127.0.0.1:9876", "g", {"retry_times": 2})
    other = ProducerSpec.create("127.0.0.1:9877", "g")
    p1, p2, p3 = cache.get(a), cache.get(same), cache.get(other)
    assert p1 is p2 and p1 is not p3
    assert [p.started for p in made] == [1, 1] and len(cache) == 2
    cache.shutdown_all()
    assert [p.stopped for p in made] == [1, 1] and len(cache) == 0


def test_failed_start_is_not_cached():
    class Failing(FakeProducer):
        def start(self):
            raise ConnectionError("no name server")

    attempts = []
    cache = ProducerCache(lambda spec: attempts.append(1) or Failing(spec))
    for _ in range(2):
        with pytest.raises(ConnectionError):
            cache.get(ProducerSpec("x:1"))
    assert len(attempts) == 2 and len(cache) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_never_reuses_or_shuts_down_the_parents_producer():
    made: list[FakeProducer] = []
    cache = ProducerCache(lambda spec: made.append(FakeProducer(spec)) or made[-1])
    parent_producer = cache.get(ProducerSpec("x:1"))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report whether it got a fresh producer and left the parent's alone
        try:
            fresh = cache.get(ProducerSpec("x:1")) is not parent_producer
            cache.shutdown_all()
            os.write(w, b"1" if fresh and parent_producer.stopped == 0 else b"0")
        finally:
            os._exit(0)
    os.close(w)
    answer = os.read(r, 1)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert cache.get(ProducerSpec("x:1")) is parent_producer and parent_producer.stopped == 0


@dataclass
class FakeResult:
    send_status: object


def test_send_rows_sends_in_order_through_the_selector_with_the_timeout():
    producer = FakeProducer(ProducerSpec("x:1"))
    rows = [{"tail": "N1", "n": i} for i in range(5)] + [{"tail": None, "n": 5}]
    mapper = RowMessageMapper("t", selector_col="tail")
    selector = object()
    assert send_rows(rows, mapper, producer, selector=selector, send_timeout_ms=1234) == 6
    assert [m.body for m, *_ in producer.sent] == [f'{{"tail":{t},"n":{i}}}'.encode()
                                                   for i, t in enumerate(['"N1"'] * 5 + ["null"])]
    assert [(s, a, t) for _, s, a, t in producer.sent] == [(selector, "N1", 1234)] * 5 + [(selector, "", 1234)]


def test_send_rows_without_selector_uses_plain_send():
    producer = FakeProducer(ProducerSpec("x:1"))
    assert send_rows([{"a": 1}], RowMessageMapper("t"), producer) == 1
    assert producer.sent[0][1:] == (None, None, 3000)


def test_send_rows_propagates_a_failed_send():
    class Boom(FakeProducer):
        def send(self, *a, **k):
            raise TimeoutError("send timed out")

    with pytest.raises(TimeoutError):
        send_rows([{"a": 1}], RowMessageMapper("t"), Boom(ProducerSpec("x:1")))
