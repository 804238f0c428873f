"""Transactional messages bound to the database.

:func:`send_in_transaction` sends a half message, then runs the local transaction inside a
Django ``atomic()`` block that also inserts a :class:`~.models.TransactionRecord` with the half
message's id, and commits or rolls the half message back accordingly. The broker's
CHECK_TRANSACTION_STATE (sent when END_TRANSACTION never arrived: the process died between the
database commit and END_TRANSACTION, or the network failed) is answered from that table by any
live producer of the transaction group, so the database and the message always agree:

- record present -> COMMIT (the database committed);
- record absent and a check registered for the topic with :func:`rocketmq_transaction_check`
  (a local transaction whose outcome is not a database row, e.g. an external payment API:
  Spring's ``RocketMQLocalTransactionListener.checkLocalTransaction``) -> its answer, unless it
  answers None;
- record absent and the half message younger than ``TRANSACTION_UNKNOWN_TIMEOUT`` ms (60000)
  -> UNKNOW (the local transaction may still be running; the broker asks again later);
- record absent and older -> ROLLBACK.

A process that answers checks needs the transactional producer running:
:func:`transaction_producer` starts it (``manage.py rocketmq_consume`` does so when the
transaction group is configured).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, close_old_connections, transaction
from django.dispatch import Signal
from rocketmq_sdk import (
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    SendStatus,
    TransactionProducer,
    TransactionSendResult,
)
from rocketmq_sdk.client.process_local import ProcessLocalClient
from rocketmq_sdk.protocol.codes import MessageConst as MC

from . import capture
from .conf import get_settings

__all__ = ["DatabaseTransactionListener", "local_transaction_committed", "rocketmq_transaction_check",
           "send_in_transaction", "transaction_checks", "transaction_producer"]

log = logging.getLogger("rocketmq_sdk.integrations.django")

#: sent right after the local transaction's ``atomic()`` block committed and before
#: END_TRANSACTION goes out (``sender`` the listener, ``message``, ``transaction_id``)
local_transaction_committed = Signal()


TransactionCheck = Callable[[MessageExt], LocalTransactionState | None]

#: topic (without namespace) -> the check registered with :func:`rocketmq_transaction_check`
transaction_checks: dict[str, TransactionCheck] = {}


def rocketmq_transaction_check(*, topic: str) -> Callable[[TransactionCheck], TransactionCheck]:
    """Register ``fn(msg: MessageExt) -> LocalTransactionState | None`` as the transaction check
    of ``topic``'s half messages that have no record in the table (put it in a module imported
    at start, e.g. ``<app>/listeners.py``, so every process answering checks has it).

    ::

        @rocketmq_transaction_check(topic="payments")
        def payment_settled(msg):
            state = payments_api.state(msg.msg_id)       # the UNIQ_KEY the local transaction used
            return {"paid": LocalTransactionState.COMMIT_MESSAGE,
                    "failed": LocalTransactionState.ROLLBACK_MESSAGE}.get(state)   # None: the table's rules

    Raises:
        ValueError: an empty topic.
    """
    if not topic:
        raise ValueError("rocketmq_transaction_check needs a topic")

    def register(fn: TransactionCheck) -> TransactionCheck:
        transaction_checks[topic] = fn
        return fn

    return register


class _Call(threading.local):
    fn: Callable[[Message, Any], Any] | None = None
    arg: Any = None
    using: str = DEFAULT_DB_ALIAS
    error: BaseException | None = None


class _RolledBack(Exception):
    """The local transaction answered ROLLBACK_MESSAGE: its ``atomic()`` block is rolled back."""


class DatabaseTransactionListener:
    """The SDK ``TransactionListener`` of DB-bound transactions (see the module docstring).

    Args:
        group: the transaction producer group (stored in the record).
        unknown_timeout_ms: how long a half message without a record is answered UNKNOW.
    """

    def __init__(self, group: str, unknown_timeout_ms: int = 60_000) -> None:
        self.group = group
        self.unknown_timeout_ms = unknown_timeout_ms
        self._call = _Call()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        from .models import TransactionRecord

        call = self._call
        tx_id = msg.transaction_id or msg.uniq_key or ""
        answer: Any = None
        try:
            with transaction.atomic(using=call.using):
                if call.fn is not None:
                    answer = call.fn(msg, call.arg)
                if answer is LocalTransactionState.ROLLBACK_MESSAGE:
                    raise _RolledBack
                if answer is not LocalTransactionState.UNKNOW:  # UNKNOW: no record, the check decides
                    TransactionRecord.objects.using(call.using).create(
                        transaction_id=tx_id, producer_group=self.group, topic=msg.topic)
        except _RolledBack:
            return LocalTransactionState.ROLLBACK_MESSAGE
        except BaseException as exc:  # the atomic block rolled back: so does the half message
            call.error = exc
            return LocalTransactionState.ROLLBACK_MESSAGE
        if answer is LocalTransactionState.UNKNOW:
            log.info("local transaction of %s (%s) answered UNKNOW: the broker's check decides", tx_id, msg.topic)
            return LocalTransactionState.UNKNOW
        local_transaction_committed.send(sender=self, message=msg, transaction_id=tx_id)
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        from .models import TransactionRecord

        tx_id = msg.get_property(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.transaction_id or msg.msg_id
        close_old_connections()
        try:
            hook = transaction_checks.get(_plain_topic(msg.topic))
            if TransactionRecord.objects.filter(transaction_id=tx_id).exists():
                state = LocalTransactionState.COMMIT_MESSAGE
            elif hook is not None and (answer := hook(msg)) is not None:
                state = answer
            elif time.time() * 1000 - msg.born_timestamp > self.unknown_timeout_ms:
                state = LocalTransactionState.ROLLBACK_MESSAGE
            else:
                state = LocalTransactionState.UNKNOW
        finally:
            close_old_connections()
        log.info("transaction check of %s (%s): %s", tx_id, msg.topic, state.value)
        return state


def _plain_topic(topic: str) -> str:
    """The topic without the ``NAMESPACE%`` prefix the integration adds."""
    return topic.split("%", 1)[1] if "%" in topic and not topic.startswith("%") else topic


def _make_producer() -> TransactionProducer:
    from django.core.exceptions import ImproperlyConfigured

    s = get_settings()
    if not s.transaction_group:
        raise ImproperlyConfigured('transactional messages need ROCKETMQ["PRODUCER"]["GROUP"] '
                                   'or ROCKETMQ["TRANSACTION"]["GROUP"]')
    listener = DatabaseTransactionListener(s.transaction_group, s.options["transaction_unknown_timeout"])
    producer = TransactionProducer(s.transaction_group, listener=listener, **s.transaction, **s.trace_kwargs(),
                                   **s.producer_kwargs())
    producer.start()
    log.info("RocketMQ transaction producer %s started", s.transaction_group)
    return producer


_producer: ProcessLocalClient[TransactionProducer] = ProcessLocalClient(_make_producer,
                                                                        name="Django transaction producer")


def transaction_producer() -> TransactionProducer:
    """The process's started transactional producer (made on first use; fork safe). Starting
    it is what lets this process answer the broker's transaction checks."""
    return _producer.get()


def close() -> None:
    """Shut the transactional producer down (if this process made one)."""
    _producer.close()


def send_in_transaction(msg: Message, local_transaction: Callable[[Message, Any], Any], arg: Any = None, *,
                        using: str = DEFAULT_DB_ALIAS, template: Any = None,
                        timeout_ms: float | None = None) -> TransactionSendResult:
    """Send ``msg`` as a transactional message whose local transaction is
    ``local_transaction(msg, arg)`` run inside ``atomic(using=using)``.

    The half message is stored first (invisible to consumers); then the ``atomic()`` block runs
    the function and records the transaction; its commit commits the message, an exception
    rolls both back and is raised again here after the rollback was sent. As Spring's
    ``executeLocalTransaction``, the function may also return a ``LocalTransactionState``:
    ``ROLLBACK_MESSAGE`` rolls its writes and the message back without raising; ``UNKNOW``
    commits its writes without a record, so the half message stays pending until the broker's
    check is answered by the topic's :func:`rocketmq_transaction_check` (else UNKNOW until
    ``TRANSACTION_UNKNOWN_TIMEOUT``, then ROLLBACK). Anything else (None) commits.

    Returns:
        the SDK's ``TransactionSendResult`` (``local_transaction_state`` COMMIT_MESSAGE, or what
        the function returned).

    Raises:
        RuntimeError: called inside an ``atomic()`` block (its commit would come after the
            message's: call it outside, or use the outbox).
        whatever ``local_transaction`` raised (the message is rolled back);
        MQClientError and the SDK's send errors: the half message was not stored (the local
        transaction did not run).
    """
    if transaction.get_connection(using).in_atomic_block:
        raise RuntimeError("send_in_transaction() must not run inside atomic(): the database would "
                           "commit after the message; call it outside the block (or use the outbox)")
    capturing = template.capturing if template is not None else \
        capture.capturing(get_settings().options["capture"])
    if capturing:
        with transaction.atomic(using=using):
            answer = local_transaction(msg, arg)
            if answer is LocalTransactionState.ROLLBACK_MESSAGE:
                transaction.set_rollback(True, using=using)
        state = answer if answer in (LocalTransactionState.ROLLBACK_MESSAGE, LocalTransactionState.UNKNOW) \
            else LocalTransactionState.COMMIT_MESSAGE
        if state is LocalTransactionState.ROLLBACK_MESSAGE:  # never sent: nothing captured
            return TransactionSendResult(SendStatus.SEND_OK, msg.uniq_key or "", "", MessageQueue(msg.topic, "captured", 0),
                                         0, local_transaction_state=state)
        r = capture.record("transaction", msg)
        return TransactionSendResult(r.send_status, r.msg_id, r.offset_msg_id, r.message_queue, r.queue_offset,
                                     local_transaction_state=state)
    producer = transaction_producer()
    call: _Call = producer.listener._call  # type: ignore[attr-defined]
    call.fn, call.arg, call.using, call.error = local_transaction, arg, using, None
    try:
        result = producer.send_message_in_transaction(msg, timeout_ms=timeout_ms)
        error = call.error
    finally:
        call.fn = call.arg = call.error = None
    if error is not None:
        raise error
    return result
