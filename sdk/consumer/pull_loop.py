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

from ..protocol.codes import PullSysFlag
from ..protocol.message import MessageQueue, PullStatus
from .offset_store import ReadOffsetType
from .process_queue import ProcessQueue
from .pull_node import PullFromWhichNode
from .pull_result import QueuePuller, process_pull_result, pull_header
from .tracing import record_receive_span

if TYPE_CHECKING:
    from ..config import ConsumerConfig
    from .consume_context import ConsumeContext, ConsumeService
    from .rebalance import Rebalancer

__all__ = ["flow_thresholds", "pull_loop"]

log = logging.getLogger("rocketmq_sdk.consumer.pull")

FLOW_CONTROL_DELAY_S = 0.05  # Java PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
PULL_DELAY_WHEN_SUSPENDED_S = 1.0  # Java PULL_TIME_DELAY_MILLS_WHEN_SUSPEND


def flow_thresholds(cfg: ConsumerConfig, rebalancer: Rebalancer, mq: MessageQueue) -> tuple[int, int]:
    """(messages, bytes) a queue may cache before its pulling pauses: the per-queue settings,
    or the per-topic ones divided by the number of owned queues of the topic (Java
    ``RebalancePushImpl.messageQueueChanged``)."""
    count, mib = cfg.pull_threshold_for_queue, cfg.pull_threshold_size_for_queue
    if cfg.pull_threshold_for_topic != -1 or cfg.pull_threshold_size_for_topic != -1:
        n = max(1, rebalancer.owned_count(mq.topic))
        if cfg.pull_threshold_for_topic != -1:
            count = max(1, cfg.pull_threshold_for_topic // n)
        if cfg.pull_threshold_size_for_topic != -1:
            mib = max(1, cfg.pull_threshold_size_for_topic // n)
    return count, mib * 1024 * 1024


async def pull_loop(ctx: ConsumeContext, rebalancer: Rebalancer, service: ConsumeService,
                    nodes: PullFromWhichNode, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
    """Pull ``mq`` from ``offset`` until ``pq`` is dropped or the consumer stops; found messages
    go to ``service``, each pull to the broker ``nodes`` names for ``mq``; ``rebalancer`` owns
    the queue (subscriptions, and dropping it on OFFSET_ILLEGAL)."""
    cfg = ctx.config
    inst = ctx.instance
    store = ctx.offset_store
    puller = QueuePuller(inst, nodes, mq, cfg.pull_time_delay_when_exception, cfg.pull_timeout)
    next_offset = offset
    while not pq.dropped and ctx.running:
        if ctx.suspended:
            await asyncio.sleep(PULL_DELAY_WHEN_SUSPENDED_S)
            continue
        threshold_count, threshold_bytes = flow_thresholds(cfg, rebalancer, mq)
        if pq.msg_count > threshold_count or pq.msg_size > threshold_bytes or (
                not ctx.orderly and pq.max_span() > cfg.consume_concurrently_max_span):
            await asyncio.sleep(FLOW_CONTROL_DELAY_S)
            continue
        sub = await puller.subscription(rebalancer.subscriptions)
        if sub is None:
            continue
        commit_offset = await store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
        post_sub = cfg.post_subscription_when_pull
        header = pull_header(
            ctx.group, mq, sub, next_offset, cfg.pull_batch_size,
            sys_flag=PullSysFlag.build(commit_offset > 0 and ctx.clustering, True, post_sub),
            commit_offset=max(commit_offset, 0), suspend_timeout_ms=cfg.suspend_timeout,
            post_subscription=post_sub)
        pq.last_pull_timestamp = began = time.monotonic()
        # to the suggested broker (slave reads, docs/protocol.md §8.7), no commit bit on a slave
        result = await puller.pull(header, lambda: pq.dropped or not ctx.running)
        if result is None or pq.dropped:
            continue
        status = result.pull_status
        if status is PullStatus.FOUND:
            next_offset = result.next_begin_offset
            msgs = process_pull_result(result, mq, sub)
            ctx.stats.topic(mq.topic).record_pull((time.monotonic() - began) * 1000.0, len(msgs))
            if msgs:
                record_receive_span(msgs, mq.topic, ctx.group, inst.client_id)
                pq.put_messages(msgs)
                service.submit(msgs, pq, mq)
            elif pq.msg_count == 0:
                store.update_offset(mq, next_offset, increase_only=True)
        elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            next_offset = result.next_begin_offset
            if pq.msg_count == 0:  # Java correctTagsOffset: nothing in flight, skip filtered offsets
                store.update_offset(mq, next_offset, increase_only=True)
        else:  # OFFSET_ILLEGAL: restart the queue at the broker's offset at the next rebalance
            log.warning("offset %d of %s is illegal; moving to %d", next_offset, mq, result.next_begin_offset)
            await rebalancer.drop(mq, reset_offset=result.next_begin_offset)
            break
        if cfg.pull_interval > 0:
            await asyncio.sleep(cfg.pull_interval / 1000.0)
    log.debug("pull loop of %s ended", mq)
