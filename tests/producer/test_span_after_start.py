"""A producer without message tracing picks its span starter once, at construction (one call
less per send): OpenTelemetry configured after the producer started is still used by its next
sync send (the blocking transport), and a producer with message tracing still records its
Pub trace through the same send."""

from __future__ import annotations

import pytest
from rocketmq_sdk import Message, Producer

from .conftest import unique


def test_a_tracer_provider_set_after_start_traces_the_next_sync_send(cluster, monkeypatch):
    pytest.importorskip("opentelemetry.sdk", reason="the optional opentelemetry packages are not installed")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    topic = unique("TopicLateOtel")
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        before = Message(topic, b"before")
        p.send(before)
        assert "traceparent" not in before.properties
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # what set_tracer_provider does
        try:
            after = Message(topic, b"after")
            result = p.send(after)
        finally:
            provider.shutdown()
    (span,) = exporter.get_finished_spans()
    assert span.name == f"{topic} publish" and span.attributes["messaging.message.id"] == result.msg_id
    assert after.properties["traceparent"].startswith(f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-")


def test_message_tracing_still_wraps_each_sync_send(cluster):
    topic = unique("TopicMsgTrace")
    with Producer(unique("pg"), cluster.namesrv_addr, enable_msg_trace=True) as p:
        assert p._preparer.start_span == p._start_span
        records: list = []
        dispatcher = p._msg_trace
        original = dispatcher.append
        dispatcher.append = lambda recs: (records.extend(recs), original(recs))[1]
        result = p.send(Message(topic, b"traced"))
    assert [r.msg_id for r in records] == [result.msg_id] and records[0].topic == topic
