"""OpenTelemetry publish spans: a no-op without the optional package; with it, one PRODUCER span
per send with messaging.* attributes and the W3C context injected into the message properties."""

from __future__ import annotations

import pytest
from rocketmq_sdk import Message, MQBrokerError, Producer, SelectMessageQueueByHash
from rocketmq_sdk.trace import otel as tracing

from .conftest import unique


def test_without_opentelemetry_sends_carry_no_trace_properties(cluster, monkeypatch):
    monkeypatch.setattr(tracing, "trace_api", None)
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        msg = Message(unique("TopicNoTrace"), b"x")
        p.send(msg)
    assert "traceparent" not in msg.properties


def test_publish_spans_with_messaging_attributes_and_injected_context(cluster, spans):
    from opentelemetry.trace import SpanKind, StatusCode

    topic = unique("TopicTrace")
    with Producer(unique("pg"), cluster.namesrv_addr, namespace="NsT") as p:
        m1 = Message(topic, b"hello", tags="TagA", keys=["k1", "k2"])
        r1 = p.send(m1)
        m2 = Message(topic, b"ordered")
        p.send(m2, SelectMessageQueueByHash(), 7)
        m3 = Message(topic, b"async")
        r3 = p.send_async(m3).result(5)
        batch = [Message(topic, b"b1"), Message(topic, b"b2")]
        p.send_batch(batch)
        p.send_oneway(Message(topic, b"oneway"))
        with pytest.raises(MQBrokerError):
            p.send(Message(topic, b"nowhere"), mq=type(r1.message_queue)(topic, "no-such-broker", 0))
    wire_topic = f"NsT%{topic}"
    finished = spans.get_finished_spans()
    assert [s.name for s in finished] == [f"{wire_topic} publish"] * 6
    assert all(s.kind is SpanKind.PRODUCER for s in finished)
    # the oneway span ends when the I/O loop has written it: it may finish after the next send
    (oneway,) = [s for s in finished if s.attributes["messaging.rocketmq.send_mode"] == "oneway"]
    first, ordered, asynch, batched, failed = [s for s in finished if s is not oneway]
    a = first.attributes
    assert a["messaging.system"] == "rocketmq" and a["messaging.operation"] == "publish"
    assert a["messaging.destination.name"] == wire_topic
    assert a["messaging.rocketmq.client_group"] == p.group
    assert a["messaging.rocketmq.namespace"] == "NsT"
    assert a["messaging.rocketmq.message.tag"] == "TagA"
    assert tuple(a["messaging.rocketmq.message.keys"]) == ("k1", "k2")
    assert a["messaging.rocketmq.message.type"] == "normal"
    assert a["messaging.message.id"] == r1.msg_id and a["messaging.message.body.size"] == 5
    assert ordered.attributes["messaging.rocketmq.message.type"] == "fifo"
    assert asynch.attributes["messaging.message.id"] == r3.msg_id
    assert batched.attributes["messaging.batch.message_count"] == 2
    assert oneway.attributes["messaging.rocketmq.send_mode"] == "oneway"
    assert failed.status.status_code is StatusCode.ERROR and failed.events[0].name == "exception"
    # the span context travels in the message properties (W3C traceparent)
    trace_id = f"{first.context.trace_id:032x}"
    span_id = f"{first.context.span_id:016x}"
    assert m1.properties["traceparent"].startswith(f"00-{trace_id}-{span_id}-")
    assert all("traceparent" in m.properties for m in batch)


def test_no_op_fast_path_keeps_pass_through_and_sees_a_provider_set_later(monkeypatch):
    """Without a provider nothing is injected; an upstream span context or baggage in the current
    context is still propagated; a global provider set after the first send is used at once."""
    pytest.importorskip("opentelemetry.sdk", reason="the optional opentelemetry packages are not installed")
    from opentelemetry import baggage, context, trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    msg = Message("TopicFast", b"x")
    assert tracing.start_publish_span(msg, "TopicFast", "pg") is None
    assert "traceparent" not in msg.properties and "baggage" not in msg.properties

    upstream = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
    token = context.attach(trace.set_span_in_context(NonRecordingSpan(upstream)))
    try:
        msg = Message("TopicFast", b"x")
        tracing.start_publish_span(msg, "TopicFast", "pg")
    finally:
        context.detach(token)
    assert msg.properties["traceparent"] == f"00-{0x1234:032x}-{0x5678:016x}-01"

    token = context.attach(baggage.set_baggage("tenant", "t1"))
    try:
        msg = Message("TopicFast", b"x")
        tracing.start_publish_span(msg, "TopicFast", "pg")
    finally:
        context.detach(token)
    assert msg.properties["baggage"] == "tenant=t1"

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # what set_tracer_provider does, once
    try:
        msg = Message("TopicFast", b"x")
        span = tracing.start_publish_span(msg, "TopicFast", "pg")
        assert span is not None
        span.end()
        assert [s.name for s in exporter.get_finished_spans()] == ["TopicFast publish"]
        assert msg.properties["traceparent"].startswith("00-")
    finally:
        provider.shutdown()


def test_an_encoded_batch_is_traced_as_its_messages(cluster, spans):
    from rocketmq_sdk.producer import EncodedBatch
    from rocketmq_sdk.protocol.message_codec import decode_messages, encode_batch

    topic = unique("TopicTraceEncoded")
    msgs = [Message(topic, b"e1", tags="T"), Message(topic, b"e2")]
    for i, m in enumerate(msgs):
        m.properties["UNIQ_KEY"] = f"{i:032X}"
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        result = p.send_batch(EncodedBatch(topic, encode_batch(msgs), ["0" * 32, f"{1:032X}"]))
    (span,) = spans.get_finished_spans()
    assert span.attributes["messaging.batch.message_count"] == 2
    stored = decode_messages(cluster.broker.store.get_message("g", topic, result.message_queue.queue_id,
                                                              result.queue_offset, 2).body())
    assert [m.body for m in stored] == [b"e1", b"e2"]
    assert all(m.properties["traceparent"].startswith(f"00-{span.context.trace_id:032x}-") for m in stored)
