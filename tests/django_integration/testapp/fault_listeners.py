"""Listeners of the Django fault suite (test_django_faults.py), registered only in the child
processes it starts (``ROCKETMQ_TEST_FAULT_TOPIC`` set): an idempotent and a plain listener
on the fault topic, each recording one ``Handled`` row per run."""

import os

from rocketmq_sdk.integrations.django import rocketmq_listener

from .models import Handled

TOPIC = os.environ["ROCKETMQ_TEST_FAULT_TOPIC"]


@rocketmq_listener(topic=TOPIC, consumer_group=f"{TOPIC}_idem", idempotent=True, name="fault_idem")
def fault_idem(event: dict) -> None:
    Handled.objects.create(listener="fault-idem", key=f"{event['writer']}-{event['i']}")


@rocketmq_listener(topic=TOPIC, consumer_group=f"{TOPIC}_plain", name="fault_plain")
def fault_plain(event: dict) -> None:
    Handled.objects.create(listener="fault-plain", key=f"{event['writer']}-{event['i']}")
