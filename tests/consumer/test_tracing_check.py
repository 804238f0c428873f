"""The consumer's tracing check: no spans without a provider (fast path), and a provider set
later through OpenTelemetry's own ``set_tracer_provider`` (no patched functions) is used from the
next listener call on."""

from __future__ import annotations

import pytest
from rocketmq_sdk.consumer import tracing as ctracing
from rocketmq_sdk.protocol.message import MessageExt


def test_provider_set_later_is_seen_at_the_next_call(monkeypatch):
    trace = pytest.importorskip("opentelemetry.trace")
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    if getattr(trace, "_TRACER_PROVIDER", "missing") is not None:
        pytest.skip("a global tracer provider is already set in this process")
    msgs = [MessageExt(topic="T", body=b"x", queue_id=1)]
    assert not ctracing.tracing_active()
    assert ctracing.start_process_spans(msgs, "g") is None
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # what set_tracer_provider does, undone after the test (it may be called once per process)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    assert ctracing.tracing_active()
    spans = ctracing.start_process_spans(msgs, "g")
    assert spans is not None
    spans.end(None)
    assert [s.name for s in exporter.get_finished_spans()] == ["T process"]
