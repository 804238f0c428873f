"""``ConsumeMessageOrderlyService``: one listener call at a time per queue, in queue order
(Java ``ConsumeMessageOrderlyService``).

In clustering mode a queue is consumed only while this client holds its broker lock
(LOCK_BATCH_MQ, see ``queue_lock``); without it the request retries the lock 100 ms later (3 s
after a refusal). A consume request takes up to ``consume_message_batch_max_size`` messages in
offset order, calls the listener under the queue's ``consume_lock`` and:

- SUCCESS: the offset moves past the batch;
- SUSPEND_CURRENT_QUEUE_A_MOMENT (or an exception, or None): the batch goes back in front of the
  queue and is consumed again after ``suspend_current_queue_time`` ms (10..30000), its messages'
  ``reconsume_times`` incremented; a message already consumed ``max_reconsume_times`` times is
  sent to ``%RETRY%group`` with header ``reconsumeTimes`` = that count, which makes the broker
  store it in ``%DLQ%group`` (docs/protocol.md §5.8), and the offset moves on. For orderly consumers
  ``max_reconsume_times = -1`` means unlimited (Java ``Integer.MAX_VALUE``).

A request keeps consuming a queue for at most 60 s before yielding its thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..exceptions import MQBrokerError, MQError
from ..protocol.codes import MessageConst as MC
from ..protocol.headers import SendMessageRequestHeader
from ..protocol.message import MessageExt, MessageQueue
from ..protocol.message_codec import encode_properties
from ..protocol.msgid import create_uniq_id
from ..trace.hooks import traced_consume
from .consume_pool import ConsumePool
from .listener import ConsumeOrderlyContext, ConsumeOrderlyStatus, MessageListenerOrderly
from .process_queue import ProcessQueue
from .tracing import start_process_spans

if TYPE_CHECKING:
    from .consume_context import ConsumeContext
    from .queue_lock import QueueLocker

__all__ = ["ConsumeMessageOrderlyService"]

log = logging.getLogger("rocketmq_sdk.consumer.orderly")

_SUCCESS = ConsumeOrderlyStatus.SUCCESS
_SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
MAX_TIME_CONSUME_CONTINUOUSLY_S = 60.0  # Java rocketmq.client.maxTimeConsumeContinuously
LOCK_MAX_LIVE_S = 30.0  # Java rocketmq.client.rebalance.lockMaxLiveTime
JAVA_INT_MAX = 2**31 - 1
_WAIT_LOCK = -1.0  # _consume result: a lock attempt will reschedule the queue


class ConsumeMessageOrderlyService:
    """Thread pool of ``consume_thread_max`` workers; at most one runs a given queue."""

    def __init__(self, ctx: ConsumeContext, listener: MessageListenerOrderly, locker: QueueLocker) -> None:
        self.ctx = ctx
        self.listener = listener
        self.locker = locker
        cfg = ctx.config
        self.batch_size = cfg.consume_message_batch_max_size
        self.clustering = ctx.clustering
        self.max_reconsume_times = JAVA_INT_MAX if cfg.max_reconsume_times == -1 else cfg.max_reconsume_times
        # daemon threads, as for concurrent consumers: a busy listener cannot hold the
        # interpreter's exit past shutdown()'s deadline (ThreadPoolExecutor joins without one)
        self.pool = ConsumePool(cfg.consume_thread_max, f"rocketmq-orderly-{ctx.group}")
        self._lock = threading.Lock()
        self._stopped = False

    # -------------------------------------------------------------- scheduling (any thread)

    def submit(self, msgs: Sequence[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        """New messages were cached for ``mq``: make sure a consume request is queued."""
        self._schedule(pq, mq)

    def _schedule(self, pq: ProcessQueue, mq: MessageQueue, delay_s: float = 0.0) -> None:
        with self._lock:
            if self._stopped or pq.consume_scheduled or pq.dropped:
                return
            pq.consume_scheduled = True
        if delay_s > 0:
            timer = threading.Timer(delay_s, self._submit_now, (pq, mq))
            timer.daemon = True
            timer.start()
        else:
            self._submit_now(pq, mq)

    def _submit_now(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        with self._lock:
            if self._stopped:
                pq.consume_scheduled = False
                return
            if not self.pool.submit(self._run, pq, mq):  # shut down meanwhile
                pq.consume_scheduled = False

    def _run(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        delay: float | None = None
        try:
            delay = self._consume(pq, mq)
        except Exception:
            log.exception("orderly consume of %s failed", mq)
            delay = 1.0
        finally:
            with self._lock:
                pq.consume_scheduled = False
        if pq.dropped or delay == _WAIT_LOCK:
            return
        if delay is not None:
            self._schedule(pq, mq, delay)
        elif pq.has_messages():  # messages cached after the last take
            self._schedule(pq, mq)

    # -------------------------------------------------------------- locks

    def _holds_lock(self, pq: ProcessQueue) -> bool:
        return not self.clustering or (pq.locked and not pq.is_lock_expired(LOCK_MAX_LIVE_S))

    def _try_lock_later(self, pq: ProcessQueue, mq: MessageQueue, delay_s: float) -> None:
        """Lock ``mq`` on its broker after ``delay_s``, then consume it (3 s later if refused)."""
        inst = self.ctx.instance

        async def relock() -> None:
            await asyncio.sleep(delay_s)
            if pq.dropped or self._stopped:
                return
            granted = await self.locker.lock_batch([mq])
            if mq in granted:
                pq.locked, pq.last_lock_timestamp = True, time.monotonic()
                self._schedule(pq, mq, 0.01)
            else:
                self._schedule(pq, mq, 3.0)

        try:
            inst.loop_thread.submit(relock())
        except MQError:
            log.debug("client loop stopped; not relocking %s", mq)

    # -------------------------------------------------------------- consume (pool thread)

    def _consume(self, pq: ProcessQueue, mq: MessageQueue) -> float | None:
        """Consume ``mq`` until its cache is empty; returns None (done), a delay in seconds
        before the next request, or ``_WAIT_LOCK``."""
        begin = time.monotonic()
        while not pq.dropped and not self._stopped:
            if not self._holds_lock(pq):
                self._try_lock_later(pq, mq, 0.1)
                return _WAIT_LOCK
            if time.monotonic() - begin > MAX_TIME_CONSUME_CONTINUOUSLY_S:
                return 0.01
            msgs = pq.take_messages(self.batch_size)
            if not msgs:
                return None
            self._restore_topics(msgs)
            ctx = ConsumeOrderlyContext(mq)
            # the result is settled under the consume lock too, so a rebalance that drops the
            # queue (it waits for this lock) persists the offset after this batch: the next
            # owner neither repeats it nor skips anything
            with pq.consume_lock:
                if pq.dropped:
                    return None
                t0 = time.perf_counter()
                status = self._call_listener(msgs, ctx, mq)
                # Java: SUCCESS counts the batch OK, SUSPEND_CURRENT_QUEUE_A_MOMENT failed
                ok = len(msgs) if status is _SUCCESS else 0
                self.ctx.stats.topic(mq.topic).record_consume((time.perf_counter() - t0) * 1000.0, ok, len(msgs) - ok)
                if status is _SUSPEND and self._check_reconsume_times(msgs, mq):
                    pq.make_messages_to_consume_again(msgs)
                    ms = ctx.suspend_current_queue_time_millis
                    if ms == -1:
                        ms = self.ctx.config.suspend_current_queue_time
                    return min(max(ms, 10), 30_000) / 1000.0
                offset = pq.commit()
                if offset >= 0:
                    self.ctx.offset_store.update_offset(mq, offset, increase_only=False)
        return None

    def _call_listener(self, msgs: list[MessageExt], octx: ConsumeOrderlyContext,
                       mq: MessageQueue) -> ConsumeOrderlyStatus:
        ctx = self.ctx
        try:
            spans = start_process_spans(msgs, ctx.group, ctx.client_id)
            mt = ctx.msg_trace
            if mt is not None:
                call = self.listener if spans is None else lambda ms, c: spans.call(self.listener, ms, c)
                status = traced_consume(mt, call, msgs, octx, ctx.group)
            else:
                status = self.listener(msgs, octx) if spans is None else spans.call(self.listener, msgs, octx)
        except Exception:
            log.warning("orderly listener of group %s raised on %s; suspending the queue",
                        ctx.group, mq, exc_info=True)
            return _SUSPEND
        if status is not _SUCCESS and status is not _SUSPEND:
            if status is not None:
                log.warning("orderly listener of group %s returned %r; suspending the queue", ctx.group, status)
            return _SUSPEND
        return status

    def _restore_topics(self, msgs: list[MessageExt]) -> None:
        retry_topic = self.ctx.retry_topic
        now = str(int(time.time() * 1000))
        for m in msgs:
            if m.topic == retry_topic:
                real = m.properties.get(MC.RETRY_TOPIC)
                if real:
                    m.topic = real
            m.properties[MC.CONSUME_START_TIMESTAMP] = now

    def _check_reconsume_times(self, msgs: list[MessageExt], mq: MessageQueue) -> bool:
        """True when the batch must be suspended; messages over the limit go to the DLQ."""
        suspend = False
        for m in msgs:
            if m.reconsume_times >= self.max_reconsume_times:
                m.properties[MC.RECONSUME_TIME] = str(m.reconsume_times)
                if not self._send_to_dlq(m, mq):
                    suspend = True
                    m.reconsume_times += 1
            else:
                suspend = True
                m.reconsume_times += 1
        return suspend

    def _send_to_dlq(self, m: MessageExt, mq: MessageQueue) -> bool:
        ctx = self.ctx
        try:
            ctx.instance.run(self._send_back_to_retry(m, mq), ctx.timeout_s)
            log.info("message %s of %s exceeded %d reconsumes; sent to the DLQ of %s", m.msg_id, mq,
                     self.max_reconsume_times, ctx.group)
            return True
        except MQError as exc:
            log.warning("sending %s to the DLQ failed: %s; suspending the queue", m.msg_id, exc)
            return False

    async def _send_back_to_retry(self, m: MessageExt, mq: MessageQueue) -> None:
        """Java's orderly ``sendMessageBack``: a new message on ``%RETRY%group`` carrying the
        original's properties, ``RETRY_TOPIC``, ``ORIGIN_MESSAGE_ID``, ``DELAY = 3 + times``,
        with header ``reconsumeTimes`` / ``maxReconsumeTimes``."""
        ctx = self.ctx
        inst = ctx.instance
        retry = ctx.retry_topic
        addr = await inst.find_broker_master_or_refresh(mq.broker_name, mq.topic)
        if addr is None:
            raise MQBrokerError(-1, f"broker {mq.broker_name} not found")
        props = dict(m.properties)
        for k in (MC.RECONSUME_TIME, MC.MAX_RECONSUME_TIMES, MC.TRANSACTION_PREPARED, MC.CONSUME_START_TIMESTAMP,
                  MC.MIN_OFFSET, MC.MAX_OFFSET):
            props.pop(k, None)
        props[MC.RETRY_TOPIC] = m.topic
        props.setdefault(MC.ORIGIN_MESSAGE_ID, m.msg_id)
        uniq = props.setdefault(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, create_uniq_id())
        props[MC.DELAY_TIME_LEVEL] = str(min(3 + m.reconsume_times, 18))
        header = SendMessageRequestHeader(
            producer_group="CLIENT_INNER_PRODUCER", topic=retry, default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=m.flag,
            properties=encode_properties(props), reconsume_times=m.reconsume_times, unit_mode=False,
            max_reconsume_times=self.max_reconsume_times, batch=False, bname=mq.broker_name)
        await inst.api.send_message(addr, MessageQueue(retry, mq.broker_name, 0), header, m.body, uniq,
                                    ctx.config.mq_client_api_timeout)

    # -------------------------------------------------------------- shutdown

    def shutdown(self, timeout_s: float) -> bool:
        """Stop taking work, drop queued requests and wait up to ``timeout_s`` for running
        listeners (a second Ctrl-C ends the wait at once). Returns True if all finished."""
        with self._lock:
            self._stopped = True
        return self.pool.shutdown_listeners(self.ctx.group, timeout_s)
