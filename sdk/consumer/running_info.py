"""GET_CONSUMER_RUNNING_INFO (307) answers: what ``mqadmin consumerStatus`` shows about a
consumer (Java ``DefaultMQPushConsumerImpl.consumerRunningInfo``)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..properties import camel
from ..protocol.bodies import ConsumerRunningInfo, SubscriptionData
from ..protocol.message import MessageQueue

if TYPE_CHECKING:
    from ..config import ConsumerConfig
    from .offset_store import OffsetStore
    from .process_queue import ProcessQueue
    from .stats import ConsumerStats

__all__ = ["build_running_info"]

# never sent: credentials (anyone running consumerStatus would read them) and non-settings
_NOT_SHOWN = frozenset({"rpc_hooks", "secret_key", "security_token", "ssl_context"})


def build_running_info(cfg: ConsumerConfig, *, orderly: bool, start_timestamp_ms: int,
                       subscriptions: Sequence[SubscriptionData], queues: Mapping[MessageQueue, ProcessQueue],
                       offset_store: OffsetStore | None, stats: ConsumerStats | None = None) -> ConsumerRunningInfo:
    """Settings (Java property names; never credentials), ``subscriptions``, the state of
    every owned queue in ``queues`` (committed offsets from ``offset_store``, None before
    start) and the per-topic ``statusTable`` of ``stats`` (Java ``ConsumeStatus``: RT in ms,
    TPS per second over the last minute, failed messages of the last hour; empty if None).
    ``start_timestamp_ms``: when the consumer started, epoch ms (0: not yet)."""
    props = {}
    for f in dataclasses.fields(cfg):
        if f.name in _NOT_SHOWN:
            continue
        v = getattr(cfg, f.name)
        if v is None:  # Java's MixAll.object2Properties skips null fields
            continue
        props[camel(f.name)] = v.value if hasattr(v, "value") else str(v).lower() if isinstance(v, bool) else str(v)
    props.update({
        "PROP_NAMESERVER_ADDR": cfg.namesrv_addr or "", "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
        "PROP_CONSUMEORDERLY": str(bool(orderly)).lower(), "PROP_THREADPOOL_CORE_SIZE": str(cfg.consume_thread_max),
        "PROP_CONSUMER_START_TIMESTAMP": str(start_timestamp_ms), "PROP_CLIENT_VERSION": "V4_9_8"})
    now_mono, now_ms = time.monotonic(), int(time.time() * 1000)

    def wall(mono: float) -> int:
        return now_ms - int((now_mono - mono) * 1000)

    table = {}
    store = offset_store
    for mq, pq in queues.items():
        low = pq.min_offset_in_flight()
        table[mq] = {
            "cachedMsgCount": pq.msg_count, "cachedMsgMaxOffset": max(pq.queue_offset_max, 0) if low is not None else 0,
            "cachedMsgMinOffset": low or 0, "cachedMsgSizeInMiB": pq.msg_size // (1024 * 1024),
            "commitOffset": max(store.read_memory(mq), 0) if store else 0, "droped": pq.dropped,
            "lastConsumeTimestamp": wall(pq.last_consume_timestamp), "lastLockTimestamp": wall(pq.last_lock_timestamp) if pq.locked else 0,
            "lastPullTimestamp": wall(pq.last_pull_timestamp), "locked": pq.locked, "transactionMsgCount": 0,
            "transactionMsgMaxOffset": 0, "transactionMsgMinOffset": 0, "tryUnlockTimes": 0}
    return ConsumerRunningInfo(mq_table=table, properties=props, subscription_set=list(subscriptions),
                               status_table=stats.status_table() if stats is not None else {})
