"""Cluster page: brokers per cluster with role, version, address, TPS, today's counts, disk use,
and per DLedger group (reference brokers in DLedger mode) its leader, term and each member's log
index and lag behind the leader (entries); broker detail: runtime info and config. The TPS columns are the sampler's latest figures (growth
of the day's put/get counters) when it has them, else what the broker reports."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from rocketmq_sdk.admin.cluster import dledger_fields
from rocketmq_sdk.admin.models import BrokerInfo

from .. import service
from ..sampler import ensure_sampler, first_float
from .base import try_call, viewer

# runtime-info keys shown as columns (4.9.8 GET_BROKER_RUNTIME_INFO)
_TODAY_IN = "msgPutTotalTodayNow"
_TODAY_OUT = "msgGetTotalTodayNow"
_DISK = "commitLogDiskRatio"


def _disk_pct(value: str | None) -> str:
    try:
        return f"{float(value) * 100:.1f} %" if value is not None else "-"
    except ValueError:
        return value or "-"


def dledger_groups(brokers: list[BrokerInfo]) -> list[dict]:
    """Per DLedger group (broker name) of ``brokers`` (runtime DLedger fields filled): ``name``,
    ``leader`` (member id or None during an election), ``term`` (the highest a member reports)
    and ``members`` (``id``, ``role``, ``addr``, ``index``: last log index, ``lag``: entries
    behind the leader's log as the leader sees it, None when unknown), sorted by member id."""
    by_name: dict[str, list[BrokerInfo]] = {}
    for b in brokers:
        if b.dledger_role and b.dledger_id:
            by_name.setdefault(b.broker_name, []).append(b)
    groups = []
    for name, members in sorted(by_name.items()):
        leader = next((b for b in members if b.dledger_role == "LEADER"), None)
        marks = (leader.dledger_peers or {}) if leader is not None else {}
        rows = [{"id": b.dledger_id, "role": b.dledger_role, "addr": b.addr, "index": b.dledger_index,
                 "lag": marks[b.dledger_id][1] if b.dledger_id in marks else None}
                for b in sorted(members, key=lambda m: m.dledger_id or "")]
        groups.append({"name": name, "leader": leader.dledger_id if leader is not None else None,
                       "term": max((b.dledger_term for b in members if b.dledger_term is not None), default=None),
                       "members": rows})
    return groups


@viewer
def cluster(request: HttpRequest) -> HttpResponse:
    smp = ensure_sampler()
    latest = smp.samples[-1] if smp.samples else None
    adm = service.admin()
    brokers = try_call(request, "cluster list", adm.cluster_list, default=[], runtime=False)
    rows = []
    for b in brokers:
        info = try_call(request, f"runtime info of {b.addr}", adm.broker_runtime_info, b.addr, default={})
        dledger_fields(b, info)
        in_tps, out_tps = first_float(info.get("putTps")), first_float(info.get("getTransferedTps"))
        if latest is not None and b.broker_name in latest.broker_in_tps and b.role == "MASTER":
            in_tps, out_tps = latest.broker_in_tps[b.broker_name], latest.broker_out_tps[b.broker_name]
        rows.append({"b": b, "version": info.get("brokerVersionDesc", "-"), "in_tps": in_tps, "out_tps": out_tps,
                     "today_in": info.get(_TODAY_IN, "-"), "today_out": info.get(_TODAY_OUT, "-"),
                     "disk": _disk_pct(info.get(_DISK))})
    clusters: dict[str, list] = {}
    for r in rows:
        clusters.setdefault(r["b"].cluster, []).append(r)
    cards = [(name, rs, dledger_groups([r["b"] for r in rs])) for name, rs in sorted(clusters.items())]
    return render(request, "rocketmq_console/cluster.html", {"clusters": cards, "page": "cluster"})


@viewer
def broker(request: HttpRequest, addr: str) -> HttpResponse:
    adm = service.admin()
    known = {b.addr for b in try_call(request, "cluster list", adm.cluster_list, default=[], runtime=False)}
    runtime = config = {}
    if addr in known:  # only addresses the name server lists are contacted
        runtime = try_call(request, "runtime info", adm.broker_runtime_info, addr, default={})
        config = try_call(request, "broker config", adm.broker_config, addr, default={})
    return render(request, "rocketmq_console/broker.html", {
        "addr": addr, "known": addr in known, "runtime": sorted(runtime.items()), "config": sorted(config.items()),
        "page": "cluster"})
