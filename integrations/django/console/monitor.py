"""Lag monitoring: per-group thresholds (:class:`~.models.LagThreshold`, set on the Monitor page)
checked against every chart sample; a group going over its threshold fires a
:class:`~.models.LagAlarm` and is handed to the notifier, once, until it comes back under.

Notifier (``ROCKETMQ_CONSOLE["NOTIFIER"]``): a dotted path to a callable taking one
:class:`AlarmEvent` and returning a short outcome text (or None); default
:func:`log_notifier` (a WARNING on ``rocketmq_sdk.integrations.django.console.monitor``). With
``WEBHOOK_URL`` set, :func:`webhook_notifier` also POSTs the event as JSON there (with
``requests``, part of the ``django`` extra; ``WEBHOOK_TIMEOUT_S``, 5 s).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from django.utils.module_loading import import_string

from . import service

__all__ = ["AlarmEvent", "check_thresholds", "log_notifier", "notifier", "webhook_notifier"]

log = logging.getLogger("rocketmq_sdk.integrations.django.console.monitor")


@dataclass(frozen=True)
class AlarmEvent:
    """What a notifier is told: ``state`` ``"firing"`` (lag went over) or ``"resolved"`` (back
    under); ``lag`` and ``max_lag`` in messages; ``at`` ISO 8601 UTC."""

    group: str
    lag: int
    max_lag: int
    state: str
    at: str


def log_notifier(event: AlarmEvent) -> str:
    """Log the event (WARNING when firing, INFO when resolved)."""
    level = logging.WARNING if event.state == "firing" else logging.INFO
    log.log(level, "lag alarm %s: group=%s lag=%d threshold=%d", event.state, event.group, event.lag, event.max_lag)
    return "logged"


def webhook_notifier(event: AlarmEvent) -> str:
    """POST the event as JSON to ``WEBHOOK_URL`` (http or https only); the outcome names the
    HTTP status or the error (never raises)."""
    url = str(service.console_setting("WEBHOOK_URL"))
    if not url.startswith(("http://", "https://")):
        return f"webhook refused: {url!r} is not an http(s) URL"
    import requests  # the django extra's; imported here so a console without alarms never loads it

    try:
        resp = requests.post(url, json=asdict(event), allow_redirects=False,
                             timeout=float(service.console_setting("WEBHOOK_TIMEOUT_S")))
        return f"webhook {resp.status_code}"
    except requests.RequestException as exc:
        log.warning("lag alarm webhook %s failed: %s", url, exc)
        return f"webhook failed: {exc}"[:200]


def notifier() -> Callable[[AlarmEvent], str | None]:
    """The configured notifier: ``NOTIFIER`` (dotted path), plus the webhook when
    ``WEBHOOK_URL`` is set."""
    chosen = service.console_setting("NOTIFIER")
    base: Callable[[AlarmEvent], str | None] = import_string(chosen) if isinstance(chosen, str) else chosen
    if not service.console_setting("WEBHOOK_URL"):
        return base

    def both(event: AlarmEvent) -> str:
        return "; ".join(str(x) for x in (base(event), webhook_notifier(event)) if x)

    return both


def _notify(event: AlarmEvent) -> str:
    try:
        return str(notifier()(event) or "")[:255]
    except Exception as exc:  # a broken notifier must not stop the sampler
        log.exception("lag alarm notifier failed")
        return f"notifier failed: {exc}"[:255]


def check_thresholds(group_lag: Mapping[str, int], at: float) -> list[AlarmEvent]:
    """Compare one sample's lag per group (``group_lag``, epoch seconds ``at``) with the
    enabled thresholds: fire an alarm for a group newly over its threshold, resolve the alarm
    of a group back at or under it; each change is notified once. Returns the events."""
    from .models import LagAlarm, LagThreshold

    when = datetime.fromtimestamp(at, tz=UTC)
    events = []
    for th in LagThreshold.objects.filter(enabled=True):
        if th.group not in group_lag:
            continue
        lag = int(group_lag[th.group])
        open_alarm = LagAlarm.objects.filter(group=th.group, resolved__isnull=True).first()
        if lag > th.max_lag and open_alarm is None:
            event = AlarmEvent(th.group, lag, th.max_lag, "firing", when.isoformat())
            LagAlarm.objects.create(group=th.group, lag=lag, max_lag=th.max_lag, fired=when,
                                    notified=_notify(event))
            events.append(event)
        elif lag <= th.max_lag and open_alarm is not None:
            event = AlarmEvent(th.group, lag, th.max_lag, "resolved", when.isoformat())
            open_alarm.resolved = when
            open_alarm.notified = f"{open_alarm.notified}; resolved: {_notify(event)}"[:255]
            open_alarm.save(update_fields=["resolved", "notified"])
            events.append(event)
    return events
