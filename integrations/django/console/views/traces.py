"""Message trace page: the records of a message in the trace topic, as a timeline picture and
a table (what the dashboard's message trace view shows)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from rocketmq_sdk.exceptions import MQError, TopicNotExistError
from rocketmq_sdk.trace import build_trace_graph, query_trace

from .. import service
from ..forms import NAME_RE
from ..svg import trace_timeline
from .base import viewer


@viewer
def trace(request: HttpRequest) -> HttpResponse:
    """``?msg_id=<UNIQ_KEY>&trace_topic=<topic>``."""
    msg_id = request.GET.get("msg_id", "").strip()
    trace_topic = request.GET.get("trace_topic", "").strip() or service.console_setting("TRACE_TOPIC")
    ctx: dict = {"msg_id": msg_id, "trace_topic": trace_topic, "page": "traces"}
    if msg_id:
        if not msg_id.isalnum() or not NAME_RE.match(trace_topic):
            messages.error(request, "illegal message id or trace topic")
        else:
            try:
                records = query_trace(service.admin(), msg_id, trace_topic)
            except TopicNotExistError:
                records = []
                messages.warning(request, f"trace topic {trace_topic} does not exist (nothing traced yet)")
            except MQError as exc:
                records = []
                messages.error(request, f"trace query failed: {exc}")
            graph = build_trace_graph(msg_id, records)
            ctx.update(records=sorted(records, key=lambda r: r.time_stamp), graph=graph, timeline=mark_safe(trace_timeline(graph)))  # noqa: S308 - escaped in svg.py
    return render(request, "rocketmq_console/trace.html", ctx)
