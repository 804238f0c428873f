"""Listeners autodiscovered by the integration (``<app>/listeners.py``)."""

from rocketmq_sdk.integrations.django import rocketmq_listener

from .models import Handled


@rocketmq_listener(topic="dj_orders", consumer_group="dj_order_audit", selector_expression="created || updated")
def audit_order(event: dict) -> None:
    Handled.objects.create(listener="audit", key=event["data"]["number"], payload=event)
