"""Django integration of the RocketMQ SDK (the counterpart of Apache's rocketmq-spring-boot-starter).

Add ``"rocketmq_sdk.integrations.django"`` to ``INSTALLED_APPS`` and a ``ROCKETMQ`` settings dict;
see docs/django.md. The public names are imported lazily (``from rocketmq_sdk.integrations.django
import rocketmq_template, rocketmq_listener``) so that importing the package needs no configured
Django.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "RocketMQTemplate": "template",
    "rocketmq_template": "template",
    "rocketmq_listener": "listeners",
    "RocketMQListener": "listeners",
    "RocketMQReplyListener": "listeners",
    "publish_model_events": "publishers",
    "publish_on_signal": "publishers",
    "MessageConverter": "converter",
    "capture_messages": "capture",
    "rocketmq_transaction_check": "transactions",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
