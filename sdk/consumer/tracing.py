"""OpenTelemetry spans of consumers (messaging semantic conventions for RocketMQ).

* ``"<topic> receive"`` (CONSUMER): one per pulled batch of a push consumer, ended at once,
  linked to the publish span of every message in it.
* ``"<topic> process"`` (CONSUMER): one per message around the listener call, a child of the
  producer's publish span (its context travels in the ``traceparent``/``tracestate`` user
  properties, see :mod:`rocketmq_sdk.trace.otel`) and linked to it. A listener that
  returns anything but success (``RECONSUME_LATER``, ``SUSPEND_CURRENT_QUEUE_A_MOMENT``, None)
  or raises sets the span status to ERROR (the exception is recorded). For a one-message batch
  the span is current while the listener runs, so the listener's own spans nest under it.

Attributes: ``messaging.system=rocketmq``, ``messaging.operation(.type)``,
``messaging.destination.name`` (the topic the listener sees), ``messaging.rocketmq.client_group``,
``messaging.client.id``, ``messaging.message.id``, ``messaging.rocketmq.message.tag``,
``messaging.rocketmq.message.keys``, ``messaging.destination.partition.id``,
``messaging.message.body.size``, ``messaging.rocketmq.broker_name``.

Everything here is skipped (a couple of attribute lookups) when ``opentelemetry-api`` is not
installed or no tracer provider is configured.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from ..protocol.message import MessageExt
from ..trace import otel as _otel

__all__ = ["ProcessSpans", "record_receive_span", "start_process_spans", "tracing_active"]

log = logging.getLogger("rocketmq_sdk.consumer.tracing")

# rocketmq_sdk.trace.otel owns the optional OpenTelemetry imports and the tracer name
_trace = _otel.trace_api
if _trace is not None:
    from opentelemetry.trace import Link as _Link
    from opentelemetry.trace import NoOpTracerProvider as _NoOpTracerProvider
    from opentelemetry.trace import ProxyTracerProvider as _ProxyTracerProvider

    _propagate = _otel.propagate_api
    _SpanKind = _otel.SpanKind
    _Status = _otel.Status
    _StatusCode = _otel.StatusCode
    from opentelemetry import context as _otel_context

_SUCCESS_NAMES = frozenset({"CONSUME_SUCCESS", "SUCCESS", "COMMIT"})


_UNSET = object()
_ORIG_GET_TRACER_PROVIDER = _trace.get_tracer_provider if _trace is not None else None


def _tracer() -> Any | None:
    """The SDK tracer, or None while no real tracer provider is configured (the fast path).

    Checked per listener call and per pull: with ``get_tracer_provider`` not replaced, no global
    provider set and ``OTEL_PYTHON_TRACER_PROVIDER`` unset (read once, as the producer's
    tracing does) it answers None without ``get_tracer_provider``, whose environment lookup
    costs ~0.8 µs per call; a provider set later is seen at the next call."""
    if _trace is None:
        return None
    if _trace.get_tracer_provider is _ORIG_GET_TRACER_PROVIDER and getattr(_trace, "_TRACER_PROVIDER", _UNSET) is None:
        env = _otel.ENV_PROVIDER
        if not env:
            env.append("OTEL_PYTHON_TRACER_PROVIDER" in os.environ)
        if not env[0]:
            return None
    provider = _trace.get_tracer_provider()
    if isinstance(provider, (_ProxyTracerProvider, _NoOpTracerProvider)):
        return None
    return provider.get_tracer(_otel.INSTRUMENTATION)


def tracing_active() -> bool:
    """True when process and receive spans are recorded (a tracer provider is configured)."""
    return _tracer() is not None


def _attributes(m: MessageExt, group: str, client_id: str | None, operation: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "messaging.system": "rocketmq",
        "messaging.operation": operation,
        "messaging.operation.type": operation,
        "messaging.destination.name": m.topic,
        "messaging.rocketmq.client_group": group,
        "messaging.message.id": m.msg_id,
        "messaging.destination.partition.id": str(m.queue_id),
        "messaging.message.body.size": len(m.body),
    }
    _otel.set_present(attrs, messaging__client__id=client_id, messaging__rocketmq__broker_name=m.broker_name,
                      messaging__rocketmq__message__tag=m.tags, messaging__rocketmq__message__keys=m.keys,
                      messaging__rocketmq__message__reconsume_times=m.reconsume_times)
    return attrs


def _creation_context(m: MessageExt) -> tuple[Any, list]:
    """(parent context, links) from the message's ``traceparent`` property."""
    ctx = _propagate.extract(m.properties)
    span_ctx = _trace.get_current_span(ctx).get_span_context()
    if span_ctx.is_valid:
        return ctx, [_Link(span_ctx)]
    return None, []


class ProcessSpans:
    """The open process spans of one listener call; use :meth:`call` once."""

    __slots__ = ("_spans",)

    def __init__(self, spans: list) -> None:
        self._spans = spans

    def call(self, listener: Callable[[list[MessageExt], Any], Any], msgs: list[MessageExt], ctx: Any) -> Any:
        """Run ``listener(msgs, ctx)`` inside the spans and end them with its outcome.

        Returns:
            the listener's result. Raises what the listener raises (after recording it).
        """
        token = None
        if len(self._spans) == 1:
            token = _otel_context.attach(_trace.set_span_in_context(self._spans[0]))
        try:
            status = listener(msgs, ctx)
        except BaseException as exc:
            self.end(None, exc)
            raise
        finally:
            if token is not None:
                _otel_context.detach(token)
        self.end(status)
        return status

    def end(self, status: Any, error: BaseException | None = None) -> None:
        """Set the outcome on every span and end them."""
        name = getattr(status, "name", None) if status is not None else None
        for span in self._spans:
            try:
                if error is not None:
                    span.record_exception(error)
                    span.set_status(_Status(_StatusCode.ERROR, f"{type(error).__name__}: {error}"))
                elif name not in _SUCCESS_NAMES:
                    span.set_status(_Status(_StatusCode.ERROR, name or f"listener returned {status!r}"))
                if name:
                    span.set_attribute("messaging.rocketmq.consume_status", name)
            finally:
                span.end()


def start_process_spans(msgs: Sequence[MessageExt], group: str, client_id: str | None = None) -> ProcessSpans | None:
    """Start one process span per message (call it after the retry topic was swapped back, so
    the spans name the topic the listener sees).

    Returns:
        the spans, or None when tracing is off (no OpenTelemetry, no tracer provider).
    """
    tracer = _tracer()
    if tracer is None or not msgs:
        return None
    try:
        spans = []
        for m in msgs:
            parent, links = _creation_context(m)
            spans.append(tracer.start_span(f"{m.topic} process", context=parent, kind=_SpanKind.CONSUMER,
                                           links=links, attributes=_attributes(m, group, client_id, "process")))
        return ProcessSpans(spans)
    except Exception:  # tracing must never break consumption
        log.debug("starting process spans failed", exc_info=True)
        return None


def record_receive_span(msgs: Sequence[MessageExt], topic: str, group: str, client_id: str | None = None) -> None:
    """Record the receive span of one pulled batch (linked to every message's publish span)."""
    tracer = _tracer()
    if tracer is None or not msgs:
        return
    try:
        links = [link for m in msgs for link in _creation_context(m)[1]]
        attrs: dict[str, Any] = {
            "messaging.system": "rocketmq",
            "messaging.operation": "receive",
            "messaging.operation.type": "receive",
            "messaging.destination.name": topic,
            "messaging.rocketmq.client_group": group,
            "messaging.batch.message_count": len(msgs),
            "messaging.destination.partition.id": str(msgs[0].queue_id),
        }
        if client_id:
            attrs["messaging.client.id"] = client_id
        tracer.start_span(f"{topic} receive", kind=_SpanKind.CONSUMER, links=links, attributes=attrs).end()
    except Exception:  # tracing must never break pulling
        log.debug("recording the receive span failed", exc_info=True)
