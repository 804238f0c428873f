"""Sending rows as batches per target queue while keeping each queue's order.

With ``batch_size > 1`` the writer still sends one message per row, but packs up to
``batch_size`` consecutive messages bound for the same queue into one SEND_BATCH_MESSAGE
request (the broker stores them one by one, contiguously, in that queue). The queue of each
row is chosen up front with the selector over the topic's writable queues, every queue has its
own FIFO buffer, and buffers are flushed with synchronous sends, so rows that share a selector
value keep their relative order exactly as with one-by-one sends. Without a selector one buffer
is used and the producer picks the queue of each batch round-robin.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from .mapping import RowMessageMapper

logger = logging.getLogger("rocketmq_sdk.integrations.spark")

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
        self._sizes: dict[Any, int] = {}
        self.sent = 0
        self.not_ok = 0

    def add(self, msg: Any, mq: Any = None) -> None:
        """Buffer ``msg`` for queue ``mq`` (``None``: any queue); may flush that buffer."""
        buf = self._buffers.setdefault(mq, [])
        size = self._sizes.get(mq, 0) + len(msg.body)
        if buf and size > self.max_batch_bytes:
            self.flush(mq)
            buf, size = self._buffers.setdefault(mq, []), len(msg.body)
        buf.append(msg)
        self._sizes[mq] = size
        if len(buf) >= self.batch_size:
            self.flush(mq)

    def flush(self, mq: Any = None) -> None:
        """Send the buffer of ``mq`` now (one message alone goes as a plain send)."""
        buf = self._buffers.pop(mq, None)
        self._sizes.pop(mq, None)
        if not buf:
            return
        if len(buf) == 1:
            result = self.producer.send(buf[0], mq=mq, timeout_ms=self.send_timeout_ms) if mq is not None \
                else self.producer.send(buf[0], timeout_ms=self.send_timeout_ms)
        else:
            result = self.producer.send_batch(buf, mq=mq, timeout_ms=self.send_timeout_ms)
        self.sent += len(buf)
        if not _status_ok(result):
            self.not_ok += len(buf)

    def flush_all(self) -> None:
        """Send every buffer, oldest first."""
        for mq in list(self._buffers):
            self.flush(mq)


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
