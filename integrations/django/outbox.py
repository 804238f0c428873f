"""The transactional outbox: write the message in the application's transaction, send it later.

``enqueue(destination, payload)`` inserts an :class:`~.models.OutboxMessage` row (inside the
caller's ``atomic()`` block it commits or rolls back with the business rows);
:func:`relay` (``manage.py rocketmq_outbox_relay``) sends unsent rows in id order and marks
them sent. Delivery is at least once: a relay that dies after the send and before marking the
row sends it again, so consumers should be idempotent: every message carries an event id
(user property ``EVENT_ID``, stamped when the row is enqueued and the same on every re-send),
the default key of idempotent listeners, and the row id as user property ``OUTBOX_ID`` and as a
key ``outbox-<id>``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.db.models import Case, F, Value, When
from django.utils import timezone
from rocketmq_sdk import Message
from rocketmq_sdk.retry import RetryPolicy

from .dbretry import DB_RETRY, reset_connection, retry_db
from .idempotency import EVENT_ID, stamp_event_id
from .models import OutboxMessage

__all__ = ["RelayResult", "enqueue", "relay", "relay_batch"]

log = logging.getLogger("rocketmq_sdk.integrations.django")


def enqueue(destination: str, payload: Any, *, keys: str | Sequence[str] | None = None,
            headers: Mapping[str, Any] | None = None, delay_level: int = 0) -> OutboxMessage:
    """Store a message to send (converted now, so bad payloads fail in the caller's transaction).

    Raises:
        ValueError, ConversionError, IllegalArgumentError: as the template's sends.
    """
    from .template import rocketmq_template

    msg = rocketmq_template().message(destination, payload, keys=keys, headers=headers, delay_level=delay_level)
    stamp_event_id(msg)
    return OutboxMessage.objects.create(topic=msg.topic, tags=msg.tags or "", keys=" ".join(msg.keys),
                                        properties=msg.user_properties, body=msg.body,
                                        delay_level=msg.delay_time_level)


def _message(row: OutboxMessage) -> Message:
    keys = [*row.keys.split(), f"outbox-{row.pk}"]
    return Message(row.topic, bytes(row.body), tags=row.tags or None, keys=keys,
                   properties={EVENT_ID: f"outbox-{row.pk}", **row.properties, "OUTBOX_ID": str(row.pk)},
                   delay_time_level=row.delay_level)


@dataclass(frozen=True)
class RelayResult:
    """One :func:`relay_batch` pass.

    Attributes:
        sent: rows sent and marked sent.
        failed: rows whose send failed (0 or 1: the pass stops at the first, order kept).
        error: the database error that ended the pass before anything was sent, else None.
    """

    sent: int = 0
    failed: int = 0
    error: BaseException | None = None


def relay_batch(batch_size: int = 100, *, policy: RetryPolicy = DB_RETRY,
                stop: threading.Event | None = None) -> RelayResult:
    """Send up to ``batch_size`` unsent rows in id order and mark each sent exactly once.

    The rows are read (on PostgreSQL / MySQL / Oracle locked ``FOR UPDATE SKIP LOCKED``, so
    concurrent relays take different rows), sent, then marked in one ``UPDATE ... WHERE sent_at
    IS NULL``. A database error while marking (SQLite's "database is locked" under concurrent
    writers, a dropped connection) is retried with ``policy``'s back-off outside the failed
    transaction until the mark is stored, so a sent row is never sent again because of it. The
    pass stops at the first failed send (recorded in the row's ``attempts`` / ``last_error``;
    the row is retried next time, order kept).

    Args:
        batch_size: rows per pass (≥ 1).
        policy: retries of the database writes (default unlimited, 50 ms → 5 s back-off).
        stop: set to stop retrying a failed read (a mark is retried regardless).

    Returns:
        what was sent and failed; ``error`` if reading the rows failed (nothing was sent).
    """
    from .template import rocketmq_template

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, not {batch_size}")
    template = rocketmq_template()
    sent: dict[int, str] = {}
    failure: tuple[int, str] | None = None
    marked = False
    locking = connection.features.has_select_for_update_skip_locked
    try:
        with transaction.atomic() if locking else contextlib.nullcontext():
            query = OutboxMessage.objects.filter(sent_at__isnull=True).order_by("id")
            if locking:
                query = query.select_for_update(skip_locked=True)
            for row in list(query[:batch_size]):
                msg = _message(row)
                try:
                    result = _capture_send(msg) if template.capturing else template.producer.send(msg)
                except Exception as exc:
                    failure = (row.pk, f"{type(exc).__name__}: {exc}"[:2000])
                    log.warning("outbox #%s (%s) not sent: %s", row.pk, row.topic, exc)
                    break
                sent[row.pk] = result.msg_id
            if locking and sent:
                _mark_sent(sent)
                marked = True
    except DatabaseError as exc:
        if not sent and failure is None:
            log.warning("outbox relay: reading the unsent rows failed: %s: %s", type(exc).__name__, exc)
            reset_connection()
            return RelayResult(error=exc)
        log.warning("outbox relay: %d row(s) sent, marking them failed: %s: %s", len(sent), type(exc).__name__, exc)
        reset_connection()
    if sent and not marked:
        # unlimited: giving up would send these rows again
        retry_db(lambda: _mark_sent(sent), f"marking {len(sent)} outbox row(s) sent", policy=DB_RETRY)
    if failure is not None:
        pk, error = failure
        retry_db(lambda: OutboxMessage.objects.filter(pk=pk).update(attempts=F("attempts") + 1, last_error=error),
                 f"recording the failed send of outbox #{pk}", policy=policy, stop=stop)
    return RelayResult(sent=len(sent), failed=0 if failure is None else 1)


def _mark_sent(sent: dict[int, str]) -> int:
    """One ``UPDATE``: the rows' ``sent_at``, ``msg_id`` and ``attempts``, only where still unsent."""
    return OutboxMessage.objects.filter(pk__in=list(sent), sent_at__isnull=True).update(
        sent_at=timezone.now(), attempts=F("attempts") + 1,
        msg_id=Case(*(When(pk=pk, then=Value(msg_id)) for pk, msg_id in sent.items()), default=F("msg_id")))


def relay(batch_size: int = 100) -> int:
    """:func:`relay_batch` returning the number of rows sent (the relay's first API)."""
    return relay_batch(batch_size).sent


def _capture_send(msg: Message) -> Any:
    from . import capture

    return capture.record("outbox", msg)
