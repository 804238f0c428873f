import json

from django.db import transaction
from django.http import JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_POST
from rocketmq_sdk.integrations.django import rocketmq_template

from .models import Order, Payment


@require_POST
def place_order(request):
    data = json.loads(request.body)
    with transaction.atomic():
        order = Order.objects.create(sku=data["sku"], quantity=int(data["quantity"]))
    # the publisher sends shop_orders:created once the block above has committed
    return JsonResponse({"id": order.pk, "status": order.status}, status=201)


@require_POST
def pay_order(request, order_id: int):
    order = get_object_or_404(Order, pk=order_id)
    amount = int(json.loads(request.body)["amount_cents"])

    def charge(msg, arg):  # the local transaction: runs inside atomic() with the half message pending
        Payment.objects.create(order=order, amount_cents=amount)
        Order.objects.filter(pk=order.pk).update(status="paid")

    result = rocketmq_template().send_in_transaction("shop_payments:paid", {"order": order.pk, "amount_cents": amount},
                                                     charge, keys=f"payment-{order.pk}")
    return JsonResponse({"order": order.pk, "msg_id": result.msg_id}, status=201)
