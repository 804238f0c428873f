"""The app config: system checks, listener autodiscovery, settings reloads. (The producers are
shut down at interpreter exit by the SDK's per-process client cache that holds them.)"""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core import checks
from django.core.signals import setting_changed


class RocketMQConfig(AppConfig):
    name = "rocketmq_sdk.integrations.django"
    label = "rocketmq"
    verbose_name = "RocketMQ"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings
        from django.utils.module_loading import autodiscover_modules

        from . import checks as rocketmq_checks
        from .conf import load

        checks.register(rocketmq_checks.check_settings, "rocketmq")
        checks.register(rocketmq_checks.check_listeners, "rocketmq")
        checks.register(rocketmq_checks.check_name_server, "rocketmq")
        setting_changed.connect(_settings_changed, dispatch_uid="rocketmq-settings-changed")
        module = load(getattr(settings, "ROCKETMQ", None)).options["listener_module"]
        autodiscover_modules(module)


def _settings_changed(setting: str, **_: Any) -> None:
    """``override_settings(ROCKETMQ=...)``: forget the resolved settings and the clients made
    with the old ones (the next send makes new ones)."""
    if setting != "ROCKETMQ":
        return
    from . import conf, template

    conf.reset()
    if template._default is not None:
        template._default.close()
        template._default = None
