"""``RocketMQTemplate``: the sending facade (rocketmq-spring's ``RocketMQTemplate``).

One template per process (:func:`rocketmq_template`); its SDK producer is created on first
use, held in the SDK's per-process client cache (:mod:`rocketmq_sdk.client.process_local`) and
so fork safe: a producer made before ``fork()`` (gunicorn ``--preload``, uWSGI, Celery prefork)
is never used in the child, which makes its own; it is shut down at interpreter exit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from django.utils.module_loading import import_string
from rocketmq_sdk import Message, MessageExt, Producer, SelectMessageQueueByHash, SendResult, split_batches
from rocketmq_sdk.client.process_local import ProcessLocalClient

from . import capture, timers, transactions
from .conf import RocketMQSettings, get_settings
from .converter import MessageConverter

__all__ = ["RocketMQTemplate", "rocketmq_template"]

log = logging.getLogger("rocketmq_sdk.integrations.django")

_HASH = SelectMessageQueueByHash()


class RocketMQTemplate:
    """Send payloads to ``"topic"`` or ``"topic:tag"`` destinations.

    Payloads are converted by the converter (``ROCKETMQ["MESSAGE_CONVERTER"]``, see
    :mod:`~rocketmq_sdk.integrations.django.converter`); a ready :class:`~rocketmq_sdk.Message`
    is sent as it is. ``keys`` (a string or a list) become the message keys; ``headers`` map to
    keys (``"KEYS"``), tag (``"TAGS"``) and user properties; ``delay_level`` 1..18 delays
    delivery (the broker's ``messageDelayLevel``). ``deliver_time_ms`` (epoch ms) or
    ``delay_ms`` (ms from when the broker stores it; at most 3 days, not with ``delay_level``)
    make a timer message (rocketmq-spring's ``syncSendDeliverTimeMills`` /
    ``syncSendDelayTimeMills``): kept as such by RocketMQ 5.x brokers, sent with the nearest
    delay level not shorter than it to 4.x brokers, with a logged WARNING (:mod:`.timers`); also
    for a ready :class:`~rocketmq_sdk.Message` carrying a timer. Timeouts are ms (default
    ``PRODUCER["SEND_MSG_TIMEOUT"]``, 3000).

    Every send raises what the SDK raises: ``IllegalArgumentError`` for a bad message (before
    anything is sent), ``RemotingConnectError`` / ``MQClientError`` / ``MQBrokerError`` when
    the broker cannot be reached or refuses, ``ValueError`` for a bad destination,
    ``ConversionError`` for an unconvertible payload, and ``ImproperlyConfigured`` for bad
    settings or a missing ``PRODUCER["GROUP"]``.

    Args:
        settings: resolved settings (default: ``settings.ROCKETMQ``).
    """

    def __init__(self, settings: RocketMQSettings | None = None) -> None:
        self._settings = settings
        self._producer: ProcessLocalClient[Producer] = ProcessLocalClient(self._make_producer, name="Django producer")
        self._converter: MessageConverter | None = None

    # ------------------------------------------------------------------ plumbing

    @property
    def settings(self) -> RocketMQSettings:
        return self._settings or get_settings()

    @property
    def converter(self) -> MessageConverter:
        """The message converter (built once from ``MESSAGE_CONVERTER`` / ``MODEL_SERIALIZER``)."""
        if self._converter is None:
            opts = self.settings.options
            cls = import_string(opts["message_converter"])
            self._converter = cls(import_string(opts["model_serializer"]))
        return self._converter

    @property
    def producer(self) -> Producer:
        """The started SDK :class:`~rocketmq_sdk.Producer` of this process (made on first use)."""
        return self._producer.get()

    def _make_producer(self) -> Producer:
        from django.core.exceptions import ImproperlyConfigured

        s = self.settings
        if not s.producer_group:
            raise ImproperlyConfigured('ROCKETMQ["PRODUCER"]["GROUP"] is required to send messages')
        producer = Producer(s.producer_group, **s.trace_kwargs(), **s.producer_kwargs())
        producer.start()
        log.info("RocketMQ producer %s started (pid %d)", s.producer_group, os.getpid())
        return producer

    @property
    def capturing(self) -> bool:
        """Sends are recorded in the capture outbox instead of sent (see :mod:`.capture`)."""
        return capture.capturing(self.settings.options["capture"])

    def message(self, destination: str, payload: Any, *, keys: str | Sequence[str] | None = None,
                headers: Mapping[str, Any] | None = None, delay_level: int = 0,
                deliver_time_ms: int | None = None, delay_ms: int | None = None) -> Message:
        """The :class:`Message` a send of these arguments would send (converter applied)."""
        return self.converter.to_message(destination, payload, keys=keys, headers=headers,  # type: ignore[arg-type]
                                         delay_level=delay_level, deliver_time_ms=deliver_time_ms,
                                         delay_ms=delay_ms)

    def _for_broker(self, msg: Message) -> Message:
        """``msg`` with its timer kept for 5.x brokers, else a delay level (:mod:`.timers`)."""
        if not msg.has_timer:
            return msg
        return timers.for_broker(msg, self.producer)

    def close(self) -> None:
        """Shut this process's producers down now, template and transactional (interpreter exit does it
        too); the next send makes new ones."""
        self._producer.close()
        transactions.close()

    # ------------------------------------------------------------------ sends

    def send(self, destination: str, payload: Any, *, keys: str | Sequence[str] | None = None,
             headers: Mapping[str, Any] | None = None, delay_level: int = 0,
             timeout_ms: float | None = None, deliver_time_ms: int | None = None,
             delay_ms: int | None = None) -> SendResult:
        """Synchronous send (``syncSend``): returns once the broker stored the message.

        Returns:
            the SDK's ``SendResult`` (``send_status``, ``msg_id``, ``message_queue``...).
        """
        msg = self.message(destination, payload, keys=keys, headers=headers, delay_level=delay_level,
                           deliver_time_ms=deliver_time_ms, delay_ms=delay_ms)
        if self.capturing:
            return capture.record("sync", msg)
        return self.producer.send(self._for_broker(msg), timeout_ms=timeout_ms)

    def send_async(self, destination: str, payload: Any, *, keys: str | Sequence[str] | None = None,
                   headers: Mapping[str, Any] | None = None, delay_level: int = 0,
                   callback: Callable[[SendResult | None, BaseException | None], None] | None = None,
                   timeout_ms: float | None = None, deliver_time_ms: int | None = None,
                   delay_ms: int | None = None) -> concurrent.futures.Future[SendResult]:
        """Asynchronous send (``asyncSend``): a ``concurrent.futures.Future[SendResult]``;
        ``callback(result, error)`` runs on the SDK's callback threads."""
        msg = self.message(destination, payload, keys=keys, headers=headers, delay_level=delay_level,
                           deliver_time_ms=deliver_time_ms, delay_ms=delay_ms)
        if self.capturing:
            fut: concurrent.futures.Future[SendResult] = concurrent.futures.Future()
            result = capture.record("async", msg)
            fut.set_result(result)
            if callback is not None:
                callback(result, None)
            return fut
        return self.producer.send_async(self._for_broker(msg), callback, timeout_ms=timeout_ms)

    async def asend(self, destination: str, payload: Any, *, keys: str | Sequence[str] | None = None,
                    headers: Mapping[str, Any] | None = None, delay_level: int = 0,
                    timeout_ms: float | None = None, deliver_time_ms: int | None = None,
                    delay_ms: int | None = None) -> SendResult:
        """``await``-able send for async views; never blocks the event loop (the producer is
        created, and a timer's broker version learnt, in a worker thread the first time)."""
        msg = self.message(destination, payload, keys=keys, headers=headers, delay_level=delay_level,
                           deliver_time_ms=deliver_time_ms, delay_ms=delay_ms)
        if self.capturing:
            return capture.record("async", msg)
        producer = self.producer if self._producer.created else await asyncio.to_thread(lambda: self.producer)
        if msg.has_timer:
            msg = await asyncio.to_thread(self._for_broker, msg)
        return await producer.asend(msg, timeout_ms=timeout_ms)

    def send_oneway(self, destination: str, payload: Any, *, keys: str | Sequence[str] | None = None,
                    headers: Mapping[str, Any] | None = None, delay_level: int = 0,
                    deliver_time_ms: int | None = None, delay_ms: int | None = None) -> None:
        """Fire and forget (``sendOneWay``): no answer, failures only logged by the SDK."""
        msg = self.message(destination, payload, keys=keys, headers=headers, delay_level=delay_level,
                           deliver_time_ms=deliver_time_ms, delay_ms=delay_ms)
        if self.capturing:
            capture.record("oneway", msg)
            return
        self.producer.send_oneway(self._for_broker(msg))

    def send_orderly(self, destination: str, payload: Any, hash_key: Any, *,
                     keys: str | Sequence[str] | None = None, headers: Mapping[str, Any] | None = None,
                     timeout_ms: float | None = None) -> SendResult:
        """Ordered send (``syncSendOrderly``): every message with the same ``hash_key`` goes to
        the same queue (``SelectMessageQueueByHash``, Java's ``hashCode`` of ``str(hash_key)``),
        one attempt, so their order is kept."""
        msg = self.message(destination, payload, keys=keys, headers=headers)
        if self.capturing:
            return capture.record("orderly", msg, hash_key)
        return self.producer.send(self._for_broker(msg), _HASH, str(hash_key), timeout_ms=timeout_ms)

    def send_orderly_async(self, destination: str, payload: Any, hash_key: Any, *,
                           keys: str | Sequence[str] | None = None, headers: Mapping[str, Any] | None = None,
                           callback: Callable[[SendResult | None, BaseException | None], None] | None = None,
                           timeout_ms: float | None = None) -> concurrent.futures.Future[SendResult]:
        """Ordered asynchronous send (Spring's ``asyncSendOrderly``): the queue chosen by
        ``hash_key`` as :meth:`send_orderly`; a ``Future[SendResult]``, ``callback(result,
        error)`` on the SDK's callback threads. Order holds between messages of one key only
        when each is sent after the previous one's future completed."""
        msg = self.message(destination, payload, keys=keys, headers=headers)
        if self.capturing:
            fut: concurrent.futures.Future[SendResult] = concurrent.futures.Future()
            result = capture.record("orderly_async", msg, hash_key)
            fut.set_result(result)
            if callback is not None:
                callback(result, None)
            return fut
        return self.producer.send_async(self._for_broker(msg), callback, _HASH, str(hash_key), timeout_ms=timeout_ms)

    def send_oneway_orderly(self, destination: str, payload: Any, hash_key: Any, *,
                            keys: str | Sequence[str] | None = None,
                            headers: Mapping[str, Any] | None = None) -> None:
        """Ordered fire-and-forget (Spring's ``sendOneWayOrderly``): the queue chosen by
        ``hash_key`` as :meth:`send_orderly`; no answer, failures only logged by the SDK."""
        msg = self.message(destination, payload, keys=keys, headers=headers)
        if self.capturing:
            capture.record("oneway_orderly", msg, hash_key)
            return
        self.producer.send_oneway(self._for_broker(msg), _HASH, str(hash_key))

    def send_batch(self, destination: str, payloads: Iterable[Any], *,
                   keys: Callable[[Any], str | Sequence[str] | None] | None = None,
                   timeout_ms: float | None = None) -> list[SendResult]:
        """Batch send (``syncSend(Collection)``): the payloads, cut into batches of at most 1 MiB
        encoded (order kept), one ``SendResult`` per batch. ``keys(payload)`` gives each
        message's keys.

        Raises:
            ValueError: no payloads.
        """
        msgs = [self.message(destination, p, keys=keys(p) if keys else None) for p in payloads]
        if not msgs:
            raise ValueError("send_batch needs at least one payload")
        if self.capturing:
            return [capture.record("batch", m) for m in msgs]
        return [self.producer.send_batch(batch, timeout_ms=timeout_ms) for batch in split_batches(msgs)]

    def send_and_receive(self, destination: str, payload: Any, *, reply_type: Any = bytes,
                         keys: str | Sequence[str] | None = None, headers: Mapping[str, Any] | None = None,
                         timeout_ms: float = 3000) -> Any:
        """Request-reply (``sendAndReceive``): send and wait up to ``timeout_ms`` for the reply a
        :class:`~rocketmq_sdk.integrations.django.listeners.RocketMQReplyListener` (or any
        ``Producer.reply``) sends back; the reply body converted to ``reply_type`` (``bytes``,
        ``str``, ``dict``, a dataclass, a pydantic model, ``MessageExt``).

        Raises:
            rocketmq_sdk.RequestTimeoutError: no reply in time (also a ``TimeoutError``).
            RuntimeError: while capturing (there is nobody to answer).
        """
        msg = self.message(destination, payload, keys=keys, headers=headers)
        if self.capturing:
            capture.record("request", msg)
            raise RuntimeError("send_and_receive has no reply while messages are captured")
        reply: MessageExt = self.producer.request(msg, timeout_ms)
        return self.converter.from_message(reply, reply_type)

    def send_in_transaction(self, destination: str, payload: Any, local_transaction: Callable[[Message, Any], Any],
                            arg: Any = None, *, keys: str | Sequence[str] | None = None,
                            headers: Mapping[str, Any] | None = None,
                            timeout_ms: float | None = None) -> Any:
        """Transactional message bound to the database (``sendMessageInTransaction``): see
        :func:`rocketmq_sdk.integrations.django.transactions.send_in_transaction`."""
        msg = self.message(destination, payload, keys=keys, headers=headers)
        return transactions.send_in_transaction(msg, local_transaction, arg, template=self, timeout_ms=timeout_ms)


_default: RocketMQTemplate | None = None
_default_lock = threading.Lock()


def rocketmq_template() -> RocketMQTemplate:
    """The process's template (settings from ``settings.ROCKETMQ``)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = RocketMQTemplate()
    return _default
