"""How ``PushConsumer(..., protocol="grpc")`` consumes what it received, as the 5.x push
consumers do (Java ``ConsumeService`` / ``ProcessQueueImpl``, the official Python client's
``Consumption`` / ``FifoConsumption``):

- standard groups: each batch (``consume_message_batch_max_size`` messages, 1 by default) runs
  on the consume threads; success → AckMessage; RECONSUME_LATER, an exception or None →
  ChangeInvisibleDuration for the retry policy's delay of that delivery attempt (the proxy's
  ``backoff_policy``: Apache's default 1 s, 5 s, 10 s, 30 s, 1 min ... 2 h), so the message comes
  again after it; a message failing its last attempt (``max_attempts``, 17 by default: the
  group's ``retryMaxTimes`` + 1) goes to ``%DLQ%<group>`` by ForwardMessageToDeadLetterQueue;
- FIFO groups (the proxy's settings say ``fifo``): the messages of one message group run one
  after another, in order, each retried in place (waiting the policy's delay between attempts,
  the message kept invisible meanwhile by ChangeInvisibleDuration) up to ``max_attempts``, then
  acknowledged or forwarded to the DLQ before the next one runs.

An ack/change/forward that fails on the network is retried every second while the consumer
runs; INVALID_RECEIPT_HANDLE (the message's invisibility ran out, it was delivered again) is
given up at once: at-least-once, the other delivery settles it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..exceptions import MQBrokerError, MQError
from ..grpc import v2
from ..protocol.message import MessageExt, MessageQueue
from .listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)

__all__ = ["DEFAULT_CONSUMER_BACKOFF_MS", "ConsumeBackoff", "GrpcConsumeService"]

log = logging.getLogger("rocketmq_sdk.consumer.grpc")

#: Apache RocketMQ 5's default group retry policy (``CustomizedRetryPolicy``), ms
DEFAULT_CONSUMER_BACKOFF_MS = (1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000,
                               420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000)
#: delivery attempts of a message when the proxy sends no policy (retryMaxTimes 16, + 1)
DEFAULT_MAX_ATTEMPTS = 17
#: the shortest invisibility asked for after a failure, ms (proxies refuse shorter ones)
MIN_RETRY_DELAY_MS = 1_000
#: wait before settling again after a network failure, s
SETTLE_RETRY_S = 1.0


def _ms(duration: Any) -> int:
    return int(duration.seconds) * 1000 + int(duration.nanos) // 1_000_000


@dataclass(frozen=True, slots=True)
class ConsumeBackoff:
    """A 5.x consumer retry policy: delay before delivery attempt ``n + 1`` after attempt ``n``
    failed, and how many attempts a message gets.

    Attributes:
        max_attempts: deliveries of a message before it goes to the DLQ.
        delays_ms: customized backoff (the last one repeats), or empty for exponential.
        initial_ms / max_ms / multiplier: exponential backoff.
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    delays_ms: tuple[int, ...] = DEFAULT_CONSUMER_BACKOFF_MS
    initial_ms: int = 0
    max_ms: int = 0
    multiplier: float = 0.0

    @classmethod
    def from_policy(cls, policy: Any) -> ConsumeBackoff:
        """From a ``v2.RetryPolicy`` of the proxy's Settings."""
        attempts = policy.max_attempts if policy.max_attempts > 0 else DEFAULT_MAX_ATTEMPTS
        kind = policy.WhichOneof("strategy")
        if kind == "customized_backoff" and policy.customized_backoff.next:
            return cls(attempts, tuple(_ms(d) for d in policy.customized_backoff.next))
        if kind == "exponential_backoff":
            e = policy.exponential_backoff
            return cls(attempts, (), _ms(e.initial), _ms(e.max), e.multiplier)
        return cls(attempts)

    def delay_ms(self, attempt: int) -> int:
        """The invisibility after delivery attempt ``attempt`` (1-based) failed, ms (≥ 1 s)."""
        attempt = max(1, attempt)
        if self.delays_ms:
            delay = self.delays_ms[min(attempt, len(self.delays_ms)) - 1]
        elif self.initial_ms > 0 and self.multiplier > 0:
            delay = int(min(self.initial_ms * self.multiplier ** (attempt - 1), self.max_ms or float("inf")))
        else:
            delay = DEFAULT_CONSUMER_BACKOFF_MS[0]
        return max(MIN_RETRY_DELAY_MS, delay)


class Settler(Protocol):
    """Ack / change invisibility / forward to the DLQ: the calls the consume service makes
    (a narrow view of :class:`~.grpc_consumer_client.GrpcConsumerClient`)."""

    def ack(self, message: MessageExt) -> None: ...

    def change_invisible_duration(self, message: MessageExt, invisible_ms: int) -> None: ...

    def forward_to_dead_letter_queue(self, message: MessageExt, max_delivery_attempts: int) -> None: ...


class GrpcConsumeService:
    """Runs the listener on received messages and settles them.

    Args:
        group: the consumer group (logs).
        client: the settling calls (:class:`Settler`).
        listener: ``fn(msgs, context) -> status`` (concurrent or orderly statuses).
        orderly: the listener takes ``ConsumeOrderlyContext`` and returns ``ConsumeOrderlyStatus``.
        batch_max: messages per listener call (standard groups).
        stopped: set when the consumer shuts down (waits end early).
        invisible_ms: the receive's invisible duration, ms (renewed around FIFO in-place retries).
    """

    def __init__(self, group: str, client: Settler, listener: Callable[[list[MessageExt], Any], Any], *,
                 orderly: bool, batch_max: int, stopped: threading.Event, invisible_ms: int = 60_000) -> None:
        self.group = group
        self.client = client
        self.listener = listener
        self.orderly = orderly
        self.batch_max = max(1, batch_max)
        self.stopped = stopped
        self.invisible_ms = invisible_ms
        self.backoff = ConsumeBackoff()
        self.consumed = 0

    # -- one listener call ---------------------------------------------------------------------
    def _call(self, msgs: list[MessageExt], mq: MessageQueue) -> bool:
        try:
            if self.orderly:
                status = self.listener(msgs, ConsumeOrderlyContext(mq))
                ok = status is ConsumeOrderlyStatus.SUCCESS
            else:
                status = self.listener(msgs, ConsumeConcurrentlyContext(mq))
                ok = status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        except Exception:
            log.warning("listener of group %s raised on %d messages; they will be consumed again", self.group,
                        len(msgs), exc_info=True)
            return False
        if ok:
            self.consumed += len(msgs)
        return ok

    # -- standard groups ---------------------------------------------------------------------------
    def batches(self, msgs: list[MessageExt]) -> list[list[MessageExt]]:
        """``msgs`` in listener batches."""
        n = self.batch_max
        return [msgs[i:i + n] for i in range(0, len(msgs), n)]

    def consume(self, msgs: list[MessageExt], mq: MessageQueue) -> None:
        """One listener call on a standard group's batch, then each message settled."""
        ok = self._call(msgs, mq)
        for m in msgs:
            self.settle(m, ok)

    # -- FIFO groups -------------------------------------------------------------------------------
    @staticmethod
    def by_message_group(msgs: list[MessageExt]) -> list[list[MessageExt]]:
        """``msgs`` split by message group, each in received order (messages without a group
        form one more sequence)."""
        groups: dict[str, list[MessageExt]] = {}
        for m in msgs:
            groups.setdefault(m.get_property("__SHARDINGKEY") or "", []).append(m)
        return list(groups.values())

    def consume_in_order(self, msgs: list[MessageExt], mq: MessageQueue) -> None:
        """The messages of one message group, one at a time, each retried in place."""
        for m in msgs:
            attempt = 1
            ok = self._call([m], mq)
            while not ok and attempt < self.backoff.max_attempts and not self.stopped.is_set():
                delay = self.backoff.delay_ms(attempt)
                self._keep_invisible(m, delay)
                if self.stopped.wait(delay / 1000.0):
                    break
                attempt += 1
                ok = self._call([m], mq)
            if not ok and self.stopped.is_set():
                return  # not settled: delivered again after its invisible duration
            self._settle_retrying(m, self.client.ack if ok else self._to_dlq)

    def _keep_invisible(self, m: MessageExt, delay_ms: int) -> None:
        """Before an in-place retry: the message (and its FIFO queue) stays invisible for the
        wait plus a fresh ``invisible_ms``, so it is not handed out again meanwhile."""
        try:
            self.client.change_invisible_duration(m, delay_ms + self.invisible_ms)
        except MQError as exc:
            log.warning("group %s: keeping FIFO message %s invisible failed (it may be delivered again): %s",
                        self.group, m.msg_id, exc)

    # -- settling ----------------------------------------------------------------------------------
    def settle(self, m: MessageExt, ok: bool) -> None:
        """Ack a consumed message; after a failure make it invisible for the backoff of its
        delivery attempt, or forward it to the DLQ after its last attempt."""
        if ok:
            self._settle_retrying(m, self.client.ack)
            return
        attempt = m.reconsume_times + 1
        if attempt >= self.backoff.max_attempts:
            self._settle_retrying(m, self._to_dlq)
        else:
            delay = self.backoff.delay_ms(attempt)
            self._settle_retrying(m, lambda msg: self.client.change_invisible_duration(msg, delay))

    def _to_dlq(self, m: MessageExt) -> None:
        self.client.forward_to_dead_letter_queue(m, self.backoff.max_attempts)
        log.info("group %s: message %s failed %d delivery attempts; forwarded to the dead letter queue",
                 self.group, m.msg_id, self.backoff.max_attempts)

    def _settle_retrying(self, m: MessageExt, action: Callable[[MessageExt], None]) -> None:
        while True:
            try:
                action(m)
                return
            except MQBrokerError as exc:
                if exc.code == v2.INVALID_RECEIPT_HANDLE:
                    log.warning("group %s: message %s: %s (its invisibility ran out: it was or will be delivered "
                                "again)", self.group, m.msg_id, exc)
                    return
                failure: MQError = exc
            except MQError as exc:
                failure = exc
            log.warning("group %s: settling message %s failed (retrying in %.0f s): %s", self.group, m.msg_id,
                        SETTLE_RETRY_S, failure)
            if self.stopped.wait(SETTLE_RETRY_S):
                return  # shutting down: the message comes again after its invisible duration
