"""Celery on RocketMQ: a kombu transport (``rocketmq://namesrv:9876``).

Importing this package registers the ``rocketmq`` URL scheme in kombu's
``TRANSPORT_ALIASES``. The ``celery`` command imports it by itself (the package is a
``celery.commands`` plugin, see docs/celery.md), so ``celery -A proj worker`` needs no import in
``proj``; other processes either import ``rocketmq_sdk.integrations.celery`` or name the class:
``Celery(broker="rocketmq://...", broker_transport="rocketmq_sdk.integrations.celery:Transport")``.
"""

from __future__ import annotations

from kombu.transport import TRANSPORT_ALIASES

from .transport import Channel, QoS, Transport

__all__ = ["Channel", "QoS", "Transport", "register"]

ALIAS = "rocketmq"


def register(alias: str = ALIAS) -> None:
    """Make ``<alias>://`` URLs use :class:`Transport` (idempotent)."""
    TRANSPORT_ALIASES.setdefault(alias, "rocketmq_sdk.integrations.celery:Transport")


register()
