from django.apps import AppConfig


class OrdersConfig(AppConfig):
    name = "orders"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from rocketmq_sdk.integrations.django import publish_model_events

        from .models import Order

        # every new order is published to shop_orders:created after its transaction commits
        publish_model_events(Order, "shop_orders", events=["created"], keys="order-{pk}")
