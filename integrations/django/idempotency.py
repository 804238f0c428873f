"""Event ids and idempotency keys of idempotent listeners.

A message identifies *one event* by its user property ``EVENT_ID``, which the model-event and
signal publishers and the transactional outbox stamp on every message they send (a uuid4 hex,
kept across the outbox relay's re-sends), else by its unique message id (``UNIQ_KEY``, kept
across the producer's own retries and RocketMQ's redeliveries). Business keys such as
``order-7`` are shared by every event of one entity (created, updated, paid...), so they are a
key only when a listener chooses them (``idempotency_key="key"``).
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rocketmq_sdk import Message, MessageExt

__all__ = ["EVENT_ID", "IDEMPOTENCY_KEYS", "BatchOutcome", "handle_batch_once", "idempotency_key", "log_duplicate",
           "stamp_event_id"]

log = logging.getLogger("rocketmq_sdk.integrations.django")

#: the user property carrying the event id
EVENT_ID = "EVENT_ID"
#: the named idempotency key choices of ``@rocketmq_listener(idempotency_key=...)``
IDEMPOTENCY_KEYS = ("event", "msg_id", "key")

KeyChoice = str | Callable[[MessageExt], Any]


def stamp_event_id(msg: Message, event_id: str | None = None) -> str:
    """Give ``msg`` an ``EVENT_ID`` property unless it has one; returns the message's event id.

    Args:
        msg: the message to send (changed in place).
        event_id: the id to stamp (default a new uuid4 hex, 32 chars).
    """
    current = msg.properties.get(EVENT_ID)
    if current:
        return str(current)
    msg.properties[EVENT_ID] = value = event_id or uuid.uuid4().hex
    return value


def idempotency_key(choice: KeyChoice, msg: MessageExt) -> str:
    """The key under which an idempotent listener records ``msg``.

    Args:
        choice: ``"event"`` (``EVENT_ID``, else the message id), ``"msg_id"`` (``UNIQ_KEY``,
            else the broker's offset id), ``"key"`` (the first message key, else the message
            id) or ``callable(MessageExt) -> str``.
        msg: the consumed message.

    Raises:
        ValueError: a callable that returned an empty key.
    """
    if callable(choice):
        key = str(choice(msg))
        if not key:
            raise ValueError(f"the idempotency_key callable returned an empty key for message {msg.msg_id}")
        return key
    if choice == "event":
        return msg.properties.get(EVENT_ID) or msg.msg_id
    if choice == "key" and msg.keys:
        return msg.keys[0]
    return msg.msg_id


_DIGITS = re.compile(r"[0-9a-fA-F]{8,}|\d+")
_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def log_duplicate(listener: str, group: str, key: str, msg_id: str) -> None:
    """Log a dedupe hit: WARNING the first time for a listener and key pattern (digits and
    long hex runs replaced by ``#``, so ``order-7`` and ``order-9`` share ``order-#``), INFO
    after, both with the key and the message id."""
    pattern = _DIGITS.sub("#", key)
    with _warned_lock:
        first = (listener, pattern) not in _warned
        if first:
            _warned.add((listener, pattern))
    log.log(logging.WARNING if first else logging.INFO,
            "listener %s: duplicate key %s (message %s, group %s) acknowledged without running%s", listener, key,
            msg_id, group, f" (first for keys like {pattern!r}; later ones at INFO)" if first else "")


@dataclass
class BatchOutcome:
    """What :func:`handle_batch_once` did with a batch.

    Attributes:
        done: messages handled (run or acknowledged as duplicates) before the first failure.
        results: (message, handler result) of the messages that ran, in order.
        error: the first failure (its message is ``msgs[done]``), else None.
        duplicates: (key, message) of the messages acknowledged without running.
    """

    done: int
    results: list[tuple[MessageExt, Any]] = field(default_factory=list)
    error: BaseException | None = None
    duplicates: list[tuple[str, MessageExt]] = field(default_factory=list)


class _Fallback(Exception):
    """The fast pass met a failure: its transaction is rolled back, the careful pass runs."""


def handle_batch_once(*, listener: str, group: str, using: str, msgs: Sequence[MessageExt],
                      keys: Sequence[str], run: Callable[[MessageExt], Any]) -> BatchOutcome:
    """Run ``run(msg)`` once per key over a batch, in one database transaction.

    The consumed-message rows of the batch's new keys are inserted with one ``INSERT`` (keys
    already stored, or repeated in the batch, are duplicates: acknowledged without running),
    then the handlers run and the transaction commits: one commit per batch instead of one per
    message is what lets a listener go beyond the database's commit rate.

    That fast pass uses no savepoints. If a handler raises (or the ``INSERT`` meets a key that
    another consumer of the group stored meanwhile, e.g. while a rebalance hands a queue over),
    its transaction is rolled back and the batch runs again carefully: each handler in a
    savepoint, rows claimed one by one if needed; at the first failure the failed handler's
    writes and the rows of the messages not run are removed, the rest commits, and the outcome
    says where it stopped (the caller sends back ``msgs[done:]``). A handler before the
    failure thus runs twice, its first run's database writes rolled back (as on a redelivery).

    Args:
        listener, group: for the logs and the rows.
        using: the database alias.
        msgs: the batch.
        keys: each message's idempotency key (same order).
        run: handles one message (the conversion included); raises to fail it.
    """
    try:
        outcome = _run_batch(group, using, msgs, keys, run, careful=False)
    except _Fallback:
        outcome = _run_batch(group, using, msgs, keys, run, careful=True)
    for key, msg in outcome.duplicates:
        log_duplicate(listener, group, key, msg.msg_id)
    return outcome


def _run_batch(group: str, using: str, msgs: Sequence[MessageExt], keys: Sequence[str],
               run: Callable[[MessageExt], Any], *, careful: bool) -> BatchOutcome:
    from django.db import IntegrityError, transaction

    from .dbretry import begin_writing
    from .models import ConsumedMessage

    rows = ConsumedMessage.objects.using(using)
    outcome = BatchOutcome(0)
    with transaction.atomic(using=using):
        begin_writing(ConsumedMessage._meta.db_table, using)  # SQLite: wait for other writers, never fail at once
        stored = set(rows.filter(consumer_group=group, message_key__in=set(keys))
                     .values_list("message_key", flat=True))
        first: dict[str, MessageExt] = {}
        for key, msg in zip(keys, msgs, strict=True):
            if key not in stored:
                first.setdefault(key, msg)
        new_rows = [ConsumedMessage(consumer_group=group, message_key=k, topic=m.topic, msg_id=m.msg_id)
                    for k, m in first.items()]
        claimed_in_bulk = True
        try:
            with transaction.atomic(using=using, savepoint=careful):
                rows.bulk_create(new_rows)
        except IntegrityError:
            if not careful:
                raise _Fallback from None
            claimed_in_bulk = False
        for i, (key, msg) in enumerate(zip(keys, msgs, strict=True)):
            outcome.done = i
            if first.get(key) is not msg:
                outcome.duplicates.append((key, msg))
                continue
            if not claimed_in_bulk:
                try:
                    with transaction.atomic(using=using):
                        rows.create(consumer_group=group, message_key=key, topic=msg.topic, msg_id=msg.msg_id)
                except IntegrityError:
                    outcome.duplicates.append((key, msg))
                    continue
            try:
                with transaction.atomic(using=using, savepoint=careful):
                    result = run(msg)
            except Exception as exc:
                if not careful:
                    raise _Fallback from exc
                unrun = [keys[j] for j in range(i, len(msgs))
                         if first.get(keys[j]) is msgs[j] and (claimed_in_bulk or j == i)]
                rows.filter(consumer_group=group, message_key__in=unrun).delete()
                outcome.error = exc
                return outcome
            outcome.results.append((msg, result))
        outcome.done = len(msgs)
    return outcome
