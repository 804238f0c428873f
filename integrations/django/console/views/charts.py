"""Charts page: TPS per broker, topic and group and consumer lag over the sampled window."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe

from ..sampler import ensure_sampler
from ..svg import line_chart
from .base import viewer

MAX_LINES = 8


@viewer
def charts(request: HttpRequest) -> HttpResponse:
    smp = ensure_sampler()
    group = request.GET.get("group", "")

    def chart(title: str, kind: str, only: str = "") -> str:
        names = [n for n in smp.names(kind) if not only or n == only]
        if kind in ("group_lag", "group_tps", "topic_tps"):  # busiest first
            names.sort(key=lambda n: -max((v for _, v in smp.series(kind, n)), default=0))
        return mark_safe(line_chart(title, {n: smp.series(kind, n) for n in names[:MAX_LINES]}))  # noqa: S308

    charts_ = [chart("Consumer lag (messages)" + (f" · {group}" if group else ""), "group_lag", group),
               chart("Consume TPS per group", "group_tps", group),
               chart("Put TPS per broker", "broker_in_tps"), chart("Get TPS per broker", "broker_out_tps"),
               chart("TPS per topic", "topic_tps")]
    latest = smp.samples[-1] if smp.samples else None
    return render(request, "rocketmq_console/charts.html", {
        "charts": charts_, "interval": smp.interval_s, "samples": len(smp.samples), "group": group,
        "latest_lag": sorted(latest.group_lag.items()) if latest else [], "page": "charts"})
