"""Periodic samples for the charts: per broker put/get TPS (from the growth of the broker's
``msgPutTotalTodayNow``/``msgGetTotalTodayNow`` between two samples), per consumer group TPS and
lag, per normal topic TPS (from the growth of its queues' max offsets).

One daemon thread, started by the first chart or cluster page view, samples every
``SAMPLE_INTERVAL_S`` seconds and keeps ``SAMPLE_WINDOW_S`` seconds (an hour) in memory. The
first sample of each minute is also stored in the console's database (:class:`~.models.ChartPoint`,
``CHART_HISTORY_S``, a day, kept: the charts survive a restart), and every sample is checked
against the lag thresholds (:func:`~.monitor.check_thresholds`). A failed sample is logged and
skipped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from rocketmq_sdk.client.process_local import ProcessLocalClient

from . import service
from .kinds import topic_kind

__all__ = ["SERIES", "Sample", "Sampler", "ensure_sampler", "first_float", "get_sampler", "stored_series",
           "stop_sampler"]

log = logging.getLogger("rocketmq_sdk.integrations.django.console")

MAX_TOPICS = 50  # topics whose TPS is sampled (the first ones by name)
SERIES = ("broker_in_tps", "broker_out_tps", "group_tps", "group_lag", "topic_tps")


@dataclass
class Sample:
    """One sample: ``at`` epoch seconds; values per broker name, group, topic."""

    at: float
    broker_in_tps: dict[str, float] = field(default_factory=dict)
    broker_out_tps: dict[str, float] = field(default_factory=dict)
    group_tps: dict[str, float] = field(default_factory=dict)
    group_lag: dict[str, int] = field(default_factory=dict)
    topic_tps: dict[str, float] = field(default_factory=dict)


class Sampler:
    """Takes a :class:`Sample` every ``interval_s`` seconds into a bounded deque."""

    def __init__(self, interval_s: float, window_s: float) -> None:
        self.interval_s = max(0.05, float(interval_s))
        self.samples: deque[Sample] = deque(maxlen=max(2, int(window_s / self.interval_s) + 1))
        self._offsets: dict[str, int] = {}
        self._offsets_at = 0.0
        self._counters: dict[str, tuple[int, int]] = {}
        self._counters_at = 0.0
        self._stored_minute = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rocketmq-console-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        from django.db import close_old_connections

        while not self._stop.is_set():
            try:
                sample = self.take()
                self.samples.append(sample)
                self.record(sample)
            except Exception as exc:  # the cluster may be down for a while
                log.warning("console sample failed: %s", exc)
            finally:
                close_old_connections()  # this thread's database connection, as a request's
            self._stop.wait(self.interval_s)

    def record(self, sample: Sample) -> None:
        """Check ``sample`` against the lag thresholds, and store it as the minute's chart
        points when it is the first of its minute (older points than ``CHART_HISTORY_S`` go)."""
        from .models import ChartPoint
        from .monitor import check_thresholds

        check_thresholds(sample.group_lag, sample.at)
        minute = int(sample.at // 60)
        if minute == self._stored_minute:
            return
        self._stored_minute = minute
        ChartPoint.objects.bulk_create([
            ChartPoint(at=minute * 60, kind=kind, name=name[:255], value=float(value))
            for kind in SERIES for name, value in getattr(sample, kind).items()])
        ChartPoint.objects.filter(at__lt=sample.at - float(service.console_setting("CHART_HISTORY_S"))).delete()

    def take(self) -> Sample:
        """Take one sample now (also used directly by tests)."""
        adm = service.admin()
        s = Sample(time.time())
        counters: dict[str, tuple[int, int]] = {}
        brokers = adm.cluster_list(runtime=False)
        for b in brokers:
            if b.role != "MASTER":
                continue
            info = adm.broker_runtime_info(b.addr)
            put, get = _int(info.get("msgPutTotalTodayNow")), _int(info.get("msgGetTotalTodayNow"))
            if put is not None and get is not None:
                counters[b.broker_name] = (put, get)
                prev = self._counters.get(b.broker_name)
                if prev is not None and self._counters_at:
                    dt = max(1e-3, s.at - self._counters_at)
                    s.broker_in_tps[b.broker_name] = max(0, put - prev[0]) / dt
                    s.broker_out_tps[b.broker_name] = max(0, get - prev[1]) / dt
            else:  # no counters: the broker's own (minute-averaged) figures
                s.broker_in_tps[b.broker_name] = first_float(info.get("putTps"))
                s.broker_out_tps[b.broker_name] = first_float(info.get("getTransferedTps"))
        self._counters, self._counters_at = counters, s.at
        system_names = {b.cluster for b in brokers} | {b.broker_name for b in brokers}
        for g in adm.consumer_groups():
            s.group_tps[g.group] = g.consume_tps
            s.group_lag[g.group] = g.diff_total
        topics = [t for t in adm.topic_list() if topic_kind(t, system_names) == "normal"]
        offsets: dict[str, int] = {}
        for t in sorted(topics)[:MAX_TOPICS]:
            try:
                offsets[t] = sum(q.max_offset for q in adm.topic_status(t))
            except Exception:  # a topic without route (being deleted)
                continue
        if self._offsets_at:
            dt = max(1e-3, s.at - self._offsets_at)
            s.topic_tps = {t: max(0, n - self._offsets[t]) / dt for t, n in offsets.items() if t in self._offsets}
        self._offsets, self._offsets_at = offsets, s.at
        return s

    def series(self, kind: str, name: str) -> list[tuple[float, float]]:
        """``[(epoch s, value)]`` of ``kind`` (an attribute of :class:`Sample`) for ``name``."""
        return [(s.at, float(getattr(s, kind)[name])) for s in list(self.samples) if name in getattr(s, kind)]

    def names(self, kind: str) -> list[str]:
        """Every name seen in ``kind`` over the window, sorted."""
        out: set[str] = set()
        for s in list(self.samples):
            out.update(getattr(s, kind))
        return sorted(out)


def stored_series(kind: str, since: float) -> dict[str, list[tuple[float, float]]]:
    """The stored one-minute points of ``kind`` since ``since`` (epoch s): name → points."""
    from .models import ChartPoint

    out: dict[str, list[tuple[float, float]]] = {}
    for at, name, value in (ChartPoint.objects.filter(kind=kind, at__gte=since).order_by("at")
                            .values_list("at", "name", "value")):
        out.setdefault(name, []).append((at, value))
    return out


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def first_float(value: str | None) -> float:
    """The first number of a runtime-info TPS value (``"12.5 11.0 10.2"``), 0.0 when absent."""
    try:
        return float((value or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


def _start_sampler() -> Sampler:
    smp = Sampler(service.console_setting("SAMPLE_INTERVAL_S"), service.console_setting("SAMPLE_WINDOW_S"))
    smp.start()
    return smp


# per process: a worker forked after the sampler started (its thread did not survive) starts its own
_sampler = ProcessLocalClient(_start_sampler, close=Sampler.stop, name="console sampler")


def ensure_sampler() -> Sampler:
    """The running sampler, started at first call."""
    return _sampler.get()


def get_sampler() -> Sampler | None:
    """The sampler if it runs."""
    return _sampler.get() if _sampler.created else None


def stop_sampler() -> None:
    """Stop the sampler (a later :func:`ensure_sampler` starts a new one)."""
    _sampler.close()
