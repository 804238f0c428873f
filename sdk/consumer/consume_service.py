"""``ConsumeMessageConcurrentlyService``: runs the listener on a thread pool and settles the
results (Java ``ConsumeMessageConcurrentlyService``, clustering).

The listener never runs on the I/O loop, so a slow listener cannot stall heartbeats or pulls.
RECONSUME_LATER (or an exception, or a None result) sends the messages back to the broker
(CONSUMER_SEND_MSG_BACK), which redelivers them through ``%RETRY%group`` after a delay; a
message whose send-back fails stays in flight (its offset is not committed) and is consumed
again locally 5 s later, so no message is lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..exceptions import MQError
from ..protocol.codes import MessageConst as MC
from ..protocol.message import MessageExt, MessageQueue
from ..trace.hooks import traced_consume
from .consume_pool import ConsumePool
from .listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, MessageListenerConcurrently
from .process_queue import ProcessQueue
from .tracing import start_process_spans, tracing_active

if TYPE_CHECKING:
    from .consume_context import ConsumeContext

__all__ = ["ConsumeMessageConcurrentlyService"]

log = logging.getLogger("rocketmq_sdk.consumer.consume")

_SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
_LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
_START_KEY = MC.CONSUME_START_TIMESTAMP


class ConsumeMessageConcurrentlyService:
    """Thread pool of ``consume_thread_max`` workers for one push consumer.

    Attributes:
        resubmit_delay_s: delay before locally re-consuming messages whose send-back failed (5 s).
        fan_out_threshold_s: average listener duration above which chunks of one pulled list
            run on separate pool threads (1 ms).
    """

    resubmit_delay_s = 5.0
    #: listener calls slower than this on average (seconds) are spread over the pool chunk
    #: by chunk; faster ones run a whole pulled list in one pool task (see :meth:`submit`).
    fan_out_threshold_s = 0.001

    def __init__(self, ctx: ConsumeContext, listener: MessageListenerConcurrently) -> None:
        self.ctx = ctx
        self.listener = listener
        cfg = ctx.config
        self.batch_size = cfg.consume_message_batch_max_size
        self.pool = ConsumePool(cfg.consume_thread_max, f"rocketmq-consume-{ctx.group}")
        self._stopped = False
        # start as "slow" (chunk by chunk, as Java) until fast calls pull the average down
        self._listener_avg_s = 2 * self.fan_out_threshold_s
        self._start_stamp = (-1, "")

    # -------------------------------------------------------------- submission (any thread)

    def submit(self, msgs: Sequence[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        """Queue ``msgs`` for the listener, in chunks of ``consume_message_batch_max_size``.

        While the listener is fast (its recent calls average under ``fan_out_threshold_s``) the
        whole list is one pool task that calls the listener chunk by chunk: handing a chunk to
        another thread costs a wake-up (~30-50 µs in CPython), more than a fast listener
        call. A slow listener gets one task per chunk, as Java, so chunks run in parallel.
        """
        n = self.batch_size
        chunks = [[m] for m in msgs] if n == 1 else [list(msgs[i:i + n]) for i in range(0, len(msgs), n)]
        if len(chunks) > 1 and self._listener_avg_s > self.fan_out_threshold_s:
            for chunk in chunks:
                if not self._submit_task([chunk], pq, mq):
                    return
        elif chunks:
            self._submit_task(chunks, pq, mq)

    def _submit_task(self, chunks: list[list[MessageExt]], pq: ProcessQueue, mq: MessageQueue) -> bool:
        return self.pool.submit(self._consume_chunks, chunks, pq, mq)

    def _submit_later(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        timer = threading.Timer(self.resubmit_delay_s, self.submit, (msgs, pq, mq))
        timer.daemon = True
        timer.start()

    # -------------------------------------------------------------- consume (pool thread)

    def _consume_chunks(self, chunks: list[list[MessageExt]], pq: ProcessQueue, mq: MessageQueue) -> None:
        """Consume ``chunks`` one after the other; the messages they settled leave the process
        queue (and move the offset) once, at the end."""
        settled: list[MessageExt] = []
        tally = [0.0, 0, 0, 0]  # listener ms, calls, OK, failed: recorded once per task
        try:
            for i, chunk in enumerate(chunks):
                if i and (self._stopped or self._listener_avg_s > self.fan_out_threshold_s):
                    # the listener turned slow (or we are stopping): the rest goes chunk by chunk
                    for rest in chunks[i:]:
                        if not self._submit_task([rest], pq, mq):
                            return
                    return
                done = self._consume(chunk, pq, mq, tally)
                if done is None:
                    return
                settled += done
        finally:
            if tally[1]:
                self.ctx.stats.topic(mq.topic).record_consume(tally[0], int(tally[2]), int(tally[3]),
                                                          calls=int(tally[1]))
            if settled:
                offset = pq.remove_messages(settled)
                if offset >= 0 and not pq.dropped:
                    self.ctx.offset_store.update_offset(mq, offset, increase_only=True)

    def _consume(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
                 tally: list[float]) -> list[MessageExt] | None:
        """Run the listener on ``msgs`` and settle the result: returns the messages acknowledged
        or sent back (the caller removes them from ``pq``), None when ``pq`` was dropped. Adds
        the call's ms, 1 call, OK and failed messages to ``tally`` (Java ``ConsumerStatsManager``)."""
        if pq.dropped:
            log.debug("%s was dropped; not consuming %d messages", mq, len(msgs))
            return None
        ctx = self.ctx
        retry_topic = ctx.retry_topic
        now_ms = int(time.time() * 1000)
        stamp = self._start_stamp  # (ms, str(ms)): one str() per millisecond, not per call
        if stamp[0] != now_ms:
            stamp = self._start_stamp = (now_ms, str(now_ms))
        now = stamp[1]
        for m in msgs:
            if m.topic == retry_topic:  # the listener sees the original topic
                real = m.properties.get(MC.RETRY_TOPIC)
                if real:
                    m.topic = real
            m.properties[_START_KEY] = now
        cctx = ConsumeConcurrentlyContext(mq)
        t0 = time.perf_counter()
        try:
            spans = start_process_spans(msgs, ctx.group, ctx.client_id) if tracing_active() else None
            mt = ctx.msg_trace
            if mt is not None:
                call = self.listener if spans is None else lambda ms, c: spans.call(self.listener, ms, c)
                status = traced_consume(mt, call, msgs, cctx, ctx.group, ctx.config.consume_timeout)
            else:
                status = self.listener(msgs, cctx) if spans is None else spans.call(self.listener, msgs, cctx)
        except Exception:
            log.warning("listener of group %s raised on %d messages of %s; they will be redelivered",
                        ctx.group, len(msgs), mq, exc_info=True)
            status = _LATER
        took = time.perf_counter() - t0
        # moving average of the listener's duration (unlocked: a lost update is harmless)
        self._listener_avg_s = 0.9 * self._listener_avg_s + 0.1 * took
        if status is not _SUCCESS and status is not _LATER:
            log.warning("listener of group %s returned %r; treating it as RECONSUME_LATER", ctx.group, status)
            status = _LATER
        # Java processConsumeResult: OK = acknowledged (ack_index + 1), the rest failed
        ok = min(max(cctx.ack_index + 1, 0), len(msgs)) if status is _SUCCESS else 0
        tally[0] += took * 1000.0
        tally[1] += 1
        tally[2] += ok
        tally[3] += len(msgs) - ok
        if pq.dropped:
            log.info("%s was dropped while consuming; results of %d messages discarded", mq, len(msgs))
            return None
        if status is _SUCCESS and cctx.ack_index >= len(msgs) - 1:
            return msgs  # all acknowledged (the common case)
        return self._process_result(status, cctx, msgs, pq, mq)

    def _process_result(self, status: ConsumeConcurrentlyStatus, cctx: ConsumeConcurrentlyContext,
                        msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> list[MessageExt]:
        """Send back what the listener did not acknowledge; returns the settled messages (those
        whose send-back failed stay in flight and are consumed again later)."""
        if status is _SUCCESS and cctx.ack_index >= len(msgs) - 1:
            return msgs  # all acknowledged (the common case)
        ack = min(cctx.ack_index, len(msgs) - 1) if status is _SUCCESS else -1
        failed: list[MessageExt] = []
        if not self.ctx.clustering:  # broadcasting: Java drops failed messages
            for m in msgs[ack + 1:]:
                log.warning("BROADCASTING: consuming %s of %s failed; the message is dropped", m.msg_id, mq)
            ack = len(msgs) - 1
        for m in msgs[ack + 1:]:
            if not self._send_back(m, cctx, mq):
                m.reconsume_times += 1
                failed.append(m)
        if not failed:
            return msgs
        log.warning("send-back of %d messages of %s failed; consuming them again in %.0f s",
                    len(failed), mq, self.resubmit_delay_s)
        self._submit_later(failed, pq, mq)
        return [m for m in msgs if not any(m is f for f in failed)]

    def _send_back(self, m: MessageExt, cctx: ConsumeConcurrentlyContext, mq: MessageQueue) -> bool:
        ctx = self.ctx
        try:
            ctx.instance.run(ctx.send_message_back(m, cctx.delay_level_when_next_consume, mq), ctx.timeout_s)
            return True
        except MQError as exc:
            log.warning("send-back of %s failed: %s", m.msg_id, exc)
            return False

    # -------------------------------------------------------------- consume timeout

    def clean_expired_messages(self, queues: Mapping[MessageQueue, ProcessQueue]) -> int:
        """Java ``cleanExpireMsg`` (blocking; run off the loop): in each of ``queues`` (the owned
        ones), up to 16 of the lowest in-flight messages whose listener started more than
        ``consume_timeout`` minutes ago are sent back (delay level 3) and leave the cache, so the
        queue's offset can move on. Returns how many were sent back."""
        ctx = self.ctx
        timeout_ms = ctx.config.consume_timeout * 60_000
        sent = 0
        for mq, pq in list(queues.items()):
            for _ in range(16):
                m = pq.first_message()
                started = m.properties.get(MC.CONSUME_START_TIMESTAMP) if m is not None else None
                if m is None or not started or time.time() * 1000 - int(started) <= timeout_ms or pq.dropped:
                    break
                if not self._send_back(m, ConsumeConcurrentlyContext(mq, delay_level_when_next_consume=3), mq):
                    break
                log.info("message %s of %s exceeded consume_timeout; sent back", m.msg_id, mq)
                sent += 1
                offset = pq.remove_messages([m])
                if offset >= 0 and not pq.dropped:
                    ctx.offset_store.update_offset(mq, offset, increase_only=True)
        return sent

    # -------------------------------------------------------------- shutdown

    def shutdown(self, timeout_s: float) -> bool:
        """Stop taking work, cancel queued batches and wait up to ``timeout_s`` for running
        listeners. Returns True if all finished."""
        self._stopped = True
        return self.pool.shutdown_listeners(self.ctx.group, timeout_s)
