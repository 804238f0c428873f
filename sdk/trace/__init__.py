"""Apache RocketMQ message traces: the record format (:mod:`.codec`), the asynchronous
dispatcher that writes them to the trace topic (:mod:`.dispatcher`), the producer/consumer hooks
(:mod:`.hooks`) and reading a message's trace back (:mod:`.view`). See ``docs/message-trace.md``.
OpenTelemetry spans (optional ``opentelemetry-api``) share :mod:`.otel`: the producers' publish
spans and the glue the consumers' spans build on.
"""

from .codec import (
    TRACE_TOPIC_DEFAULT,
    ConsumeReturnType,
    TraceMessageType,
    TraceRecord,
    TraceType,
    decode_trace_text,
    encode_record,
    record_keys,
)
from .dispatcher import TraceDispatcher
from .view import ConsumeNode, TraceGraph, build_trace_graph, query_trace

__all__ = ["TRACE_TOPIC_DEFAULT", "ConsumeNode", "ConsumeReturnType", "TraceDispatcher", "TraceGraph",
           "TraceMessageType", "TraceRecord", "TraceType", "build_trace_graph", "decode_trace_text",
           "encode_record", "query_trace", "record_keys"]
