"""OpenTelemetry consumer spans: the publish span's context travels in the message properties;
the push consumer records a receive span per pulled batch and a process span per message around
the listener, in the producer's trace, with messaging.* attributes and the listener's outcome."""

from __future__ import annotations

import threading

import pytest
from rocketmq_sdk import Message, PushConsumer
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from rocketmq_sdk.consumer import tracing as ctracing

from .helpers import FAST, owned, unique, wait_until


def _named(exporter, suffix: str) -> list:
    return [s for s in exporter.get_finished_spans() if s.name.endswith(suffix)]


def _consume(cluster, topic: str, listener, *, orderly: bool = False, until=None) -> str:
    """Consume ``topic`` with a new push consumer until ``until()`` returns; returns its client id."""
    c = PushConsumer(unique("cgtrace"), cluster.namesrv_addr, instance_name=unique("trace"), **FAST)
    c.subscribe(topic, "*")
    c.register_message_listener(listener, orderly=orderly)
    c.start()
    try:
        client_id = c.instance.client_id
        wait_until(lambda: len(owned(c, topic)) == 4, what="queues")
        until()
    finally:
        c.shutdown()
    return client_id


def test_without_a_tracer_provider_no_spans_are_started(cluster, producer):
    pytest.importorskip("opentelemetry")
    topic = unique("TopicNoSpans")
    msg = Message(topic, b"x", tags="TagA")
    producer.send(msg)
    got = []
    _consume(cluster, topic, lambda msgs, ctx: got.extend(msgs) or ConsumeConcurrentlyStatus.CONSUME_SUCCESS,
             until=lambda: wait_until(lambda: got, what="the message"))
    assert ctracing.start_process_spans(got, "g") is None  # the no-op fast path


def test_process_span_is_a_child_of_the_publish_span_with_messaging_attributes(cluster, producer, spans):
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, StatusCode

    topic = unique("TopicTraceC")
    producer.send(Message(topic, b"hello", tags="TagA", keys=["k1", "k2"]))
    inner: list = []

    def listener(msgs, ctx):
        inner.append(trace.get_current_span().get_span_context())  # the process span is current
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    client_id = _consume(cluster, topic, listener,
                         until=lambda: wait_until(lambda: _named(spans, " process"), what="span"))
    (publish,) = _named(spans, " publish")
    (process,) = _named(spans, " process")
    assert process.name == f"{topic} process" and process.kind is SpanKind.CONSUMER
    assert process.context.trace_id == publish.context.trace_id
    assert process.parent.span_id == publish.context.span_id
    assert [link.context.span_id for link in process.links] == [publish.context.span_id]
    assert inner == [process.context]
    attrs = process.attributes
    assert attrs["messaging.system"] == "rocketmq"
    assert attrs["messaging.operation"] == "process"
    assert attrs["messaging.destination.name"] == topic
    assert attrs["messaging.rocketmq.client_group"].startswith("cgtrace")
    assert attrs["messaging.client.id"] == client_id
    assert attrs["messaging.message.id"] == publish.attributes["messaging.message.id"]
    assert attrs["messaging.rocketmq.message.tag"] == "TagA"
    assert list(attrs["messaging.rocketmq.message.keys"]) == ["k1", "k2"]
    assert attrs["messaging.rocketmq.consume_status"] == "CONSUME_SUCCESS"
    assert process.status.status_code is StatusCode.UNSET
    receive = _named(spans, " receive")
    assert receive and all(s.kind is SpanKind.CONSUMER for s in receive)
    assert any(link.context.span_id == publish.context.span_id for s in receive for link in s.links)
    assert {s.attributes["messaging.client.id"] for s in receive} == {client_id}


def test_reconsume_later_and_exceptions_mark_the_process_span_as_error(cluster, producer, spans):
    from opentelemetry.trace import StatusCode

    topic = unique("TopicTraceErr")
    producer.send(Message(topic, b"retry-me", tags="TagR"))
    calls = []
    lock = threading.Lock()

    def listener(msgs, ctx):
        with lock:
            calls.append(msgs[0].reconsume_times)
            n = len(calls)
        if n == 1:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        if n == 2:
            raise RuntimeError("boom")
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    _consume(cluster, topic, listener, until=lambda: wait_until(lambda: len(_named(spans, " process")) >= 3,
                                                               timeout_s=20, what="three deliveries"))
    (publish,) = _named(spans, " publish")
    later, boom, ok = sorted(_named(spans, " process"), key=lambda s: s.start_time)[:3]
    # redeliveries (through the retry topic) stay in the producer's trace, under the original topic
    assert {s.context.trace_id for s in (later, boom, ok)} == {publish.context.trace_id}
    assert {s.attributes["messaging.destination.name"] for s in (later, boom, ok)} == {topic}
    assert later.status.status_code is StatusCode.ERROR and later.status.description == "RECONSUME_LATER"
    assert boom.status.status_code is StatusCode.ERROR and "RuntimeError: boom" in boom.status.description
    assert [e.name for e in boom.events] == ["exception"]
    assert ok.status.status_code is StatusCode.UNSET
    assert ok.attributes["messaging.rocketmq.message.reconsume_times"] == 2


def test_orderly_listener_gets_process_spans(cluster, producer, spans):
    topic = unique("TopicTraceOrd")
    producer.send(Message(topic, b"o1"))
    client_id = _consume(cluster, topic, lambda msgs, ctx: ConsumeOrderlyStatus.SUCCESS, orderly=True,
                         until=lambda: wait_until(lambda: _named(spans, " process"), what="span"))
    (publish,) = _named(spans, " publish")
    (process,) = _named(spans, " process")
    assert process.parent.span_id == publish.context.span_id
    assert process.attributes["messaging.rocketmq.consume_status"] == "SUCCESS"
    assert process.attributes["messaging.client.id"] == client_id
