"""Where a consumer starts reading a queue it has just been given (Java
``RebalancePushImpl.computePullFromWhereWithException``, docs/protocol.md §6.5), for the push
and lite-pull consumers alike.

1. The group's stored offset, read from the offset store (the broker in CLUSTERING, the local
   file in BROADCASTING: :mod:`~rocketmq_sdk.consumer.offset_store`), always wins.
2. When the lookup *failed* (-2) the queue is skipped until the next rebalance (-1 returned).
3. With no stored offset (-1), ``consume_from_where`` decides:

   - ``CONSUME_FROM_FIRST_OFFSET``: 0;
   - ``CONSUME_FROM_LAST_OFFSET`` (and the deprecated MIN/MAX/…BOOT_FIRST forms): the queue's
     max offset (only new messages), but 0 for a ``%RETRY%`` topic (its messages are all ours);
   - ``CONSUME_FROM_TIMESTAMP``: the offset of the message stored nearest
     ``consume_timestamp`` (``yyyyMMddHHmmss``, local time), but the max offset for a retry
     topic.

   A BROADCASTING consumer's queue that did not exist when the consumer started (its topic
   created later, or queues added) starts at 0 whatever ``consume_from_where`` says: everything
   in it was sent after the consumer started, and its max offset when the next route update
   reveals it would skip those messages for good (the caller passes ``created_after_start``).
   A difference from the Java client, which loses them.
"""

from __future__ import annotations

import datetime as _dt
import logging
from typing import TYPE_CHECKING, Protocol

from ..exceptions import MQError
from ..protocol.bodies import ConsumeFromWhere
from ..protocol.codes import is_retry_topic
from ..protocol.message import MessageQueue
from .offset_store import LOOKUP_FAILED, NO_OFFSET, ReadOffsetType

if TYPE_CHECKING:
    from ..client.instance import MQClientInstance

__all__ = ["OffsetReader", "compute_start_offset"]

log = logging.getLogger("rocketmq_sdk.consumer.offset")

_LAST_OFFSET_FAMILY = frozenset({
    ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST,
    ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET, ConsumeFromWhere.CONSUME_FROM_MAX_OFFSET})


class OffsetReader(Protocol):
    """The part of an offset store the start offset needs."""

    async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType) -> int: ...


async def compute_start_offset(mq: MessageQueue, store: OffsetReader, inst: MQClientInstance, *,
                               consume_from_where: ConsumeFromWhere, consume_timestamp: str,
                               group: str = "", created_after_start: bool = False) -> int:
    """The first offset to pull of the newly owned ``mq`` (see the module text), or -1: skip the
    queue until the next rebalance (the stored offset or the broker's answer is unavailable;
    errors are logged, never raised). ``created_after_start``: the queue appeared after the
    consumer started (broadcasting only: it is read from offset 0). Runs on the client's loop."""
    last = await store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
    if last >= 0:
        return last
    if last == LOOKUP_FAILED:
        return -1
    assert last == NO_OFFSET
    cfw = consume_from_where
    try:
        if cfw is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET or created_after_start:
            return 0
        addr = await inst.find_broker_master_or_refresh(mq.broker_name, mq.topic)
        if addr is None:
            return -1
        if is_retry_topic(mq.topic):
            return 0 if cfw in _LAST_OFFSET_FAMILY else await inst.api.get_max_offset(addr, mq)
        if cfw in _LAST_OFFSET_FAMILY:
            return await inst.api.get_max_offset(addr, mq)
        ts = _dt.datetime.strptime(consume_timestamp, "%Y%m%d%H%M%S")
        return await inst.api.search_offset(addr, mq, int(ts.timestamp() * 1000))
    except MQError as exc:
        log.warning("start offset of %s for %s unavailable: %s", mq, group, exc)
        return -1
