"""App config of the console."""

from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """``rocketmq_sdk.integrations.django.console``, app label ``rocketmq_console``."""

    name = "rocketmq_sdk.integrations.django.console"
    label = "rocketmq_console"
    verbose_name = "RocketMQ console"
    default_auto_field = "django.db.models.AutoField"
