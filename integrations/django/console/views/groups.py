"""Consumer group pages: list with lag and TPS, detail (clients with versions and languages,
per-queue progress, subscription consistency), reset offset by time, create/update/delete the
group config; producer connections."""

from __future__ import annotations

import re
from collections import Counter

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from rocketmq_sdk.admin import GroupSummary
from rocketmq_sdk.admin.broker_tables import GroupConfig
from rocketmq_sdk.exceptions import MQClientError, MQError, TopicNotExistError
from rocketmq_sdk.protocol.codes import version_desc

from .. import service
from ..forms import NAME_RE, GroupConfigForm, ResetOffsetForm
from .base import (
    can_operate,
    cleaned,
    cluster_names,
    name_or_404,
    operator,
    posted_cluster,
    report_cluster_change,
    try_call,
    viewer,
)


def version_name(version: int | None) -> str:
    """``V4_9_8`` for ordinal 409 (Java ``MQVersion.getVersionDesc``); ``-`` when unknown."""
    return "-" if version is None else version_desc(version)


def subscription_consistency(running: dict) -> tuple[bool, list[dict]]:
    """(consistent, rows): each client's subscriptions (topic -> ``TYPE:expression``) from its
    running info. The group is consistent when every client subscribes the same topics with the
    same expressions (the seed notes' 订阅关系一致性); otherwise the clients that differ from the
    most common subscription set get ``differs=True``."""
    rows = []
    for client_id, info in sorted(running.items()):
        subs = {s.topic: f"{s.expression_type or 'TAG'}:{s.sub_string}" for s in (info.subscription_set or [])}
        rows.append({"client_id": client_id, "subs": dict(sorted(subs.items()))})
    counts = Counter(tuple(r["subs"].items()) for r in rows)
    common = counts.most_common(1)[0][0] if counts else ()
    for r in rows:
        r["differs"] = tuple(r["subs"].items()) != common
    return len(counts) <= 1, rows


CONFIG_FIELDS = ("consume_enable", "consume_broadcast_enable", "consume_from_min_enable",
                 "notify_consumer_ids_changed_enable", "retry_queue_nums", "retry_max_times", "broker_id",
                 "which_broker_when_consume_slowly")
#: the settings as the group page labels them (Java's names)
CONFIG_LABELS = ("consumeEnable", "consumeBroadcastEnable", "consumeFromMinEnable", "notifyConsumerIdsChangedEnable",
                 "retryQueueNums", "retryMaxTimes", "brokerId", "whichBrokerWhenConsumeSlowly")


def consume_modes(adm, group: str) -> list[dict]:
    """The group's consume modes (RocketMQ 5.x ``setConsumeMode``) on every master that keeps
    them: ``{"topic", "broker", "mode", "pop_share_queue_num"}``; 4.x brokers have none."""
    rows = []
    try:
        masters = [b for b in adm.cluster_list(runtime=False) if b.broker_id == 0]
    except MQError:
        return rows
    for b in masters:
        try:
            table = adm.consume_modes(b.addr)
        except MQError:  # a 4.x broker (REQUEST_CODE_NOT_SUPPORTED) or away
            continue
        for topic, by_group in sorted(table.items()):
            entry = by_group.get(group) if isinstance(by_group, dict) else None
            if isinstance(entry, dict):
                rows.append({"topic": topic, "broker": b.broker_name, "mode": entry.get("mode", ""),
                             "pop_share_queue_num": entry.get("popShareQueueNum", 0)})
    return rows


@viewer
def groups(request: HttpRequest) -> HttpResponse:
    """Groups with offsets (their retry topics) and groups only configured on the brokers (their
    subscription-group tables, as the dashboard lists them)."""
    adm = service.admin()
    rows = try_call(request, "consumer groups", adm.consumer_groups, default=[])
    known = {g.group for g in rows}
    configs = try_call(request, "subscription groups", adm.subscription_groups, default=[])
    config_only = [c.group for c in configs if c.group not in known]
    rows += [GroupSummary(g, 0, None, None, None, 0.0, 0) for g in config_only]
    clusters = cluster_names(request)
    return render(request, "rocketmq_console/groups.html", {
        "rows": sorted(rows, key=lambda g: g.group), "config_only": set(config_only),
        "form": GroupConfigForm(initial={"cluster": clusters[0] if clusters else ""}),
        "can_operate": can_operate(request), "page": "groups"})


def group_config_of(request: HttpRequest, group: str) -> GroupConfig | None:
    """The group's settings on the brokers, None (no message) when no broker stores it."""
    try:
        return service.admin().subscription_group_config(group)
    except MQClientError:
        return None
    except MQError as exc:
        messages.error(request, f"group config: {exc}")
        return None


@viewer
def group_detail(request: HttpRequest, group: str) -> HttpResponse:
    name_or_404(group)
    adm = service.admin()
    config = group_config_of(request, group)
    if config is not None and not group_has_route(group):
        progress = None  # configured, never used by a client: no retry topic, nothing to read
    else:
        progress = try_call(request, "consumer progress", adm.consumer_progress, group)
    try:
        conns = adm.consumer_connection(group)
    except MQError:  # no client online: not an error on this page
        conns = None
    running: dict = {}
    if conns is not None and conns.connections:
        running = try_call(request, "consumer running info", adm.consumer_running_info, group, default={})
    consistent, sub_rows = subscription_consistency(running)
    topics = sorted({q.topic for q in progress.queues}) if progress else []
    return render(request, "rocketmq_console/group_detail.html", {
        "group": group, "progress": progress, "conns": conns, "consistent": consistent, "sub_rows": sub_rows,
        "versions": {c.client_id: version_name(c.version) for c in (conns.connections if conns else [])},
        "reset_form": ResetOffsetForm(initial={"topic": next((t for t in topics if not t.startswith("%RETRY%")), "")}),
        "topics": topics, "clusters": (clusters := cluster_names(request)), "modes": consume_modes(adm, group),
        "reset": request.session.pop("rocketmq_console_reset", None), "config": config,
        "config_rows": [(label, [getattr(c, f) for c in config.brokers.values()])
                        for f, label in zip(CONFIG_FIELDS, CONFIG_LABELS, strict=True)] if config else [],
        "config_form": GroupConfigForm(initial={
            "group": group, "cluster": clusters[0] if clusters else "",
            **({f: getattr(config.config, f) for f in CONFIG_FIELDS} if config else {})}),
        "can_operate": can_operate(request), "page": "groups"})


def group_has_route(group: str) -> bool:
    """The group's retry topic has a route (a client of the group has consumed)."""
    try:
        service.admin().topic_route(f"%RETRY%{group}")
    except TopicNotExistError:
        return False
    except MQError:
        return True  # let the progress call report the problem
    return True


CLIENT_ID_RE = re.compile(r"^[A-Za-z0-9@#:.,_\-\[\]%]{1,255}$")
#: process-queue columns in the dashboard's order (other keys a client sends follow, sorted)
QUEUE_COLUMNS = ("commitOffset", "cachedMsgMinOffset", "cachedMsgMaxOffset", "cachedMsgCount", "cachedMsgSizeInMiB",
                 "locked", "droped", "lastPullTimestamp", "lastConsumeTimestamp", "lastLockTimestamp",
                 "tryUnlockTimes", "transactionMsgMinOffset", "transactionMsgMaxOffset", "transactionMsgCount")
#: per-topic consume statistics of a Java client (``ConsumeStatus``)
STATUS_COLUMNS = ("pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS", "consumeFailedMsgs")


@viewer
def group_client(request: HttpRequest, group: str, client_id: str) -> HttpResponse:
    """One client's full running info (GET_CONSUMER_RUNNING_INFO 307, as the dashboard's client
    detail): its settings, subscriptions, per-topic consume statistics and the state of every
    queue it owns (process queue)."""
    name_or_404(group)
    if not CLIENT_ID_RE.match(client_id):
        raise Http404("no such client")
    info = try_call(request, "consumer running info", service.admin().consumer_running_info, group, client_id,
                    default={}).get(client_id)
    ctx: dict = {"group": group, "client_id": client_id, "info": info, "page": "groups"}
    if info is not None:
        extra = sorted({k for row in info.mq_table.values() for k in row} - set(QUEUE_COLUMNS))
        columns = [c for c in QUEUE_COLUMNS if any(c in row for row in info.mq_table.values())] + extra
        ctx.update(
            properties=sorted(info.properties.items()),
            queue_columns=columns,
            queues=[(mq, [(c, row.get(c, "")) for c in columns])
                    for mq, row in sorted(info.mq_table.items(), key=lambda kv: (kv[0].topic, kv[0].broker_name,
                                                                                 kv[0].queue_id))],
            status=[(topic, [stats.get(c, "") if isinstance(stats, dict) else "" for c in STATUS_COLUMNS])
                    for topic, stats in sorted(info.status_table.items())],
            status_columns=STATUS_COLUMNS)
    return render(request, "rocketmq_console/group_client.html", ctx)


@operator("reset offset")
def group_reset(request: HttpRequest, group: str) -> HttpResponse:
    name_or_404(group)
    d = cleaned(ResetOffsetForm(request.POST))
    entries = service.admin().reset_offset_by_time(group, d["topic"], d["timestamp"])
    request.session["rocketmq_console_reset"] = [
        {"broker": e.broker_name, "queue_id": e.queue_id, "offset": e.offset, "direct": e.direct} for e in entries]
    how = (" (group offline: offsets written on the brokers directly; consumers started now begin there)"
           if any(e.direct for e in entries) else "")
    messages.success(request, f"offsets of {group} on {d['topic']} reset ({len(entries)} queues){how}")
    return redirect("rocketmq_console:group", group=group)


@operator("create/update group")
def group_config(request: HttpRequest) -> HttpResponse:
    d = cleaned(GroupConfigForm(request.POST))
    written = service.admin().update_subscription_group(d["group"], cluster=d["cluster"],
                                                        **{f: d[f] for f in CONFIG_FIELDS})
    report_cluster_change(request, d["cluster"], f"group {d['group']} created/updated", written)
    return redirect("rocketmq_console:group", group=d["group"])


@operator("delete group")
def group_delete(request: HttpRequest, group: str) -> HttpResponse:
    name_or_404(group)
    cluster = posted_cluster(request, "group")
    written = service.admin().delete_subscription_group(group, cluster=cluster)
    report_cluster_change(request, cluster, f"group {group} deleted from cluster {cluster}", written)
    return redirect("rocketmq_console:groups")


@viewer
def producers(request: HttpRequest) -> HttpResponse:
    group = request.GET.get("group", "").strip()
    topic = request.GET.get("topic", "").strip()
    rows = None
    if group and topic:
        if not NAME_RE.match(group) or not NAME_RE.match(topic):
            messages.error(request, "illegal group or topic name")
        else:
            rows = try_call(request, "producer connections", service.admin().producer_connection, group, topic,
                            default=[])
    return render(request, "rocketmq_console/producers.html", {
        "group": group, "topic": topic, "rows": rows, "page": "producers"})
