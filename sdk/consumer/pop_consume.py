"""The POP mode of ``PushConsumer(..., pop=True)`` (Java: client rebalance off, group in POP
mode; ../shared/docs/rocketmq5-remoting.md §5.12).

No queue is owned: one task per (subscribed topic, broker) long-polls POP_MESSAGE with
``queueId`` -1 (``pop_poll_time`` ms, default 15000 as Java), runs the same concurrent listener on
the consume threads, then acknowledges each consumed message (ACK_MESSAGE) or, for
RECONSUME_LATER, makes it invisible for the next step of Java's POP delay table (10 s, 30 s,
1 min, 2 min ... 2 h: CHANGE_MESSAGE_INVISIBLETIME); the broker then delivers it again from the
group's POP retry topic with ``reconsume_times`` + 1. A message whose ``reconsume_times`` exceeds
``max_reconsume_times`` (16 when -1) is acknowledged and logged, as the Java client does (the
broker has no POP dead-letter queue). Messages are invisible to the rest of the group while
they are consumed (``pop_invisible_time`` ms, default 60000): a consumer killed mid-batch loses
nothing, its messages come back after that time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..exceptions import MQError, RequestCodeNotSupportedError
from ..protocol.bodies import SubscriptionData
from ..protocol.message import MessageExt, MessageQueue
from ..protocol.pop import ReceiptHandle
from .listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from .pop_client import PopClient, PopTarget
from .stats import ConsumerStats

__all__ = ["POP_DELAY_TABLE_MS", "PopConsumeService", "PopSettings"]

log = logging.getLogger("rocketmq_sdk.consumer.pop")

#: Java ``DefaultMQPushConsumerImpl`` POP redelivery delays after RECONSUME_LATER, ms
POP_DELAY_TABLE_MS = (10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000, 480_000,
                      540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000)


@dataclass(frozen=True, slots=True)
class PopSettings:
    """Knobs of ``PushConsumer(pop=True)``.

    Attributes:
        batch_size: messages per POP_MESSAGE (1..32, 32).
        invisible_time_ms: how long popped messages stay invisible to the group (60000 ms);
            make it longer than a batch takes to consume.
        poll_time_ms: how long the broker holds a pop that finds nothing (15000 ms).
        consume_batch_max_size: messages per listener call (1).
        max_reconsume_times: deliveries after which a failing message is dropped (16).
        init_mode: where a new group starts: 0 first message, 1 end of the queues.
        retry_delays_ms: invisibility after RECONSUME_LATER by ``reconsume_times`` (Java's table).
    """

    batch_size: int = 32
    invisible_time_ms: int = 60_000
    poll_time_ms: int = 15_000
    consume_batch_max_size: int = 1
    max_reconsume_times: int = 16
    init_mode: int = 1  # 0: a new group starts at the first message, 1: at the end
    retry_delays_ms: tuple[int, ...] = POP_DELAY_TABLE_MS


class PopConsumeService:
    """The POP tasks of one push consumer.

    Args:
        client: the group's POP requests.
        subscriptions: ``() -> {topic: SubscriptionData}`` (read at each round).
        listener: the concurrent listener ``fn(msgs, ConsumeConcurrentlyContext) -> status``.
        pool: the consume threads.
        settings: :class:`PopSettings`.
        stats: the push consumer's statistics (its running info's ``statusTable``): pulls as
            Java's POP consumer counts them (RT and messages of each pop that found some),
            listener calls (RT, messages consumed OK / failed), by the subscribed topic.
    """

    def __init__(self, client: PopClient, subscriptions: Callable[[], dict[str, SubscriptionData]],
                 listener: Callable[[list[MessageExt], ConsumeConcurrentlyContext], object],
                 pool: concurrent.futures.Executor, settings: PopSettings, stats: ConsumerStats | None = None) -> None:
        self.client = client
        self.subscriptions = subscriptions
        self.listener = listener
        self.pool = pool
        self.settings = settings
        self.stats = stats if stats is not None else ConsumerStats()
        self._tasks: dict[PopTarget, asyncio.Task] = {}
        self._stopping = False
        self.consumed = 0

    async def refresh(self) -> None:
        """Start a task for every (topic, broker) not served yet (routes may have grown)."""
        if self._stopping:
            return
        subs = self.subscriptions()
        for target in await self.client.targets(list(subs)):
            task = self._tasks.get(target)
            if task is None or task.done():
                self._tasks[target] = asyncio.get_running_loop().create_task(self._run(target))

    async def stop(self) -> None:
        """Cancel the POP tasks (a held pop is abandoned: whatever it popped comes back after the
        invisible time) and wait for the batches being consumed."""
        self._stopping = True
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

    async def _run(self, target: PopTarget) -> None:
        s = self.settings
        backoff = 0.0
        while not self._stopping:
            sub = self.subscriptions().get(target.topic)
            if sub is None:
                return
            try:
                began = time.monotonic()
                msgs = await self.client.pop(target, sub, s.batch_size, s.invisible_time_ms, s.poll_time_ms,
                                             init_mode=s.init_mode)
                backoff = 0.0
                if msgs:  # Java incPullRT / incPullTPS on FOUND
                    self.stats.topic(target.topic).record_pull((time.monotonic() - began) * 1000.0, len(msgs))
            except asyncio.CancelledError:
                raise
            except RequestCodeNotSupportedError:
                log.error("broker %s of %s does not serve POP (not a RocketMQ 5.x broker); pop=True cannot "
                          "consume there", target.addr, target.topic)
                return
            except MQError as exc:
                backoff = min(max(backoff * 2, 0.1), 3.0)
                log.warning("POP of %s from %s failed (retry in %.1f s): %s", target.topic, target.addr, backoff, exc)
                await asyncio.sleep(backoff)
                continue
            if msgs:
                await self._consume(target, msgs, sub)

    async def _consume(self, target: PopTarget, msgs: list[MessageExt], sub: SubscriptionData) -> None:
        # a message whose tag only shares its hash code with a subscribed one is acknowledged unseen
        acks = [m for m in msgs if not sub.matches_tag(m.tags)]
        msgs = [m for m in msgs if sub.matches_tag(m.tags)]
        n = max(1, self.settings.consume_batch_max_size)
        loop = asyncio.get_running_loop()
        chunks = [msgs[i:i + n] for i in range(0, len(msgs), n)]
        results = await asyncio.gather(*(loop.run_in_executor(self.pool, self._call, target, c) for c in chunks),
                                       return_exceptions=True)
        later = []
        for chunk, ok in zip(chunks, results, strict=True):
            if ok is True:
                acks.extend(chunk)
            else:
                later.extend(chunk)
        await asyncio.gather(self._ack_all(acks), *(self._settle(m, False) for m in later), return_exceptions=True)

    async def _ack_all(self, msgs: list[MessageExt]) -> None:
        """Acknowledge consumed messages: one BATCH_ACK_MESSAGE per broker (ACK_MESSAGE for one)."""
        if len(msgs) == 1:
            await self._settle(msgs[0], True)
            return
        try:
            pairs = [(m, ReceiptHandle.parse(m.receipt_handle or "")) for m in msgs]
            if pairs:
                await self.client.batch_ack(pairs)
        except (MQError, ValueError) as exc:
            log.warning("group %s: acknowledging %d messages failed (they come back after their invisible "
                        "time): %s", self.client.group, len(msgs), exc)

    def _call(self, target: PopTarget, msgs: list[MessageExt]) -> bool:
        began = time.perf_counter()
        ok = self._listen(target, msgs)
        self.stats.topic(target.topic).record_consume((time.perf_counter() - began) * 1000.0,
                                                      len(msgs) if ok else 0, 0 if ok else len(msgs))
        return ok

    def _listen(self, target: PopTarget, msgs: list[MessageExt]) -> bool:
        ctx = ConsumeConcurrentlyContext(MessageQueue(target.topic, target.broker_name, msgs[0].queue_id))
        try:
            status = self.listener(msgs, ctx)
        except Exception:
            log.warning("listener of group %s raised on %d messages; they will be redelivered", self.client.group,
                        len(msgs), exc_info=True)
            return False
        if status is not ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            if status is not ConsumeConcurrentlyStatus.RECONSUME_LATER:
                log.warning("listener of group %s returned %r; treating it as RECONSUME_LATER", self.client.group, status)
            return False
        self.consumed += len(msgs)
        return True

    async def _settle(self, m: MessageExt, ok: bool) -> None:
        try:
            handle = ReceiptHandle.parse(m.receipt_handle or "")
            if ok:
                await self.client.ack(m, handle)
            elif m.reconsume_times >= self.settings.max_reconsume_times:
                log.warning("group %s: message %s was consumed %d times without success; dropped (acknowledged), "
                            "as the Java POP consumer does", self.client.group, m.msg_id, m.reconsume_times + 1)
                await self.client.ack(m, handle)
            else:
                table = self.settings.retry_delays_ms or POP_DELAY_TABLE_MS
                delay = table[min(m.reconsume_times, len(table) - 1)]
                await self.client.change_invisible_time(m, handle, delay)
        except (MQError, ValueError) as exc:
            # not settled: the broker delivers it again after its invisible time
            log.warning("group %s: settling message %s failed (it comes back after its invisible time): %s",
                        self.client.group, m.msg_id, exc)
