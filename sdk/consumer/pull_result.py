"""One PULL_MESSAGE round trip and what to do with its answer, shared by the three consumers
(Java ``PullAPIWrapper.pullKernelImpl`` + ``processPullResult``).

- :func:`pull_header` builds the request of one pull of one queue;
- :func:`pull_once` sends it to the broker the queue's previous answer suggested
  (``suggestWhichBrokerId``, :mod:`~rocketmq_sdk.consumer.pull_node`) and records the new
  suggestion;
- :func:`process_pull_result` keeps, of a FOUND answer, the messages whose tag the subscription
  names (the broker filters by tag *hash*, so collisions come through) and stamps each with its
  broker name and the queue's MIN/MAX offsets, as Java does;
- :func:`pull_retry_policy` is the wait after a failed pull (``pull_time_delay_when_exception``
  ms, 20 ms after FLOW_CONTROL), a :class:`~rocketmq_sdk.retry.RetryPolicy`.

What each consumer does with the statuses differs and stays with it: the push loop
(``pull_loop.py``) hands messages to its consume service and drops the queue on OFFSET_ILLEGAL,
the lite-pull consumer buffers them for ``poll()`` and moves on, ``PullConsumer.pull`` returns
the result to the application. All three continue at ``result.next_begin_offset``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..exceptions import MQError
from ..protocol.bodies import SubscriptionData
from ..protocol.codes import MessageConst as MC
from ..protocol.codes import ResponseCode
from ..protocol.headers import PullMessageRequestHeader
from ..protocol.message import MessageExt, MessageQueue, PullResult, PullStatus
from ..retry import ConstantBackoff, ErrorCodeBackoff, RetryPolicy
from .pull_node import PullFromWhichNode

if TYPE_CHECKING:
    from ..client.instance import MQClientInstance

__all__ = ["FLOW_CONTROL_BROKER_DELAY_S", "QueuePuller", "process_pull_result", "pull_header", "pull_once",
           "pull_retry_policy"]

log = logging.getLogger("rocketmq_sdk.consumer.pull")

#: Java: the next pull 20 ms after a FLOW_CONTROL answer of the broker.
FLOW_CONTROL_BROKER_DELAY_S = 0.02


def pull_retry_policy(pull_time_delay_when_exception: int) -> RetryPolicy:
    """The pull loops' policy: retry for ever, ``pull_time_delay_when_exception`` ms after an
    error (Java ``pullTimeDelayMillsWhenException``; ``ConsumerConfig`` default 1000), 20 ms after a broker's
    FLOW_CONTROL answer."""
    return RetryPolicy(None, backoff=ErrorCodeBackoff(
        {ResponseCode.FLOW_CONTROL: FLOW_CONTROL_BROKER_DELAY_S},
        ConstantBackoff(pull_time_delay_when_exception / 1000.0)))


class QueuePuller:
    """The pulls of one queue by one background loop (push or lite-pull): each goes to the
    broker the previous answer suggested, a failure is logged and waited out as
    :func:`pull_retry_policy` says (the count of consecutive failures is kept here).

    Args:
        inst: the client instance.
        nodes: the consumer's ``suggestWhichBrokerId`` table.
        mq: the queue.
        pull_time_delay_when_exception: ms to wait after a failed pull.
        timeout_ms: the client timeout of one pull (``pull_timeout``).
    """

    __slots__ = ("inst", "nodes", "mq", "policy", "timeout_ms", "failures")

    def __init__(self, inst: MQClientInstance, nodes: PullFromWhichNode, mq: MessageQueue,
                 pull_time_delay_when_exception: int, timeout_ms: int) -> None:
        self.inst = inst
        self.nodes = nodes
        self.mq = mq
        self.policy = pull_retry_policy(pull_time_delay_when_exception)
        self.timeout_ms = timeout_ms
        self.failures = 0

    async def pull(self, header: PullMessageRequestHeader, abandoned: Callable[[], bool]) -> PullResult | None:
        """:func:`pull_once`; None when it failed (logged, and the policy's delay waited,
        unless ``abandoned()`` says the loop is over: the queue dropped, the consumer stopped)."""
        try:
            result = await pull_once(self.inst, self.nodes, self.mq, header, self.timeout_ms)
        except MQError as exc:
            if abandoned():
                return None
            self.failures += 1
            log.warning("pull of %s failed: %s", self.mq, exc)
            await asyncio.sleep(self.policy.delay_s(self.failures, exc))
            return None
        self.failures = 0
        return result

    async def subscription(self, subscriptions: Mapping[str, SubscriptionData]) -> SubscriptionData | None:
        """The subscription of the queue's topic; None, after waiting as after an error, when
        there is none (yet, or any more)."""
        sub = subscriptions.get(self.mq.topic)
        if sub is None:
            await asyncio.sleep(self.policy.delay_s(1))
        return sub


def pull_header(group: str, mq: MessageQueue, sub: SubscriptionData, offset: int, max_nums: int, *,
                sys_flag: int, suspend_timeout_ms: int, commit_offset: int = 0,
                post_subscription: bool = True, sub_version: int | None = None) -> PullMessageRequestHeader:
    """The PULL_MESSAGE header of ``max_nums`` messages of ``mq`` from ``offset`` for ``group``.

    Args:
        sub: the subscription; its expression travels when ``post_subscription`` (else the
            broker uses the group's registered one).
        sys_flag: ``PullSysFlag.build(commit_offset, suspend, subscription)``.
        suspend_timeout_ms: how long the broker may hold the request when nothing is there.
        commit_offset: the group's consumed offset piggy-backed on the pull (0: none).
        sub_version: the subscription version sent (default ``sub.sub_version``).
    """
    return PullMessageRequestHeader(
        consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset,
        max_msg_nums=max_nums, sys_flag=sys_flag, commit_offset=commit_offset,
        suspend_timeout_millis=suspend_timeout_ms,
        subscription=sub.sub_string if post_subscription else None,
        sub_version=sub.sub_version if sub_version is None else sub_version,
        expression_type=sub.expression_type, bname=mq.broker_name)


async def pull_once(inst: MQClientInstance, nodes: PullFromWhichNode, mq: MessageQueue,
                    header: PullMessageRequestHeader, timeout_ms: int) -> PullResult:
    """Send ``header`` to the broker ``nodes`` names for ``mq`` (the COMMIT_OFFSET bit cleared
    for a slave) and record the answer's ``suggestWhichBrokerId`` (on the client's loop).

    Raises:
        MQBrokerError: the broker answered an error code (``code``), or its name is in no route.
        RemotingError: connection failure or timeout.
    """
    addr = await nodes.address(inst, mq, header)
    result = await inst.api.pull_message(addr, header, timeout_ms)
    nodes.update(mq, result.suggest_which_broker_id)
    return result


def process_pull_result(result: PullResult, mq: MessageQueue, sub: SubscriptionData) -> list[MessageExt]:
    """Java ``processPullResult``: the messages of a FOUND ``result`` that ``sub`` selects by
    exact tag, each stamped with ``mq.broker_name`` and the ``MIN_OFFSET`` / ``MAX_OFFSET``
    properties (the queue's offsets at pull time); ``result.msg_found_list`` is replaced by
    them. Other statuses give ``[]``."""
    if result.pull_status is not PullStatus.FOUND:
        return []
    msgs = result.msg_found_list
    tags_set = sub.tags_set
    if tags_set:
        msgs = [m for m in msgs if m.tags in tags_set]
        result.msg_found_list = msgs
    min_s, max_s = str(result.min_offset), str(result.max_offset)
    bname, min_key, max_key = mq.broker_name, MC.MIN_OFFSET, MC.MAX_OFFSET
    for m in msgs:
        m.broker_name = bname
        props = m.properties
        props[min_key] = min_s
        props[max_key] = max_s
    return msgs
