"""The transactional outbox: write the message in the application's transaction, send it later.

``enqueue(destination, payload)`` inserts an :class:`~.models.OutboxMessage` row (inside the
caller's ``atomic()`` block it commits or rolls back with the business rows);
:func:`relay` (``manage.py rocketmq_outbox_relay``) sends unsent rows in id order and marks
them sent. Delivery is at least once: a relay that dies after the send and before marking the
row sends it again, so consumers should be idempotent (the message carries the row id as user
property ``OUTBOX_ID`` and as a key ``outbox-<id>``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone
from rocketmq_sdk import Message

from .models import OutboxMessage

__all__ = ["enqueue", "relay"]

log = logging.getLogger("rocketmq_sdk.integrations.django")


def enqueue(destination: str, payload: Any, *, keys: str | Sequence[str] | None = None,
            headers: Mapping[str, Any] | None = None, delay_level: int = 0) -> OutboxMessage:
    """Store a message to send (converted now, so bad payloads fail in the caller's transaction).

    Raises:
        ValueError, ConversionError, IllegalArgumentError: as the template's sends.
    """
    from .template import rocketmq_template

    msg = rocketmq_template().message(destination, payload, keys=keys, headers=headers, delay_level=delay_level)
    return OutboxMessage.objects.create(topic=msg.topic, tags=msg.tags or "", keys=" ".join(msg.keys),
                                        properties=msg.user_properties, body=msg.body,
                                        delay_level=msg.delay_time_level)


def _message(row: OutboxMessage) -> Message:
    keys = [*row.keys.split(), f"outbox-{row.pk}"]
    return Message(row.topic, bytes(row.body), tags=row.tags or None, keys=keys,
                   properties={**row.properties, "OUTBOX_ID": str(row.pk)}, delay_time_level=row.delay_level)


def relay(batch_size: int = 100) -> int:
    """Send up to ``batch_size`` unsent rows in id order; stop at the first failure (recorded in
    the row's ``attempts`` / ``last_error``, the row is retried next time, order kept).

    Returns:
        the number of rows sent.
    """
    from .template import rocketmq_template

    template = rocketmq_template()
    sent = 0
    with transaction.atomic():
        rows = list(OutboxMessage.objects.select_for_update(skip_locked=True)
                    .filter(sent_at__isnull=True).order_by("id")[:batch_size])
        for row in rows:
            msg = _message(row)
            try:
                result = (_capture_send(msg) if template.capturing else template.producer.send(msg))
            except Exception as exc:
                row.attempts += 1
                row.last_error = f"{type(exc).__name__}: {exc}"[:2000]
                row.save(update_fields=["attempts", "last_error"])
                log.warning("outbox #%s (%s) not sent: %s", row.pk, row.topic, exc)
                break
            row.sent_at, row.msg_id = timezone.now(), result.msg_id
            row.attempts += 1
            row.save(update_fields=["sent_at", "msg_id", "attempts"])
            sent += 1
    return sent


def _capture_send(msg: Message) -> Any:
    from . import capture

    return capture.record("outbox", msg)
