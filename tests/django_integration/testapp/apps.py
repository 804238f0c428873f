from django.apps import AppConfig
from django.dispatch import Signal

#: a custom signal published through @publish_on_signal (tests/django_integration)
order_paid = Signal()


class TestAppConfig(AppConfig):
    name = "django_integration.testapp"
    label = "testapp"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from rocketmq_sdk.integrations.django import publish_model_events, publish_on_signal

        from .models import Order

        publish_model_events(Order, "dj_orders", fields=["number", "status", "amount"], keys="order-{number}")

        @publish_on_signal(order_paid, "dj_payments:paid", keys=lambda sender, order, **kw: f"paid-{order.number}")
        def order_paid_event(sender, order, **kwargs):
            return None if order.amount == 0 else {"number": order.number, "amount": order.amount}
