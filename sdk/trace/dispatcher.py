"""Asynchronous trace dispatcher (Java ``AsyncTraceDispatcher``, 4.9.8).

Hooks hand records to :meth:`TraceDispatcher.append` (never blocks: a full queue drops the
records and logs it). One daemon worker thread polls the queue in 100 ms windows, encodes each
record and collects the texts per trace topic; a batch becomes one trace message when its first
record is 500 ms old or its text reaches 118,000 characters. The trace message's body is the
concatenated records, its ``KEYS`` every record's msgId and business keys (so
``QUERY_MESSAGE(trace topic, key=msgId)`` finds it); it is sent asynchronously by an internal
producer of group ``_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>`` (instance
``PID_CLIENT_INNER_TRACE_PRODUCER_<namesrv>``, 5 s timeout, 128,000-byte limit). A failed send
is logged, never retried.

The trace producer is the SDK's ``Producer``, which registers itself here when
``rocketmq_sdk.producer`` is imported (:func:`set_trace_producer_factory`): this package sits below
the producers and consumers it serves and imports neither.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .codec import TRACE_TOPIC_DEFAULT, TraceRecord, encode_record, record_keys

if TYPE_CHECKING:
    from ..config import ClientConfig
    from ..protocol.message import Message

__all__ = ["TraceDispatcher", "TraceProducer", "set_trace_producer_factory", "start_or_none"]

log = logging.getLogger("rocketmq_sdk.trace")

QUEUE_SIZE = 1024  # traceContextQueue
MAX_MSG_SIZE = 128000
BATCH_TEXT_LIMIT = MAX_MSG_SIZE - 10000  # TraceDataSegment flush threshold (characters)
POLL_S = 0.1  # pollingTimeMil
WAIT_S = 0.5  # waitTimeThresholdMil
_COUNTER = itertools.count(1)  # genGroupNameForTrace's JVM-wide counter


class TraceProducer(Protocol):
    """What the dispatcher needs of its producer (a ``Producer``)."""

    def start(self) -> None: ...

    def shutdown(self) -> None: ...

    def send_async(self, msg: Message) -> concurrent.futures.Future[Any]: ...


#: ``factory(group, **settings)`` → a :class:`TraceProducer` (``settings``: ``ProducerConfig``
#: keywords); set by ``rocketmq_sdk.producer``.
_trace_producer_factory: list[Callable[..., TraceProducer]] = []


def set_trace_producer_factory(factory: Callable[..., TraceProducer]) -> None:
    """Make the dispatchers' trace producers with ``factory(group, **settings)``."""
    _trace_producer_factory[:] = [factory]


# the client settings the trace producer inherits (name servers, ACL, TLS)
_INHERITED = ("namesrv_addr", "access_key", "secret_key", "security_token", "use_tls", "ssl_context",
              "mq_client_api_timeout")


class _Segment:
    __slots__ = ("texts", "keys", "size", "first_s")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.keys: dict[str, None] = {}
        self.size = 0
        self.first_s = 0.0


class TraceDispatcher:
    """Batches trace records of one client and sends them to the trace topic.

    Args:
        group: the traced client's group (names the trace producer).
        kind: ``"PRODUCE"`` or ``"CONSUME"``.
        trace_topic: the trace topic; ``RMQ_SYS_TRACE_TOPIC`` when None or blank.
        client_config: the traced client's settings (name servers, ACL keys and TLS are reused).

    Raises:
        ValueError: ``kind`` is neither ``PRODUCE`` nor ``CONSUME``.
    """

    def __init__(self, group: str, kind: str, trace_topic: str | None, client_config: ClientConfig) -> None:
        if kind not in ("PRODUCE", "CONSUME"):
            raise ValueError(f"kind must be PRODUCE or CONSUME, got {kind!r}")
        self.group = group
        self.kind = kind
        self.trace_topic = trace_topic.strip() if trace_topic and trace_topic.strip() else TRACE_TOPIC_DEFAULT
        self._client_config = client_config
        self.trace_group = f"_INNER_TRACE_PRODUCER-{group}-{kind}-{next(_COUNTER)}"
        self._queue: queue.Queue[TraceRecord | threading.Event] = queue.Queue(QUEUE_SIZE)
        self._segments: dict[str, _Segment] = {}
        self._pending: set[concurrent.futures.Future] = set()
        self._pending_lock = threading.Lock()
        self._producer: TraceProducer | None = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self.discarded = 0  #: records dropped because the queue was full

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the trace producer and the worker thread (idempotent)."""
        if self._thread is not None:
            return
        if not _trace_producer_factory:  # pragma: no cover - importing rocketmq_sdk registers Producer
            raise RuntimeError("no trace producer factory: import rocketmq_sdk.producer first")
        cfg = self._client_config
        settings = {k: getattr(cfg, k) for k in _INHERITED if getattr(cfg, k, None) is not None}
        ns = cfg.namesrv_addr or ""
        self._producer = _trace_producer_factory[0](self.trace_group, instance_name=f"PID_CLIENT_INNER_TRACE_PRODUCER_{ns}",
                                  send_msg_timeout=5000, max_message_size=MAX_MSG_SIZE, **settings)
        self._producer.start()
        self._thread = threading.Thread(target=self._run, name=f"rocketmq-trace-{self.trace_group}", daemon=True)
        self._thread.start()

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Send what is batched, wait up to ``timeout_s`` for the sends, stop the producer."""
        if self._thread is None or self._stopped.is_set():
            return
        self.flush(timeout_s)
        self._stopped.set()
        self._thread.join(timeout_s)
        if self._producer is not None:
            self._producer.shutdown()

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Send every batch now and wait up to ``timeout_s`` until the broker answered them.

        Returns:
            True when everything was sent (answered) in time.
        """
        if self._thread is None or self._stopped.is_set():
            return False
        deadline = time.monotonic() + timeout_s
        done = threading.Event()
        try:
            self._queue.put(done, timeout=timeout_s)
        except queue.Full:
            return False
        if not done.wait(max(0.0, deadline - time.monotonic())):
            return False
        with self._pending_lock:
            pending = list(self._pending)
        _, not_done = concurrent.futures.wait(pending, max(0.0, deadline - time.monotonic()))
        return not not_done

    # ------------------------------------------------------------------ hooks' side

    def append(self, records: list[TraceRecord]) -> None:
        """Queue records for the worker; never blocks (a full queue drops them, logged)."""
        if self._thread is None or self._stopped.is_set():
            return
        for rec in records:
            try:
                self._queue.put_nowait(rec)
            except queue.Full:
                self.discarded += 1
                log.info("trace buffer full, record dropped (%d dropped so far)", self.discarded)

    # ------------------------------------------------------------------ worker

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._poll_window()
            except Exception:  # never let the worker die: later records would be lost
                log.warning("trace dispatcher %s: unexpected error", self.trace_group, exc_info=True)

    def _poll_window(self) -> None:
        """One 100 ms window: take records, then send the batches that are due."""
        window_end = time.monotonic() + POLL_S
        while True:
            left = window_end - time.monotonic()
            if left <= 0:
                break
            try:
                item = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if isinstance(item, threading.Event):
                self._send_all(lambda seg: True)
                item.set()
                continue
            self._add(item)
        now = time.monotonic()
        self._send_all(lambda seg, now=now: now - seg.first_s >= WAIT_S)

    def _add(self, rec: TraceRecord) -> None:
        try:
            text = encode_record(rec)
        except ValueError:
            log.warning("trace record of %s not encodable; dropped", rec.msg_id, exc_info=True)
            return
        seg = self._segments.get(self.trace_topic)
        if seg is None:
            seg = self._segments[self.trace_topic] = _Segment()
        if not seg.texts:
            seg.first_s = time.monotonic()
        seg.texts.append(text)
        seg.size += len(text)
        for k in record_keys(rec):
            seg.keys[k] = None
        if seg.size >= BATCH_TEXT_LIMIT:
            self._send(self.trace_topic, seg)

    def _send_all(self, due: Any) -> None:
        for topic, seg in self._segments.items():
            if seg.texts and due(seg):
                self._send(topic, seg)

    def _send(self, topic: str, seg: _Segment) -> None:
        from ..protocol.message import Message

        body = "".join(seg.texts).encode("utf-8")
        keys = list(seg.keys)
        seg.texts, seg.keys, seg.size = [], {}, 0
        try:
            fut = self._producer.send_async(Message(topic, body, keys=keys))  # type: ignore[union-attr]
        except Exception:
            log.warning("send trace data failed: %d bytes to %s", len(body), topic, exc_info=True)
            return
        with self._pending_lock:
            self._pending.add(fut)
        fut.add_done_callback(self._sent)

    def _sent(self, fut: concurrent.futures.Future) -> None:
        with self._pending_lock:
            self._pending.discard(fut)
        if not fut.cancelled() and fut.exception() is not None:
            log.warning("send trace data failed: %s", fut.exception())


def start_or_none(dispatcher: TraceDispatcher | None) -> TraceDispatcher | None:
    """Start ``dispatcher`` (a client's, at its ``start()``); when it cannot start, log "system
    mqtrace hook init failed" and return None: the client then runs untraced, as Java's does."""
    if dispatcher is None:
        return None
    try:
        dispatcher.start()
    except Exception:
        log.warning("system mqtrace hook init failed", exc_info=True)
        return None
    return dispatcher
