"""OpenTelemetry glue shared by producers and consumers, and the producers' publish spans
(messaging semantic conventions for RocketMQ).

This module owns the optional ``opentelemetry-api`` imports (:data:`trace_api` and the others are
None without it), the tracer name :data:`INSTRUMENTATION` and the once-read
``OTEL_PYTHON_TRACER_PROVIDER`` flag; ``rocketmq_sdk.consumer.tracing`` builds its receive and
process spans on them.

Every send gets a PRODUCER span ``"<topic> publish"`` with ``messaging.*`` attributes, and the
span's context is injected into the message's user properties (``traceparent``/``tracestate``
with the default W3C propagator) so consumers can link their spans to it. Without the optional
``opentelemetry-api`` package (``pip install rocketmq-python-sdk[otel]``) this module does
nothing; with the API but no SDK configured, OpenTelemetry's own no-op tracer makes it free.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..protocol.codes import MessageConst as MC
from ..protocol.message import Message, SendResult

__all__ = ["ENV_PROVIDER", "INSTRUMENTATION", "PublishSpan", "SpanKind", "Status", "StatusCode", "context_api",
           "propagate_api", "publish_span_is_no_op", "start_publish_span", "trace_api", "tracing_available"]

log = logging.getLogger("rocketmq_sdk.trace.otel")

trace_api: Any
context_api: Any
propagate_api: Any
SpanKind: Any
Status: Any
StatusCode: Any
try:  # optional dependency
    from opentelemetry import context as context_api
    from opentelemetry import propagate as propagate_api
    from opentelemetry import trace as trace_api
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # pragma: no cover - depends on the environment
    trace_api = context_api = propagate_api = SpanKind = Status = StatusCode = None

#: the tracer name of the SDK's spans
INSTRUMENTATION = "rocketmq_sdk"

# The no-op case (API installed, no provider configured, nothing in the current context) is
# detected without ``get_tracer`` (whose ``get_tracer_provider`` reads ``os.environ`` on every
# call: ~4 µs per send with the span start and ``inject``); see :func:`_nothing_to_do`.
_UNSET = object()
_ORIG_GET_TRACER = trace_api.get_tracer if trace_api is not None else None
#: ``[OTEL_PYTHON_TRACER_PROVIDER is set]``, filled when first needed (the environment is read once)
ENV_PROVIDER: list[bool] = []
_QUIET_PROPAGATORS: dict[int, tuple[Any, bool]] = {}  # id -> (propagator, injects nothing from {})


def _quiet_propagator(prop: Any) -> bool:
    """True for the default W3C trace-context/baggage propagators (or a composite of them):
    from a context without a valid span nor baggage they inject nothing."""
    from opentelemetry.baggage.propagation import W3CBaggagePropagator
    from opentelemetry.propagators.composite import CompositePropagator
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    if type(prop) in (W3CBaggagePropagator, TraceContextTextMapPropagator):
        return True
    if type(prop) is CompositePropagator:
        parts = getattr(prop, "_propagators", None)
        return isinstance(parts, list | tuple) and all(_quiet_propagator(p) for p in parts)
    return False


def _nothing_to_do() -> bool:
    """True when a publish span would be OpenTelemetry's no-op span and ``inject`` would write
    nothing: ``get_tracer`` not replaced, no global tracer provider set (in code or through
    ``OTEL_PYTHON_TRACER_PROVIDER``, read once) or a ``NoOpTracerProvider``, an empty current
    context (no span, no baggage) and the default propagators. Checked on every send, so a
    provider configured later is used from the next send on."""
    if trace_api.get_tracer is not _ORIG_GET_TRACER:
        return False
    provider = getattr(trace_api, "_TRACER_PROVIDER", _UNSET)
    if provider is not None and type(provider) is not trace_api.NoOpTracerProvider:
        return False
    if not ENV_PROVIDER:
        import os

        ENV_PROVIDER.append("OTEL_PYTHON_TRACER_PROVIDER" in os.environ)
    if ENV_PROVIDER[0] or context_api.get_current():
        return False
    prop = propagate_api.get_global_textmap()
    known = _QUIET_PROPAGATORS.get(id(prop))
    if known is None or known[0] is not prop:
        if len(_QUIET_PROPAGATORS) > 64:
            _QUIET_PROPAGATORS.clear()
        known = _QUIET_PROPAGATORS[id(prop)] = (prop, _quiet_propagator(prop))
    return known[1]


def tracing_available() -> bool:
    """True when ``opentelemetry-api`` is importable."""
    return trace_api is not None


def publish_span_is_no_op() -> bool:
    """True when :func:`start_publish_span` would return None at once (no ``opentelemetry-api``,
    or the no-op case of :func:`_nothing_to_do`); callers skip building its arguments."""
    if trace_api is None:
        return True
    try:
        return _nothing_to_do()
    except Exception:  # tracing must never break a send; start_publish_span logs it
        return False


def set_present(attrs: dict[str, Any], **present: Any) -> None:
    """Add the truthy ``present`` values to span attributes ``attrs``, keys spelled with ``__``
    for ``.`` (OpenTelemetry leaves unset what a message does not carry: no tag, no keys...)."""
    for key, value in present.items():
        if value:
            attrs[key.replace("__", ".")] = list(value) if isinstance(value, (set, frozenset, tuple)) else value


def _message_type(msg: Message) -> str:
    props = msg.properties
    if props.get(MC.TRANSACTION_PREPARED) == "true":
        return "transaction"
    if props.get(MC.DELAY_TIME_LEVEL):
        return "delay"
    return "normal"


class PublishSpan:
    """An open publish span; call :meth:`end` exactly once (idempotent)."""

    __slots__ = ("_span", "_ended")

    def __init__(self, span: Any) -> None:
        self._span = span
        self._ended = False

    def end(self, result: SendResult | None = None, error: BaseException | None = None) -> None:
        """Record the outcome (message id, queue, offset, or the exception) and end the span."""
        if self._ended:
            return
        self._ended = True
        span = self._span
        try:
            if span.is_recording():
                if result is not None:
                    span.set_attribute("messaging.message.id", result.msg_id)
                    span.set_attribute("messaging.rocketmq.send_status", result.send_status.name)
                    mq = result.message_queue
                    span.set_attribute("messaging.rocketmq.broker_name", mq.broker_name)
                    span.set_attribute("messaging.destination.partition.id", str(mq.queue_id))
                    if result.queue_offset >= 0:
                        span.set_attribute("messaging.rocketmq.queue_offset", result.queue_offset)
                if error is not None:
                    span.record_exception(error)
                    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        finally:
            span.end()


def start_publish_span(msgs: Message | Sequence[Message], topic: str, group: str, *,
                       client_id: str | None = None, namespace: str | None = None,
                       fifo: bool = False, oneway: bool = False) -> PublishSpan | None:
    """Start the publish span of a send and inject its context into every message's properties.

    Args:
        msgs: the message, or the messages of a batch.
        topic: the topic as sent (with the namespace, if any).
        group: the producer group.
        client_id: the client instance id (``messaging.client.id``).
        namespace: the namespace (``messaging.rocketmq.namespace``).
        fifo: an ordered send (selector); sets ``messaging.rocketmq.message.type`` to ``fifo``.
        oneway: a oneway send (``messaging.rocketmq.send_mode``).

    Returns:
        the span, or None when OpenTelemetry is not installed or the span would be a no-op
        (no tracer provider configured and nothing to propagate).
    """
    if trace_api is None:
        return None
    try:
        if _nothing_to_do():
            return None
    except Exception:  # tracing must never break a send
        log.debug("checking the tracer provider failed", exc_info=True)
    batch = not isinstance(msgs, Message)
    msg_list: Sequence[Message] = [msgs] if isinstance(msgs, Message) else msgs
    first = msg_list[0]
    try:
        tracer = trace_api.get_tracer(INSTRUMENTATION)
        span = tracer.start_span(f"{topic} publish", kind=SpanKind.PRODUCER)
        if span.is_recording():
            attrs: dict[str, Any] = {
                "messaging.system": "rocketmq",
                "messaging.operation": "publish",
                "messaging.operation.type": "publish",
                "messaging.destination.name": topic,
                "messaging.rocketmq.client_group": group,
                "messaging.rocketmq.message.type": "fifo" if fifo else _message_type(first),
                "messaging.rocketmq.send_mode": "oneway" if oneway else "request",
            }
            set_present(attrs, messaging__client__id=client_id, messaging__rocketmq__namespace=namespace)
            if batch:
                attrs["messaging.batch.message_count"] = len(msg_list)
            else:
                attrs["messaging.message.body.size"] = len(first.body)
                set_present(attrs, messaging__rocketmq__message__tag=first.tags,
                            messaging__rocketmq__message__keys=first.keys,
                            messaging__rocketmq__message__delay_time_level=first.delay_time_level)
            span.set_attributes(attrs)
        ctx = trace_api.set_span_in_context(span)
        for m in msg_list:
            propagate_api.inject(m.properties, context=ctx)
        return PublishSpan(span)
    except Exception:  # tracing must never break a send
        log.debug("starting the publish span failed", exc_info=True)
        return None
