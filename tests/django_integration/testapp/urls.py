import json
from decimal import Decimal

from django.db import transaction
from django.http import JsonResponse
from django.urls import path

from .models import Order


def create_order(request):
    data = json.loads(request.body or b"{}")
    with transaction.atomic():
        order = Order.objects.create(number=data["number"], amount=Decimal(str(data.get("amount", "0"))))
        if data.get("fail"):
            raise ValueError("rolled back on purpose")
    return JsonResponse({"id": order.pk, "number": order.number}, status=201)


urlpatterns = [path("orders/", create_order)]
