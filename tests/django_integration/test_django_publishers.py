"""Part 2: model events and custom signals published after the database commit."""

from __future__ import annotations

import json
import logging
import socket
from decimal import Decimal

import pytest
from django.db import transaction
from django.test.utils import override_settings
from rocketmq_sdk.integrations.django import publish_model_events
from rocketmq_sdk.integrations.django.publishers import publish

from django_integration.conftest import read_topic, unique, wait_until
from django_integration.testapp.apps import order_paid
from django_integration.testapp.models import Order

pytestmark = pytest.mark.django_db(transaction=True)


def _events_for(cluster, number: str, expected: int) -> list[dict]:
    """The dj_orders events of order ``number`` in store order, once ``expected`` of them arrived
    (the topic is shared by the tests of this module)."""
    box: list = []

    def arrived() -> bool:
        msgs = read_topic(cluster, "dj_orders", 0)
        mine = [m for m in msgs if m.keys == [f"order-{number}"]]
        box[:] = sorted(mine, key=lambda m: m.commit_log_offset)
        return len(box) >= expected

    wait_until(arrived, 20, f"{expected} events of order {number}")
    return [dict(json.loads(m.body), tag=m.tags, keys=m.keys) for m in box]


def test_view_publishes_after_commit_and_rollback_publishes_nothing(rocketmq, client):
    with pytest.raises(ValueError):
        client.post("/orders/", {"number": "R1", "fail": True}, content_type="application/json")
    assert not Order.objects.filter(number="R1").exists()
    response = client.post("/orders/", {"number": "V1", "amount": "5.5"}, content_type="application/json")
    assert response.status_code == 201
    (e,) = _events_for(rocketmq, "V1", 1)
    assert e["event"] == "created" and e["tag"] == "created" and e["keys"] == ["order-V1"]
    assert e["model"] == "testapp.order"
    assert e["data"] == {"number": "V1", "status": "new", "amount": "5.5"}  # the chosen fields, as saved
    # the rolled-back order never published (V1's event, sent after it, is there)
    assert not [m for m in read_topic(rocketmq, "dj_orders", 1) if m.keys == ["order-R1"]]


def test_message_is_sent_only_when_the_outer_transaction_commits(rocketmq):
    from rocketmq_sdk.integrations.django.capture import capture_messages

    with transaction.atomic():
        order = Order.objects.create(number="T1")
        with capture_messages() as sent_inside:  # nothing is sent while the transaction is open
            order.status = "paid"
            order.save()
        assert sent_inside == []
    events = _events_for(rocketmq, "T1", 2)
    assert [(e["event"], e["data"]["status"]) for e in events] == [("created", "new"), ("updated", "paid")]
    with transaction.atomic():
        order.delete()
    deleted = _events_for(rocketmq, "T1", 3)[2]
    assert deleted["event"] == "deleted" and deleted["data"]["number"] == "T1"


def test_update_fields_outside_the_chosen_fields_publish_nothing(rocketmq_outbox):
    order = Order.objects.create(number="U1")
    rocketmq_outbox.clear()
    order.note = "internal"
    order.save(update_fields=["note"])
    assert rocketmq_outbox == []
    order.status = "shipped"
    order.save(update_fields=["status"])
    assert [(c.tags, c.json()["data"]["status"]) for c in rocketmq_outbox] == [("updated", "shipped")]


def test_custom_signal_decorator(rocketmq_outbox):
    order = Order.objects.create(number="P1", amount=Decimal("3"))
    free = Order.objects.create(number="P2")
    rocketmq_outbox.clear()
    with transaction.atomic():
        order_paid.send(sender=Order, order=order)
        order_paid.send(sender=Order, order=free)  # the function returns None: nothing published
        assert rocketmq_outbox == []
    assert [(c.topic, c.tags, c.keys, c.json()) for c in rocketmq_outbox] == [
        ("dj_payments", "paid", ["paid-P1"], {"number": "P1", "amount": "3"})]


def _dead_name_server() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_failed_publish_is_logged_with_keys_and_does_not_break_the_request(client, caplog):
    caplog.set_level(logging.ERROR, logger="rocketmq_sdk.integrations.django")
    with override_settings(ROCKETMQ={"NAME_SERVER": _dead_name_server(),
                                     "PRODUCER": {"GROUP": "down", "SEND_MSG_TIMEOUT": 1000}}):
        response = client.post("/orders/", {"number": "D1"}, content_type="application/json")
    assert response.status_code == 201
    assert Order.objects.filter(number="D1").exists()
    failures = [r for r in caplog.records if "publishing to dj_orders failed" in r.getMessage()]
    assert len(failures) == 1 and "keys=order-D1" in failures[0].getMessage()


def test_raise_errors_makes_a_failed_publish_raise():
    from rocketmq_sdk import MQError
    from rocketmq_sdk.integrations.django import rocketmq_template

    with override_settings(ROCKETMQ={"NAME_SERVER": _dead_name_server(),
                                     "PRODUCER": {"GROUP": "down", "SEND_MSG_TIMEOUT": 1000}}):
        msg = rocketmq_template().message("dj_orders:x", {"a": 1}, keys="strict-1")
        with pytest.raises(MQError):
            publish(msg, on_commit=False, raise_errors=True)


def test_bad_publisher_arguments_fail_at_declaration():
    with pytest.raises(ValueError, match="unknown model event"):
        publish_model_events(Order, "t", events=["created", "archived"])
    with pytest.raises(ValueError, match="mode"):
        publish_model_events(Order, "t", mode="fire")


def test_callable_destination_and_async_mode(rocketmq):
    topic = unique("dj_pub_async")
    from rocketmq_sdk.integrations.django import rocketmq_template

    rocketmq_template().send(topic, b"{}")  # creates the topic
    from django.db.models.signals import post_save

    uid = publish_model_events(Order, lambda inst, ev: f"{topic}:{ev}-{inst.status}", events=["created"],
                               keys=lambda inst, ev: [f"n-{inst.number}", "bulk"], mode="async")
    try:
        with transaction.atomic():
            Order.objects.create(number="A1", status="vip")
        (m,) = [m for m in read_topic(rocketmq, topic, 2) if m.tags is not None]
        assert (m.tags, m.keys, json.loads(m.body)["data"]["number"]) == ("created-vip", ["n-A1", "bulk"], "A1")
    finally:
        post_save.disconnect(sender=Order, dispatch_uid=f"{uid}:save")
