"""The integration's tables: consumed messages (idempotent listeners), committed local
transactions (DB-bound transactional messages) and the transactional outbox."""

from __future__ import annotations

from django.db import models


class ConsumedMessage(models.Model):
    """One message an idempotent listener has processed: written in the same database
    transaction as the handler's own writes, so a redelivery finds it and is acknowledged
    without running the handler. Pruned by age (``IDEMPOTENCY_RETENTION_HOURS``)."""

    consumer_group = models.CharField(max_length=255)
    message_key = models.CharField(max_length=255)
    topic = models.CharField(max_length=255)
    msg_id = models.CharField(max_length=64)
    consumed_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "rocketmq_consumed_message"
        constraints = [models.UniqueConstraint(fields=["consumer_group", "message_key"],
                                               name="rocketmq_consumed_once")]

    def __str__(self) -> str:
        return f"{self.consumer_group}:{self.message_key}"


class TransactionRecord(models.Model):
    """A local transaction that committed; the broker's transaction check answers COMMIT when
    the half message's id is here (written inside the local transaction's ``atomic()``)."""

    transaction_id = models.CharField(max_length=64, unique=True)
    producer_group = models.CharField(max_length=255)
    topic = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "rocketmq_transaction_record"

    def __str__(self) -> str:
        return self.transaction_id


class OutboxMessage(models.Model):
    """A message written in the application's transaction and sent later by
    ``manage.py rocketmq_outbox_relay`` (in id order; ``sent_at`` set once stored)."""

    topic = models.CharField(max_length=255)
    tags = models.CharField(max_length=255, blank=True, default="")
    keys = models.CharField(max_length=1024, blank=True, default="")
    properties = models.JSONField(default=dict)
    body = models.BinaryField()
    delay_level = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True, db_index=True)
    msg_id = models.CharField(max_length=64, blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        db_table = "rocketmq_outbox_message"
        ordering = ["id"]

    def __str__(self) -> str:
        return f"outbox #{self.pk} -> {self.topic}"
