from django.db import models


class Product(models.Model):
    sku = models.CharField(max_length=32, unique=True)
    stock = models.IntegerField(default=0)


class Order(models.Model):
    sku = models.CharField(max_length=32)
    quantity = models.PositiveIntegerField()
    status = models.CharField(max_length=16, default="placed")  # placed -> reserved -> paid


class Payment(models.Model):
    order = models.OneToOneField(Order, on_delete=models.CASCADE)
    amount_cents = models.PositiveIntegerField()
    confirmed = models.BooleanField(default=False)  # set by the payments listener
