"""The long-polling pull loop of one owned queue (Java ``PullMessageService`` +
``DefaultMQPushConsumerImpl.pullMessage`` + ``PullAPIWrapper.processPullResult``).

One asyncio task per owned queue: PULL_MESSAGE with SUSPEND (and COMMIT_OFFSET once an offset
is known, piggy-backing the commit as Java does), the broker holds the request up to
``suspend_timeout`` ms; found messages are filtered by exact tag and handed to the consume
pool. The loop pauses while ``pull_threshold_for_queue`` messages (or
``pull_threshold_size_for_queue`` MiB; or the per-topic thresholds shared among the owned
queues) are cached, and, for concurrent consumers, while the cached offsets span more than
``consume_concurrently_max_span``; nothing is dropped, pulling resumes as the cache drains.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from ..exceptions import MQError
from ..protocol.codes import MessageConst as MC
from ..protocol.codes import PullSysFlag, ResponseCode
from ..protocol.headers import PullMessageRequestHeader
from ..protocol.message import MessageQueue, PullStatus
from .offset_store import ReadOffsetType
from .process_queue import ProcessQueue
from .pull_node import pull_address
from .tracing import record_receive_span

if TYPE_CHECKING:
    from .push_consumer import PushConsumer

__all__ = ["flow_thresholds", "pull_loop"]

log = logging.getLogger("rocketmq_sdk.consumer.pull")

FLOW_CONTROL_DELAY_S = 0.05  # Java PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
FLOW_CONTROL_BROKER_DELAY_S = 0.02  # Java: 20 ms after a FLOW_CONTROL answer
PULL_DELAY_WHEN_SUSPENDED_S = 1.0  # Java PULL_TIME_DELAY_MILLS_WHEN_SUSPEND


def flow_thresholds(consumer: PushConsumer, mq: MessageQueue) -> tuple[int, int]:
    """(messages, bytes) a queue may cache before its pulling pauses: the per-queue settings,
    or the per-topic ones divided by the number of owned queues of the topic (Java
    ``RebalancePushImpl.messageQueueChanged``)."""
    cfg = consumer.config
    count, mib = cfg.pull_threshold_for_queue, cfg.pull_threshold_size_for_queue
    if cfg.pull_threshold_for_topic != -1 or cfg.pull_threshold_size_for_topic != -1:
        n = max(1, sum(1 for m in consumer.rebalancer.process_queues if m.topic == mq.topic))
        if cfg.pull_threshold_for_topic != -1:
            count = max(1, cfg.pull_threshold_for_topic // n)
        if cfg.pull_threshold_size_for_topic != -1:
            mib = max(1, cfg.pull_threshold_size_for_topic // n)
    return count, mib * 1024 * 1024


async def pull_loop(consumer: PushConsumer, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
    """Pull ``mq`` from ``offset`` until ``pq`` is dropped or the consumer stops."""
    cfg = consumer.config
    inst = consumer.instance
    store = consumer.offset_store
    next_offset = offset
    broker_id = 0  # suggestWhichBrokerId of the last answer (slave reads, docs/protocol.md §8.7)
    while not pq.dropped and consumer.running:
        if consumer.suspended:
            await asyncio.sleep(PULL_DELAY_WHEN_SUSPENDED_S)
            continue
        threshold_count, threshold_bytes = flow_thresholds(consumer, mq)
        if pq.msg_count > threshold_count or pq.msg_size > threshold_bytes or (
                not consumer.orderly and pq.max_span() > cfg.consume_concurrently_max_span):
            await asyncio.sleep(FLOW_CONTROL_DELAY_S)
            continue
        sub = consumer.rebalancer.subscriptions.get(mq.topic)
        if sub is None:
            await asyncio.sleep(cfg.pull_time_delay_when_exception / 1000.0)
            continue
        commit_offset = await store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
        post_sub = cfg.post_subscription_when_pull
        header = PullMessageRequestHeader(
            consumer_group=consumer.group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=next_offset,
            max_msg_nums=cfg.pull_batch_size,
            sys_flag=PullSysFlag.build(commit_offset > 0 and consumer.clustering, True, post_sub),
            commit_offset=max(commit_offset, 0), suspend_timeout_millis=cfg.suspend_timeout,
            subscription=sub.sub_string if post_sub else None, sub_version=sub.sub_version,
            expression_type=sub.expression_type, bname=mq.broker_name)
        addr = None
        try:
            addr = await pull_address(inst, mq, broker_id, header)  # the suggested broker, no commit bit on a slave
            pq.last_pull_timestamp = time.monotonic()
            result = await inst.api.pull_message(addr, header, cfg.pull_timeout)
        except asyncio.CancelledError:
            raise
        except MQError as exc:
            if pq.dropped or not consumer.running:
                break
            code = getattr(exc, "code", None)
            delay = FLOW_CONTROL_BROKER_DELAY_S if code == ResponseCode.FLOW_CONTROL \
                else cfg.pull_time_delay_when_exception / 1000.0
            log.warning("pull of %s from %s failed: %s", mq, addr, exc)
            await asyncio.sleep(delay)
            continue
        if pq.dropped:
            break
        broker_id = result.suggest_which_broker_id  # Java: the next pull of this queue goes there
        status = result.pull_status
        if status is PullStatus.FOUND:
            next_offset = result.next_begin_offset
            msgs = result.msg_found_list
            if sub.tags_set:
                msgs = [m for m in msgs if m.tags in sub.tags_set]
            min_s, max_s = str(result.min_offset), str(result.max_offset)
            bname, min_key, max_key = mq.broker_name, MC.MIN_OFFSET, MC.MAX_OFFSET
            for m in msgs:
                m.broker_name = bname
                props = m.properties
                props[min_key] = min_s
                props[max_key] = max_s
            if msgs:
                record_receive_span(msgs, mq.topic, consumer.group, inst.client_id)
                pq.put_messages(msgs)
                consumer._consume_service.submit(msgs, pq, mq)
            elif pq.msg_count == 0:
                store.update_offset(mq, next_offset, increase_only=True)
        elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            next_offset = result.next_begin_offset
            if pq.msg_count == 0:  # Java correctTagsOffset: nothing in flight, skip filtered offsets
                store.update_offset(mq, next_offset, increase_only=True)
        else:  # OFFSET_ILLEGAL: restart the queue at the broker's offset at the next rebalance
            log.warning("offset %d of %s is illegal; moving to %d", next_offset, mq, result.next_begin_offset)
            pq.dropped = True
            store.update_offset(mq, result.next_begin_offset, increase_only=False)
            await store.persist(mq, oneway=False)
            consumer.rebalancer.process_queues.pop(mq, None)
            store.remove_offset(mq)
            break
        if cfg.pull_interval > 0:
            await asyncio.sleep(cfg.pull_interval / 1000.0)
    log.debug("pull loop of %s ended", mq)
