"""Listeners autodiscovered by the integration (``<app>/listeners.py``)."""

import os

from rocketmq_sdk.integrations.django import rocketmq_listener

from .models import Handled


@rocketmq_listener(topic="dj_orders", consumer_group="dj_order_audit", selector_expression="created || updated")
def audit_order(event: dict) -> None:
    Handled.objects.create(listener="audit", key=event["data"]["number"], payload=event)


if os.environ.get("ROCKETMQ_TEST_FAULT_TOPIC"):  # the fault suite's child processes only
    from . import fault_listeners  # noqa: F401
