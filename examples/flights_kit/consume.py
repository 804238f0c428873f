"""A push consumer group (clustering) that records every delivered flight message.

Several ``PushConsumer`` instances of one group run in this process, each with its own
instance name (so each is its own client to the broker and gets its own share of the queues).
The listener only parses the body and appends a :class:`Received` record under a lock, so it
never holds up the consumers; all checking happens afterwards in :mod:`.audit`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .audit import Received

try:  # the spark extra installs orjson: ~5x less CPU than json per body (the listener parses 336k)
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - without the extra the demo cannot run anyway
    from json import loads as _loads

logger = logging.getLogger("flights_demo.consume")


class Tally:
    """Thread-safe list of received messages plus first/last delivery times (``time.monotonic``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: list[Received] = []
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.changed = threading.Condition(self._lock)

    def __len__(self) -> int:
        return len(self.records)

    def add(self, consumer: str, msgs: list[Any]) -> None:
        parsed = []
        for msg in msgs:
            data = _loads(msg.body)
            keys = msg.keys
            parsed.append((keys[0] if keys else "", msg.tags or "", data.get("tailnum") or "",
                           int(data["tail_seq"]), (msg.broker_name, msg.queue_id), msg.queue_offset,
                           msg.msg_id))
        with self._lock:
            now = time.monotonic()
            if self.first_at is None:
                self.first_at = now
            self.last_at = now
            base = len(self.records)
            self.records.extend(Received(*p, consumer, base + i) for i, p in enumerate(parsed))
            self.changed.notify_all()

    def wait_for(self, total: int, *, stall_timeout_s: float, on_progress: Callable[[int], None] | None = None,
                 poll_s: float = 0.5) -> bool:
        """Wait until ``total`` messages arrived; False if none arrived for ``stall_timeout_s``."""
        last_count, last_change = -1, time.monotonic()
        with self._lock:
            while True:
                n = len(self.records)
                if on_progress is not None:
                    on_progress(n)
                if n >= total:
                    return True
                now = time.monotonic()
                if n != last_count:
                    last_count, last_change = n, now
                elif now - last_change > stall_timeout_s:
                    return False
                self.changed.wait(timeout=poll_s)

    def wait_quiet(self, quiet_s: float, max_s: float) -> None:
        """Wait until no message arrived for ``quiet_s`` seconds (at most ``max_s``): late
        duplicates would show up in that window."""
        deadline = time.monotonic() + max_s
        with self._lock:
            while True:
                now = time.monotonic()
                last = self.last_at if self.last_at is not None else now
                if now - last >= quiet_s or now >= deadline:
                    return
                self.changed.wait(timeout=min(quiet_s - (now - last), deadline - now))


class ConsumerGroup:
    """``instances`` push consumers of ``group`` subscribed to ``topic``, all feeding one :class:`Tally`.

    Args:
        namesrv_addr: name server ``host:port``.
        topic: topic to subscribe (all tags).
        group: consumer group.
        instances: number of consumer instances (default 2).
        consumer_config: extra keyword arguments for ``rocketmq_sdk.PushConsumer``.
        gated: listeners hold every delivery until :meth:`open` is called. Meant for starting
            a group on a topic that already holds messages: the first instance to start takes
            all queues and hands out a first pull before the others join. Held deliveries from
            a queue the instance no longer owns when the gate opens are not recorded: the SDK
            (as Java) discards the result of a dropped queue and the queue's new owner gets
            them again from the committed offset.
    """

    def __init__(self, namesrv_addr: str, topic: str, group: str, instances: int = 2,
                 consumer_config: Mapping[str, Any] | None = None, gated: bool = False) -> None:
        self.namesrv_addr, self.topic, self.group = namesrv_addr, topic, group
        self.names = [f"{group}-{i + 1}" for i in range(instances)]
        self.config = dict(consumer_config or {})
        self.tally = Tally()
        self.consumers: list[Any] = []
        self.gated = gated
        self.gate = threading.Event()
        if not gated:
            self.gate.set()
        self.opened_at: float | None = None
        self.skipped_not_owned = 0

    def start(self) -> None:
        from rocketmq_sdk import ConsumeConcurrentlyStatus, PushConsumer

        for name in self.names:
            consumer = PushConsumer(self.group, self.namesrv_addr, instance_name=name, **self.config)
            consumer.subscribe(self.topic, "*")

            def listener(msgs: list[Any], context: Any, _name: str = name, _consumer: Any = consumer) -> Any:
                self.gate.wait()
                if self.gated and not _still_owns(_consumer, context.message_queue):
                    self.skipped_not_owned += len(msgs)
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
                self.tally.add(_name, msgs)
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            consumer.register_message_listener(listener)
            consumer.start()
            self.consumers.append(consumer)
            logger.info("consumer %s of group %s started", name, self.group)

    def open(self) -> None:
        """Let held deliveries through (a no-op for an ungated group)."""
        if not self.gate.is_set():
            self.opened_at = time.monotonic()
            self.gate.set()

    def owned_queues(self) -> dict[str, set[Any]]:
        """Instance name → the queues of ``topic`` it currently consumes (its rebalancer's view)."""
        owned: dict[str, set[Any]] = {}
        for name, consumer in zip(self.names, self.consumers, strict=False):
            for _ in range(3):  # the rebalancer may change the dict on the I/O thread meanwhile
                try:
                    owned[name] = {mq for mq in list(consumer.process_queues()) if mq.topic == self.topic}
                    break
                except RuntimeError:
                    continue
        return owned

    def settled(self, assignment: Mapping[str, set[Any]]) -> bool:
        """True when the group still owns ``assignment`` (instance name → queues, as
        :meth:`owned_queues` gave it) and every message pulled has been through the listener
        (no queue holds a pulled, unconsumed message). The listener never fails, so only a
        rebalance could deliver a message again: a settled group has nothing late to come."""
        if self.owned_queues() != assignment:
            return False
        for consumer in self.consumers:
            for _ in range(3):  # the rebalancer may change the dict on the I/O thread meanwhile
                try:
                    pqs = [pq for mq, pq in list(consumer.process_queues().items()) if mq.topic == self.topic]
                    break
                except RuntimeError:
                    continue
            else:
                return False
            if any(pq.msg_count for pq in pqs):
                return False
        return True

    def wait_settled(self, assignment: Mapping[str, set[Any]], timeout_s: float) -> bool:
        """Wait (at most ``timeout_s`` seconds) until :meth:`settled`; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while not self.settled(assignment):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self.tally.changed:  # woken by a delivery, else re-checked every 50 ms
                self.tally.changed.wait(timeout=min(0.05, remaining))
        return True

    def shutdown(self) -> None:
        self.gate.set()  # never leave a listener waiting on the gate
        for consumer in self.consumers:
            try:
                consumer.shutdown()
            except Exception:  # noqa: BLE001 - keep shutting the others down
                logger.warning("consumer shutdown failed", exc_info=True)
        self.consumers = []

    def __enter__(self) -> ConsumerGroup:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _still_owns(consumer: Any, mq: Any) -> bool:
    pq = consumer.process_queues().get(mq)
    return pq is not None and not pq.dropped
