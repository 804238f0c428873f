"""Message trace page: the records of a message in the trace topic, as a timeline picture and
a table (what the dashboard's message trace view shows). A message is found by its id, or by
topic and key, or by topic and time range (the dashboard's tabs): those list the messages
found, each linked to its trace; a single match shows its trace at once."""

from __future__ import annotations

import time

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from rocketmq_sdk.exceptions import MQError, TopicNotExistError
from rocketmq_sdk.protocol.message import MessageExt
from rocketmq_sdk.trace import TraceMessageType, build_trace_graph, query_trace
from rocketmq_sdk.trace.view import records_in_order

from .. import service
from ..forms import NAME_RE
from ..security import private_page
from ..svg import trace_timeline
from .base import viewer
from .messages import MAX_SCAN, PAGE_SIZE, _parse_time, messages_by_time

MODES = ("id", "key", "time")


def _found(request: HttpRequest, mode: str, topic: str, key: str, begin: str, end: str) -> list[MessageExt] | None:
    """The messages a key or time search finds (None for an id search or bad input)."""
    if not NAME_RE.match(topic) or len(topic) > 255:
        messages.error(request, "illegal topic name")
        return None
    try:
        if mode == "key":
            return list(service.admin().query_message_by_key(topic, key, max_num=64))
        now = int(time.time() * 1000)
        return messages_by_time(topic, _parse_time(begin, now - 3600_000), _parse_time(end, now),
                                limit=min(MAX_SCAN, 10 * PAGE_SIZE))
    except (MQError, ValueError) as exc:
        messages.error(request, f"message search failed: {exc}")
        return None


@private_page
@viewer
def trace(request: HttpRequest) -> HttpResponse:
    """``?mode=id|key|time&msg_id=<UNIQ_KEY>&topic=&key=&begin=&end=&trace_topic=<topic>``."""
    g = request.GET
    mode = g.get("mode", "id") if g.get("mode") in MODES else "id"
    msg_id, topic, key = g.get("msg_id", "").strip(), g.get("topic", "").strip(), g.get("key", "").strip()
    trace_topic = g.get("trace_topic", "").strip() or service.console_setting("TRACE_TOPIC")
    ctx: dict = {"mode": mode, "msg_id": msg_id, "topic": topic, "key": key, "begin": g.get("begin", ""),
                 "end": g.get("end", ""), "trace_topic": trace_topic, "page": "traces"}
    if mode != "id" and topic and (key or mode == "time") and not msg_id:
        found = _found(request, mode, topic, key, ctx["begin"], ctx["end"])
        if found is not None:
            ctx["found"] = found
            if len(found) == 1:
                msg_id = ctx["msg_id"] = found[0].msg_id
    if msg_id:
        if not msg_id.isalnum() or not NAME_RE.match(trace_topic):
            messages.error(request, "illegal message id or trace topic (a business key? use the Key tab)")
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
            ctx.update(records=records_in_order(records), graph=graph,
                       msg_type=_msg_type(graph.producer.msg_type) if graph.producer else None,
                       timeline=mark_safe(trace_timeline(graph)))  # noqa: S308 - escaped in svg.py
    return render(request, "rocketmq_console/trace.html", ctx)


def _msg_type(value: int) -> str:
    try:
        return TraceMessageType(value).name
    except ValueError:
        return str(value)
