from django.db import models


class Order(models.Model):
    number = models.CharField(max_length=32, unique=True)
    status = models.CharField(max_length=16, default="new")
    amount = models.DecimalField(max_digits=10, decimal_places=2, default=0)
    note = models.CharField(max_length=64, blank=True, default="")


class Handled(models.Model):
    """One run of a test listener's handler (tests count the rows)."""

    listener = models.CharField(max_length=64)
    key = models.CharField(max_length=64)
    payload = models.JSONField(null=True)
