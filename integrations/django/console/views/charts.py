"""Charts page: TPS per broker, topic and group and consumer lag: the last hour from the samples
in memory (every ``SAMPLE_INTERVAL_S``), or a day from the one-minute samples stored in the
console's database (also the last hour right after a restart); the top topics and groups by TPS
and by lag."""

from __future__ import annotations

import time

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe

from ..sampler import SERIES, Sampler, ensure_sampler, stored_series
from ..svg import line_chart
from .base import viewer

MAX_LINES = 8
TOP_N = 5
RANGES = {"hour": 3600.0, "day": 86400.0}


def _series(smp: Sampler, kind: str, span: str) -> dict[str, list[tuple[float, float]]]:
    if span == "hour" and len(smp.samples) >= 2:
        return {n: smp.series(kind, n) for n in smp.names(kind)}
    return stored_series(kind, time.time() - RANGES[span])  # a day, or an hour just after a restart


def _top(latest: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(latest.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_N]


@viewer
def charts(request: HttpRequest) -> HttpResponse:
    smp = ensure_sampler()
    group = request.GET.get("group", "")
    span = request.GET.get("range", "hour") if request.GET.get("range") in RANGES else "hour"
    data = {kind: _series(smp, kind, span) for kind in SERIES}

    def chart(title: str, kind: str, only: str = "") -> str:
        names = [n for n in sorted(data[kind]) if not only or n == only]
        if kind in ("group_lag", "group_tps", "topic_tps"):  # busiest first
            names.sort(key=lambda n: -max((v for _, v in data[kind][n]), default=0))
        return mark_safe(line_chart(title, {n: data[kind][n] for n in names[:MAX_LINES]}))  # noqa: S308

    charts_ = [chart("Consumer lag (messages)" + (f" · {group}" if group else ""), "group_lag", group),
               chart("Consume TPS per group", "group_tps", group),
               chart("Put TPS per broker", "broker_in_tps"), chart("Get TPS per broker", "broker_out_tps"),
               chart("TPS per topic", "topic_tps")]
    latest = {kind: {n: pts[-1][1] for n, pts in data[kind].items() if pts} for kind in SERIES}
    return render(request, "rocketmq_console/charts.html", {
        "charts": charts_, "interval": smp.interval_s, "samples": len(smp.samples), "group": group, "range": span,
        "ranges": list(RANGES), "latest_lag": sorted(latest["group_lag"].items()),
        "top": [("Topics by TPS", _top(latest["topic_tps"])), ("Groups by lag", _top(latest["group_lag"])),
                ("Groups by consume TPS", _top(latest["group_tps"]))],
        "page": "charts"})
