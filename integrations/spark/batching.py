"""Sending rows as batches per target queue while keeping each queue's order.

With ``batch_size > 1`` the writer still sends one message per row, but packs up to
``batch_size`` consecutive messages bound for the same queue into one SEND_BATCH_MESSAGE
request (the broker stores them one by one, contiguously, in that queue). The queue of each
row is chosen up front with the selector over the topic's writable queues, every queue has its
own FIFO buffer, and each queue has at most one request in flight: a full buffer is sent
asynchronously (``send_async``) once the queue's previous request is acknowledged, so rows that
share a selector value keep their relative order exactly as with one-by-one sends, while the
requests of different queues overlap (one round trip per ``batch_size`` rows per queue, not per
batch). Without a selector one buffer is used, the producer picks the queue of each batch
round-robin and up to :data:`MAX_IN_FLIGHT` requests overlap. A producer without ``send_async``
is used synchronously.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from typing import Any

from .mapping import RowMessageMapper

logger = logging.getLogger("rocketmq_sdk.integrations.spark")

MAX_IN_FLIGHT = 8
"""Batch requests in flight at once without a selector (with one: one per queue)."""

DEFAULT_MAX_BATCH_BYTES = 1024 * 1024
"""Flush a buffer before its bodies reach 1 MiB (the broker limit for a batch is 4 MiB)."""


def _status_ok(result: Any) -> bool:
    return getattr(getattr(result, "send_status", None), "value", "SEND_OK") == "SEND_OK"


class QueueBatcher:
    """FIFO buffers per target queue, flushed with ``producer.send_batch``.

    Args:
        producer: a started ``rocketmq_sdk.Producer``.
        batch_size: messages per request, at least 2.
        send_timeout_ms: timeout of each batch send, milliseconds.
        max_batch_bytes: flush a buffer before its bodies exceed this many bytes.
    """

    def __init__(self, producer: Any, batch_size: int, send_timeout_ms: int,
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> None:
        self.producer = producer
        self.batch_size = batch_size
        self.send_timeout_ms = send_timeout_ms
        self.max_batch_bytes = max_batch_bytes
        self._buffers: dict[Any, list[Any]] = {}
        self._async = callable(getattr(producer, "send_async", None))
        self._in_flight: dict[Any, deque[tuple[Any, int]]] = {}  # queue -> (future, messages), oldest first
        self.sent = 0
        self.not_ok = 0

    def add(self, msg: Any, mq: Any = None) -> None:
        """Buffer ``msg`` for queue ``mq`` (``None``: any queue); may send that buffer."""
        entry = self._buffers.get(mq)  # [messages, body bytes]: one look-up of the queue per message
        if entry is None:
            entry = self._buffers[mq] = [[], 0]
        size = len(msg.body)
        if entry[0] and entry[1] + size > self.max_batch_bytes:
            self.flush(mq)
            entry = self._buffers[mq] = [[], 0]
        entry[0].append(msg)
        entry[1] += size
        if len(entry[0]) >= self.batch_size:
            self.flush(mq)

    def flush(self, mq: Any = None) -> None:
        """Send the buffer of ``mq`` now (one message alone goes as a plain send), after the
        queue's previous request is acknowledged.

        Raises:
            rocketmq_sdk.exceptions.MQError: this or an earlier request of the queue failed.
        """
        entry = self._buffers.pop(mq, None)
        if not entry or not entry[0]:
            return
        buf = entry[0]
        self.send_now(buf[0] if len(buf) == 1 else buf, len(buf), mq)

    def send_now(self, message: Any, count: int, mq: Any = None) -> None:
        """Send ``message`` (one ``Message``, a list of them or an ``EncodedBatch`` of ``count``
        messages) to ``mq`` after the queue's previous request is acknowledged.

        Raises:
            rocketmq_sdk.exceptions.MQError: this or an earlier request of the queue failed.
        """
        if not self._async:
            if count == 1 and not isinstance(message, list):
                result = self.producer.send(message, mq=mq, timeout_ms=self.send_timeout_ms) if mq is not None \
                    else self.producer.send(message, timeout_ms=self.send_timeout_ms)
            else:
                result = self.producer.send_batch(message, mq=mq, timeout_ms=self.send_timeout_ms)
            self._count(result, count)
            return
        pending = self._in_flight.setdefault(mq, deque())
        while len(pending) >= (1 if mq is not None else MAX_IN_FLIGHT):
            self._wait(pending)
        pending.append((self.producer.send_async(message, mq=mq, timeout_ms=self.send_timeout_ms), count))

    def flush_all(self) -> None:
        """Send every buffer, oldest first, and wait until every request is acknowledged.

        Raises:
            rocketmq_sdk.exceptions.MQError: a request failed.
        """
        for mq in list(self._buffers):
            self.flush(mq)
        for pending in self._in_flight.values():
            while pending:
                self._wait(pending)

    def _wait(self, pending: deque[tuple[Any, int]]) -> None:
        future, count = pending.popleft()
        self._count(future.result(), count)

    def _count(self, result: Any, count: int) -> None:
        self.sent += count
        if not _status_ok(result):
            self.not_ok += count


def send_rows_batched(messages: Iterable[tuple[Any, Any]], mapper: RowMessageMapper, producer: Any, *,
                      selector: Any, batch_size: int, send_timeout_ms: int,
                      max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> tuple[int, int]:
    """Send ``(message, row)`` pairs in per-queue batches; returns ``(sent, sent with a non-OK status)``.

    Raises:
        rocketmq_sdk.exceptions.MQError: a send failed (earlier batches stay sent).
    """
    batcher = QueueBatcher(producer, batch_size, send_timeout_ms, max_batch_bytes)
    queues = producer.fetch_publish_queues(mapper.topic) if mapper.uses_selector else None
    select = getattr(selector, "select", selector)
    for msg, row in messages:
        if queues is not None:
            batcher.add(msg, select(queues, msg, mapper.selector_arg(row)))
        else:
            batcher.add(msg)
    batcher.flush_all()
    return batcher.sent, batcher.not_ok
