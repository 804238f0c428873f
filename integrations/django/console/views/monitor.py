"""Monitor page: per-group lag thresholds (set, change, delete) with each group's current lag, and
the alarms they fired (see :mod:`..monitor`)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from .. import service
from ..forms import LagThresholdForm
from ..models import LagAlarm, LagThreshold
from ..sampler import get_sampler
from .base import can_operate, cleaned, name_or_404, operator, try_call, viewer

ALARMS_SHOWN = 50


@viewer
def monitor(request: HttpRequest) -> HttpResponse:
    smp = get_sampler()
    latest = smp.samples[-1].group_lag if smp is not None and smp.samples else None
    if latest is None:  # no sample yet: ask the cluster now
        latest = {g.group: g.diff_total for g in try_call(request, "consumer groups", service.admin().consumer_groups,
                                                         default=[])}
    rows = [{"t": t, "lag": latest.get(t.group), "over": latest.get(t.group, 0) > t.max_lag}
            for t in LagThreshold.objects.all()]
    return render(request, "rocketmq_console/monitor.html", {
        "rows": rows, "alarms": LagAlarm.objects.all()[:ALARMS_SHOWN], "form": LagThresholdForm(),
        "firing": LagAlarm.objects.filter(resolved__isnull=True).count(),
        "can_operate": can_operate(request), "page": "monitor"})


@operator("set lag threshold")
def threshold_set(request: HttpRequest) -> HttpResponse:
    d = cleaned(LagThresholdForm(request.POST))
    LagThreshold.objects.update_or_create(group=d["group"], defaults={"max_lag": d["max_lag"],
                                                                      "enabled": d["enabled"]})
    messages.success(request, f"lag threshold of {d['group']}: {d['max_lag']}{'' if d['enabled'] else ' (off)'}")
    return redirect("rocketmq_console:monitor")


@operator("delete lag threshold")
def threshold_delete(request: HttpRequest, group: str) -> HttpResponse:
    name_or_404(group)
    LagThreshold.objects.filter(group=group).delete()
    messages.success(request, f"lag threshold of {group} deleted")
    return redirect("rocketmq_console:monitor")
