"""The console's permissions and stored data.

* ``rocketmq_console.view_console`` — read every page (read-only users).
* ``rocketmq_console.operate_console`` — change things: topics, groups, offsets, send and
  resend messages, lag thresholds (operators). Superusers have both.

Tables: :class:`LagThreshold` (a consumer group's alarm threshold), :class:`LagAlarm` (each time a
group went over it, and back), :class:`ChartPoint` (one-minute chart samples, a day kept).
"""

from __future__ import annotations

from django.db import models


class ConsoleAccess(models.Model):
    """Holder of the console's permissions; never stored."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_console", "Can view the RocketMQ console"),
            ("operate_console", "Can change RocketMQ topics, groups, offsets and messages"),
        ]


class LagThreshold(models.Model):
    """Alarm when ``group``'s total lag (messages) exceeds ``max_lag``."""

    group = models.CharField(max_length=255, unique=True)
    max_lag = models.PositiveBigIntegerField()
    enabled = models.BooleanField(default=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["group"]
        default_permissions = ()

    def __str__(self) -> str:
        return f"{self.group} > {self.max_lag}"


class LagAlarm(models.Model):
    """One alarm: ``group``'s lag went over ``max_lag`` at ``fired``; ``resolved`` when it came
    back under (None while it lasts); ``notified`` is what the notifier answered."""

    group = models.CharField(max_length=255, db_index=True)
    lag = models.BigIntegerField()
    max_lag = models.BigIntegerField()
    fired = models.DateTimeField(db_index=True)
    resolved = models.DateTimeField(null=True, blank=True)
    notified = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        ordering = ["-fired"]
        default_permissions = ()


class ChartPoint(models.Model):
    """One chart value of one minute: ``kind`` a :class:`~.sampler.Sample` series (``group_lag``,
    ``topic_tps``...), ``name`` the broker, group or topic, ``at`` epoch seconds."""

    at = models.FloatField(db_index=True)
    kind = models.CharField(max_length=32)
    name = models.CharField(max_length=255)
    value = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["kind", "name", "at"])]
        default_permissions = ()
