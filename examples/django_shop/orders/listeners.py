"""The shop's listeners (autodiscovered): stock reservation (idempotent) and payment confirmation."""

from django.db.models import F
from rocketmq_sdk.integrations.django import rocketmq_listener

from .models import Order, Payment, Product


@rocketmq_listener(topic="shop_orders", consumer_group="shop_stock", selector_expression="created",
                   idempotent=True)
def reserve_stock(event: dict) -> None:
    """Runs once per order even when the message is delivered twice: the decrement and the
    consumed-message row commit together."""
    order = event["data"]
    if Order.objects.filter(pk=order["id"], status="placed").update(status="reserved"):
        Product.objects.filter(sku=order["sku"]).update(stock=F("stock") - order["quantity"])


@rocketmq_listener(topic="shop_payments", consumer_group="shop_payment_confirmations", idempotent=True)
def confirm_payment(payment: dict) -> None:
    Payment.objects.filter(order_id=payment["order"]).update(confirmed=True)
