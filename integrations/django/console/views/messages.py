"""Message pages: query by topic + time range (paged), by key, by message id; detail
(properties, body preview with encoding detection, consuming groups and their status); resend
to a group (CONSUME_MESSAGE_DIRECTLY); DLQ view, resend to the original topic, export."""

from __future__ import annotations

import json
import time
from datetime import datetime
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from rocketmq_sdk.admin.models import message_to_dict
from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.message import Message, MessageExt

from .. import service
from ..forms import NAME_RE, ResendForm
from ..security import private_page
from .base import can_operate, cleaned, operator, try_call, viewer

PAGE_SIZE = 20
MAX_SCAN = 2000  # messages read at most for one time-range query
DLQ_PREFIX = "%DLQ%"
# properties the broker or client sets; a resend copies only the user's
_SYSTEM_PROPS = {MC.KEYS, MC.TAGS, MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "MIN_OFFSET", "MAX_OFFSET", "CLUSTER",
                 "REAL_TOPIC", "REAL_QID", "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "RECONSUME_TIME", "MAX_RECONSUME_TIMES",
                 "WAIT", "DELAY", "TRACE_ON", "MSG_REGION", "CONSUME_START_TIME", "PGROUP", "TRAN_MSG"}


def body_preview(body: bytes, limit: int = 4096) -> dict:
    """How to show a body: ``encoding`` (``json``, ``utf-8``, ``gbk`` or ``binary``), ``text``
    (pretty JSON, decoded text, or a hex dump of the first bytes), ``truncated``."""
    chunk = body[:limit]
    for enc in ("utf-8", "gbk"):
        try:
            text = body.decode(enc)
        except UnicodeDecodeError:
            continue
        if any(not c.isprintable() and c not in "\n\r\t" for c in text[:limit]):
            break  # decodes, but holds control characters: show the bytes
        if enc == "utf-8":
            try:
                return {"encoding": "json", "text": json.dumps(json.loads(text), indent=2, ensure_ascii=False)[:limit],
                        "truncated": len(body) > limit}
            except ValueError:
                pass
        return {"encoding": enc, "text": text[:limit], "truncated": len(body) > limit}
    lines = [f"{i:08x}  {chunk[i:i + 16].hex(' ')}" for i in range(0, min(len(chunk), 512), 16)]
    return {"encoding": "binary", "text": "\n".join(lines), "truncated": len(body) > 512}


def _parse_time(text: str, default_ms: int) -> int:
    text = (text or "").strip()
    if not text:
        return default_ms
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise ValueError(f"not a time: {text!r} (use yyyy-mm-dd hh:mm[:ss])") from None


def messages_by_time(topic: str, begin_ms: int, end_ms: int, *, limit: int = MAX_SCAN) -> list[MessageExt]:
    """Messages of ``topic`` stored in [begin_ms, end_ms], newest first, at most ``limit``
    (per queue: SEARCH_OFFSET_BY_TIMESTAMP for both ends, then pulls in between; as the
    dashboard's ``queryMessageByTopic``)."""
    adm = service.admin()
    out: list[MessageExt] = []
    for q in adm.topic_status(topic):
        lo = max(q.min_offset, adm.search_offset(topic, q.broker_name, q.queue_id, begin_ms))
        hi = min(q.max_offset, adm.search_offset(topic, q.broker_name, q.queue_id, end_ms) + 1)
        offset = lo
        while offset < hi and len(out) < limit:
            batch = adm.pull_messages(topic, q.broker_name, q.queue_id, offset, min(32, hi - offset))
            if not batch:
                break
            out.extend(m for m in batch if begin_ms <= m.store_timestamp <= end_ms)
            offset = batch[-1].queue_offset + 1
    out.sort(key=lambda m: m.store_timestamp, reverse=True)
    return out[:limit]


def _check_name(value: str, what: str) -> str:
    if not NAME_RE.match(value) or len(value) > 255:
        raise ValueError(f"illegal {what} name: {value!r}")
    return value


@private_page
@viewer
def message_search(request: HttpRequest) -> HttpResponse:
    """``?mode=time|key|id&topic=&begin=&end=&key=&msg_id=&page=``."""
    mode = request.GET.get("mode", "time")
    topic = request.GET.get("topic", "").strip()
    ctx: dict = {"mode": mode, "topic": topic, "key": request.GET.get("key", ""), "msg_id": request.GET.get("msg_id", ""),
                 "begin": request.GET.get("begin", ""), "end": request.GET.get("end", ""), "page": "messages"}
    adm = service.admin()
    try:
        if topic:
            _check_name(topic, "topic")
        if mode == "time" and topic:
            now = int(time.time() * 1000)
            begin, end = _parse_time(ctx["begin"], now - 3600_000), _parse_time(ctx["end"], now)
            found = messages_by_time(topic, begin, end)
            page = max(1, int(request.GET.get("page") or 1))
            ctx.update(results=with_broker_names(found[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]), total=len(found),
                       page_no=page, pages=max(1, -(-len(found) // PAGE_SIZE)), capped=len(found) >= MAX_SCAN)
        elif mode == "key" and topic and ctx["key"]:
            ctx["results"] = with_broker_names(adm.query_message_by_key(topic, ctx["key"].strip(), max_num=64))
        elif mode == "id" and ctx["msg_id"]:
            msg = adm.query_message_by_id(ctx["msg_id"].strip(), topic or None)
            return redirect("rocketmq_console:message", topic=msg.topic, msg_id=msg.msg_id)
    except (MQError, ValueError) as exc:
        messages.error(request, str(exc))
    topics = try_call(request, "topic list", adm.topic_list, default=[])
    ctx["topics"] = sorted(t for t in topics if not t.startswith("%RETRY%"))
    return render(request, "rocketmq_console/messages.html", ctx)


def _find(topic: str, msg_id: str) -> MessageExt:
    if not NAME_RE.match(topic) or not msg_id.isalnum():
        raise Http404("no such message")
    try:
        return service.admin().query_message_by_id(msg_id, topic)
    except MQError as exc:
        raise Http404(f"message {msg_id} not found in {topic}: {exc}") from None


def broker_of(msg: MessageExt) -> str | None:
    """The name of the broker that stores ``msg`` (from its store host when the message came
    from VIEW_MESSAGE_BY_ID or QUERY_MESSAGE, which carry no broker name)."""
    return msg.broker_name or with_broker_names([msg])[0].broker_name or None


def with_broker_names(msgs: list[MessageExt]) -> list[MessageExt]:
    """``msgs`` with ``broker_name`` filled in from the store host where it is missing."""
    if all(m.broker_name for m in msgs):
        return msgs
    names = {b.addr: b.broker_name for b in service.admin().cluster_list(runtime=False)}
    for m in msgs:
        if not m.broker_name:
            m.broker_name = names.get(m.store_host, "")
    return msgs


def consume_status(msg: MessageExt, topic_groups: list[str]) -> list[dict]:
    """Per consumer group of the topic: ``CONSUMED`` when its offset on the message's queue is
    past the message, ``NOT_CONSUMED_YET`` otherwise, ``UNKNOWN`` without offsets (the
    dashboard's ``messageTrackDetail``, from GET_CONSUME_STATS)."""
    out = []
    adm = service.admin()
    broker = broker_of(msg)
    for g in topic_groups:
        try:
            progress = adm.consumer_progress(g, msg.topic)
        except MQError:
            out.append({"group": g, "status": "UNKNOWN"})
            continue
        q = next((q for q in progress.queues if q.broker_name == broker and q.queue_id == msg.queue_id), None)
        if q is None:
            status = "UNKNOWN"
        else:
            status = "CONSUMED" if q.consumer_offset > msg.queue_offset else "NOT_CONSUMED_YET"
        out.append({"group": g, "status": status})
    return out


@private_page
@viewer
def message_detail(request: HttpRequest, topic: str, msg_id: str) -> HttpResponse:
    msg = _find(topic, msg_id)
    real_topic = msg.properties.get("RETRY_TOPIC") or msg.topic
    groups = try_call(request, "consumer groups", service.admin().topic_consumer_groups, real_topic, default=[])
    return render(request, "rocketmq_console/message_detail.html", {
        "msg": msg, "broker_name": broker_of(msg), "props": sorted(msg.properties.items()), "preview": body_preview(msg.body),
        "groups": consume_status(msg, groups) if not topic.startswith(DLQ_PREFIX) else [],
        "group_names": groups, "resend_form": ResendForm(initial={"group": groups[0] if groups else ""}),
        "trace_topic": service.console_setting("TRACE_TOPIC"), "result": request.session.pop("rocketmq_console_resend", None),
        "can_operate": can_operate(request), "page": "messages"})


@operator("resend message to group")
def message_resend(request: HttpRequest, topic: str, msg_id: str) -> HttpResponse:
    msg = _find(topic, msg_id)
    d = cleaned(ResendForm(request.POST))
    results = service.admin().consume_message_directly(d["group"], msg.offset_msg_id, d["client_id"] or None,
                                                       topic=topic)
    request.session["rocketmq_console_resend"] = {
        cid: {"result": getattr(r.consume_result, "name", str(r.consume_result)), "remark": r.remark or "",
              "time_ms": r.spent_time_mills} for cid, r in results.items()}
    messages.success(request, f"message {msg_id} sent to {len(results)} client(s) of {d['group']}")
    return redirect("rocketmq_console:message", topic=topic, msg_id=msg_id)


def _resend_copy(msg: MessageExt, topic: str) -> Message:
    props = {k: v for k, v in msg.properties.items() if k not in _SYSTEM_PROPS}
    return Message(topic, msg.body, tags=msg.tags or None, keys=list(msg.keys) or None, properties=props)


@private_page
@viewer
def dlq(request: HttpRequest) -> HttpResponse:
    """``?group=&begin=&end=&page=``: messages of ``%DLQ%<group>``."""
    group = request.GET.get("group", "").strip()
    ctx: dict = {"group": group, "begin": request.GET.get("begin", ""), "end": request.GET.get("end", ""), "page": "dlq",
                 "can_operate": can_operate(request)}
    adm = service.admin()
    ctx["dlq_groups"] = sorted(t[len(DLQ_PREFIX):] for t in try_call(request, "topic list", adm.topic_list, default=[])
                               if t.startswith(DLQ_PREFIX))
    if group:
        try:
            _check_name(group, "group")
            found = _dlq_messages(group, ctx["begin"], ctx["end"])
            page = max(1, int(request.GET.get("page") or 1))
            ctx.update(results=found[(page - 1) * PAGE_SIZE: page * PAGE_SIZE], total=len(found), page_no=page,
                       pages=max(1, -(-len(found) // PAGE_SIZE)))
        except (MQError, ValueError) as exc:
            messages.error(request, str(exc))
    return render(request, "rocketmq_console/dlq.html", ctx)


def _dlq_messages(group: str, begin: str, end: str) -> list[MessageExt]:
    now = int(time.time() * 1000)
    return messages_by_time(DLQ_PREFIX + group, _parse_time(begin, 0), _parse_time(end, now))


@private_page
@viewer
def dlq_export(request: HttpRequest) -> HttpResponse:
    """The DLQ messages of ``?group=`` (time range as :func:`dlq`) as a JSON download."""
    group = request.GET.get("group", "")
    try:
        _check_name(group, "group")
        found = _dlq_messages(group, request.GET.get("begin", ""), request.GET.get("end", ""))
    except (MQError, ValueError) as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    resp = JsonResponse([message_to_dict(m) for m in found], safe=False, json_dumps_params={"ensure_ascii": False})
    resp["Content-Disposition"] = f'attachment; filename="dlq-{group}.json"'
    return resp


def _dlq_ids(data: QueryDict) -> tuple[str, list[str]]:
    """The group and chosen message ids of a DLQ form (``ValueError`` when not legal)."""
    group = _check_name(data.get("group", ""), "group")
    ids = data.getlist("msg_id")
    if not ids:
        raise ValueError("choose at least one message")
    for msg_id in ids:
        if not msg_id.isalnum():
            raise ValueError(f"not a message id: {msg_id!r}")
    return group, ids


def _back_to_dlq(group: str) -> HttpResponse:
    return redirect(reverse("rocketmq_console:dlq") + "?" + urlencode({"group": group}))


@operator("resend DLQ messages")
def dlq_resend(request: HttpRequest) -> HttpResponse:
    """Have one online client of the DLQ's own group consume each chosen message again
    (CONSUME_MESSAGE_DIRECTLY 309), as rocketmq-dashboard's DLQ "resend": no new message is
    written, no other group sees it."""
    group, ids = _dlq_ids(request.POST)
    adm = service.admin()
    clients = [c.client_id for c in adm.consumer_connection(group).connections]  # 206 when none is online
    results = []
    for msg_id in ids:
        outcome = adm.consume_message_directly(group, msg_id, clients[0], DLQ_PREFIX + group)
        result = outcome[clients[0]].consume_result
        results.append(f"{msg_id}: {getattr(result, 'name', result)}")
    messages.success(request, f"{len(results)} message(s) consumed again by {clients[0]} of {group}: "
                              + ", ".join(results))
    return _back_to_dlq(group)


def _originals(group: str, ids: list[str]) -> list[tuple[MessageExt, str]]:
    """Each chosen DLQ message with its original topic."""
    adm = service.admin()
    out = []
    for msg_id in ids:
        msg = adm.query_message_by_id(msg_id, DLQ_PREFIX + group)
        original = msg.properties.get("RETRY_TOPIC") or msg.properties.get("REAL_TOPIC")
        if not original or original.startswith(DLQ_PREFIX):
            raise ValueError(f"message {msg_id} has no original topic")
        out.append((msg, original))
    return out


@private_page
@viewer
def dlq_copy_confirm(request: HttpRequest) -> HttpResponse:
    """``?group=&msg_id=...``: the confirmation page of "send a copy to the original topic"
    (no script needed: its button posts to :func:`dlq_send_copy` with ``confirmed=yes``)."""
    if not can_operate(request):
        raise PermissionDenied
    try:
        group, ids = _dlq_ids(request.GET)
        chosen = _originals(group, ids)
    except (MQError, ValueError) as exc:
        messages.error(request, f"send a copy: {exc}")
        return _back_to_dlq(request.GET.get("group", "") if NAME_RE.match(request.GET.get("group", "")) else "")
    return render(request, "rocketmq_console/dlq_confirm.html", {
        "group": group, "chosen": chosen, "page": "dlq"})


@operator("send DLQ messages to their topic")
def dlq_send_copy(request: HttpRequest) -> HttpResponse:
    """Send a copy (a new message, new id) of each chosen DLQ message to its original topic:
    every group subscribed there gets it. Only with ``confirmed=yes`` (posted by the
    confirmation page, :func:`dlq_copy_confirm`)."""
    group, ids = _dlq_ids(request.POST)
    if request.POST.get("confirmed") != "yes":
        raise ValueError("confirm on the confirmation page first")
    prod = service.producer()
    sent = [prod.send(_resend_copy(msg, original)).msg_id for msg, original in _originals(group, ids)]
    messages.success(request, f"{len(sent)} cop(ies) sent to the original topic, for every group subscribed "
                              f"there: {', '.join(sent)}")
    return _back_to_dlq(group)
