"""End-to-end tests of the shop, run by Django's test runner (``python manage.py test``) with
``RocketMQTestRunner``: the embedded reference broker runs for the whole test run."""

import time

from django.db import IntegrityError
from django.test import TransactionTestCase
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.integrations.django import rocketmq_template
from rocketmq_sdk.integrations.django.models import ConsumedMessage, TransactionRecord
from rocketmq_sdk.integrations.django.testing import capture_messages, running_listeners

from .models import Order, Payment, Product


def wait_for(condition, timeout_s=40.0, what="condition"):
    """Poll ``condition`` until true; fail after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


class ShopFlowTests(TransactionTestCase):
    def setUp(self):
        Product.objects.create(sku="mug", stock=10)

    def stock(self):
        return Product.objects.get(sku="mug").stock

    def test_order_reserves_stock_once_and_payment_is_confirmed(self):
        with running_listeners():
            response = self.client.post("/orders/", {"sku": "mug", "quantity": 3}, content_type="application/json")
            self.assertEqual(response.status_code, 201)
            order_id = response.json()["id"]
            wait_for(lambda: Order.objects.get(pk=order_id).status == "reserved", what="the stock listener")
            self.assertEqual(self.stock(), 7)

            # the same event delivered again (a producer retry, a redelivery): no second decrement
            # (the same EVENT_ID, which publishers and the outbox stamp on every message)
            with AdminClient(rocketmq_template().settings.client["namesrv_addr"]) as admin:
                (created,) = admin.query_message_by_key("shop_orders", f"order-{order_id}")
            event_id = created.get_property("EVENT_ID")
            with self.assertLogs("rocketmq_sdk.integrations.django", "INFO") as logs:
                rocketmq_template().send("shop_orders:created", {"event": "created", "data": {
                    "id": order_id, "sku": "mug", "quantity": 3}}, keys=f"order-{order_id}",
                    headers={"EVENT_ID": event_id})
                wait_for(lambda: any(f"duplicate key {event_id}" in line for line in logs.output),
                         what="the duplicate to be acknowledged")
            self.assertEqual(self.stock(), 7)
            self.assertEqual(ConsumedMessage.objects.filter(consumer_group="shop_stock",
                                                            message_key=event_id).count(), 1)

            # payment: a transactional message bound to the Payment row
            response = self.client.post(f"/orders/{order_id}/pay/", {"amount_cents": 1299},
                                        content_type="application/json")
            self.assertEqual(response.status_code, 201)
            self.assertTrue(TransactionRecord.objects.filter(transaction_id=response.json()["msg_id"]).exists())
            wait_for(lambda: Payment.objects.get(order_id=order_id).confirmed, what="the payment listener")
            self.assertEqual(Order.objects.get(pk=order_id).status, "paid")

    def test_capture_mode_records_without_sending(self):
        with capture_messages() as sent:
            response = self.client.post("/orders/", {"sku": "mug", "quantity": 1}, content_type="application/json")
        self.assertEqual(response.status_code, 201)
        self.assertEqual([(m.topic, m.tags, m.keys) for m in sent],
                         [("shop_orders", "created", [f"order-{response.json()['id']}"])])
        self.assertEqual(sent[0].json()["data"]["quantity"], 1)

    def test_failed_payment_rolls_back_both(self):
        order = Order.objects.create(sku="mug", quantity=1)
        response = self.client.post(f"/orders/{order.pk}/pay/", {"amount_cents": 100},
                                    content_type="application/json")
        self.assertEqual(response.status_code, 201)
        with self.assertRaises(IntegrityError):  # a second payment violates the one-to-one: rolled back
            self.client.post(f"/orders/{order.pk}/pay/", {"amount_cents": 100}, content_type="application/json")
        self.assertEqual(Payment.objects.filter(order=order).count(), 1)
        self.assertEqual(TransactionRecord.objects.count(), 1)
