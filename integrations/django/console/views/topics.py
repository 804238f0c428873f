"""Topic pages: list with kind filters, create/update, delete, route, per-queue offsets,
consumer groups of a topic, permission change, send a test message."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol.message import Message

from .. import service
from ..forms import SendMessageForm, TopicForm, TopicPermForm
from ..kinds import KINDS, topic_kind
from .base import (
    can_operate,
    cleaned,
    name_or_404,
    operator,
    posted_cluster,
    report_cluster_change,
    try_call,
    viewer,
)


@viewer
def topics(request: HttpRequest) -> HttpResponse:
    adm = service.admin()
    kind = request.GET.get("kind", "normal")
    kind = kind if kind in KINDS else "normal"
    brokers = try_call(request, "cluster list", adm.cluster_list, default=[], runtime=False)
    system_names = {b.cluster for b in brokers} | {b.broker_name for b in brokers}
    names = try_call(request, "topic list", adm.topic_list, default=[])
    rows = [(t, topic_kind(t, system_names)) for t in sorted(names)]
    counts = {k: sum(1 for _, tk in rows if k == "all" or tk == k) for k in KINDS}
    rows = [r for r in rows if kind == "all" or r[1] == kind]
    search = request.GET.get("q", "").strip()[:255]
    if search:  # a name search, as the dashboard's filter box: case-insensitive substring
        rows = [r for r in rows if search.lower() in r[0].lower()]
    clusters = sorted({b.cluster for b in brokers})
    form = TopicForm(initial={"cluster": clusters[0] if clusters else ""})
    return render(request, "rocketmq_console/topics.html", {
        "rows": rows, "kind": kind, "kinds": KINDS, "counts": counts, "form": form, "clusters": clusters, "q": search,
        "can_operate": can_operate(request), "page": "topics"})


@viewer
def topic_detail(request: HttpRequest, topic: str) -> HttpResponse:
    name_or_404(topic)
    adm = service.admin()
    route = try_call(request, "route", adm.topic_route, topic)
    status = try_call(request, "status", adm.topic_status, topic, default=[]) if route else []
    groups = try_call(request, "consumer groups", adm.topic_consumer_groups, topic, default=[]) if route else []
    clusters = sorted({bd.cluster for bd in route.broker_datas}) if route else []
    configs = try_call(request, "topic config", adm.topic_configs, topic, default={}) if route else {}
    first = configs[min(configs)] if configs else None
    update_form = TopicForm(initial={
        "topic": topic, "cluster": clusters[0] if clusters else "",
        **({"read_queue_nums": first.read_queue_nums, "write_queue_nums": first.write_queue_nums,
            "perm": first.perm, "order": first.order} if first else {})})
    return render(request, "rocketmq_console/topic_detail.html", {
        "topic": topic, "route": route, "status": status, "groups": group_lags(request, groups, topic),
        "clusters": clusters, "configs": configs, "update_form": update_form,
        "total": sum(q.max_offset - q.min_offset for q in status), "send_form": SendMessageForm(),
        "perm_form": TopicPermForm(initial={"perm": route.queue_datas[0].perm if route and route.queue_datas else 6}),
        "sent": request.session.pop("rocketmq_console_sent", None),
        "can_operate": can_operate(request), "page": "topics"})


def group_lags(request: HttpRequest, groups: list[str], topic: str) -> list[dict]:
    """Each consumer group of ``topic`` with its lag on it, in total and per queue."""
    adm = service.admin()
    out = []
    for g in groups:
        try:
            progress = adm.consumer_progress(g, topic)
        except MQError as exc:
            messages.warning(request, f"progress of {g}: {exc}")
            out.append({"group": g, "total": None, "queues": []})
            continue
        queues = [q for q in progress.queues if q.topic == topic]
        out.append({"group": g, "total": sum(q.lag for q in queues), "queues": queues})
    return out


@operator("create/update topic")
def topic_create(request: HttpRequest) -> HttpResponse:
    d = cleaned(TopicForm(request.POST))
    addrs = service.admin().create_topic(d["topic"], cluster=d["cluster"], read_queue_nums=d["read_queue_nums"],
                                         write_queue_nums=d["write_queue_nums"], perm=d["perm"], order=d["order"])
    report_cluster_change(request, d["cluster"], f"topic {d['topic']} created/updated on {', '.join(addrs)}", addrs)
    return redirect("rocketmq_console:topic", topic=d["topic"])


@operator("update topic perm")
def topic_perm(request: HttpRequest, topic: str) -> HttpResponse:
    name_or_404(topic)
    form = TopicPermForm(request.POST)
    if not form.is_valid():
        raise ValueError("perm must be 2, 4 or 6")
    service.admin().update_topic_perm(topic, form.cleaned_data["perm"])
    messages.success(request, f"perm of {topic} set to {form.cleaned_data['perm']}")
    return redirect("rocketmq_console:topic", topic=topic)


@operator("delete topic")
def topic_delete(request: HttpRequest, topic: str) -> HttpResponse:
    name_or_404(topic)
    cluster = posted_cluster(request, "topic")
    written = service.admin().delete_topic(topic, cluster=cluster)
    report_cluster_change(request, cluster, f"topic {topic} deleted from cluster {cluster}", written)
    return redirect("rocketmq_console:topics")


@operator("send test message")
def topic_send(request: HttpRequest, topic: str) -> HttpResponse:
    name_or_404(topic)
    d = cleaned(SendMessageForm(request.POST))
    msg = Message(topic, d["body"].encode("utf-8"), tags=d["tags"] or None, keys=d["keys"].split() or None)
    result = service.producer().send(msg)
    request.session["rocketmq_console_sent"] = {
        "msg_id": result.msg_id, "offset_msg_id": result.offset_msg_id, "status": result.send_status.name,
        "broker": result.message_queue.broker_name, "queue_id": result.message_queue.queue_id,
        "queue_offset": result.queue_offset}
    messages.success(request, f"sent {result.msg_id} ({result.send_status.name})")
    return redirect("rocketmq_console:topic", topic=topic)
