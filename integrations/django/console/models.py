"""The console's permissions (no table: an unmanaged model only carries them).

* ``rocketmq_console.view_console`` — read every page (read-only users).
* ``rocketmq_console.operate_console`` — change things: topics, groups, offsets, send and
  resend messages (operators). Superusers have both.
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
