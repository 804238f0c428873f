"""The send dispatcher: which queue each attempt goes to, what its outcome teaches the latency
fault tolerance, and whether to try again (Java ``DefaultMQProducerImpl.sendDefaultImpl``).

Every transport of a producer (``Producer.send`` in the caller's thread, the asyncio coroutine
behind ``send``/``send_async`` when nothing is cached, and the callback-driven first attempt of
``send_async`` in ``async_send.py``) asks one :class:`SendDispatcher`:

* :meth:`SendDispatcher.select_queue`: the next queue, avoiding the broker that just failed
  (:class:`~rocketmq_sdk.producer.fault.MQFaultStrategy`);
* :meth:`SendDispatcher.retry_after_error` / :meth:`SendDispatcher.retry_after_result`: record
  the attempt's latency or failure, then the :class:`~rocketmq_sdk.retry.RetryPolicy`'s answer
  (``retry_times_when_send_failed`` / ``retry_times_when_send_async_failed`` more attempts, on a
  remoting error or one of :data:`RETRY_RESPONSE_CODES`, and on a status other than SEND_OK
  with ``retry_another_broker_when_not_store_ok``). A retry goes to another broker at once.
* after an error the policy calls a stale route (:func:`stale_route_error`: connection
  refused/reset, SERVICE_NOT_AVAILABLE), the topic's route is refreshed first (at most every
  :data:`ROUTE_REFRESH_MIN_INTERVAL_S` per topic), so the retry — or the next send — goes to
  the broker name's new master (DLedger failover, a slave taking over) without waiting for the
  30 s route poll.

The two loops that drive attempts to the end, :meth:`SendDispatcher.send_blocking` and
:meth:`SendDispatcher.send`, differ only in ``await``; the callback transport runs its first
attempt itself and continues in :meth:`SendDispatcher.send`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from ..client.route import TopicPublishInfo
from ..config import ProducerConfig
from ..exceptions import MQBrokerError, RemotingConnectError, RemotingError, RemotingSendRequestError
from ..protocol.codes import ResponseCode
from ..protocol.message import MessageQueue, SendResult, SendStatus
from ..retry import RetryPolicy
from .fault import MQFaultStrategy
from .prepare import Prepared

__all__ = ["RETRY_RESPONSE_CODES", "BlockingAttempt", "AsyncAttempt", "SendDispatcher", "retryable_error"]

log = logging.getLogger("rocketmq_sdk.producer")

_monotonic = time.monotonic
_SEND_OK = SendStatus.SEND_OK

#: Broker codes after which Java's sync send retries (another queue, avoiding the failed broker).
RETRY_RESPONSE_CODES = frozenset({ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE,
                                  ResponseCode.SYSTEM_ERROR, ResponseCode.NO_PERMISSION,
                                  ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT})

#: ``attempt(queue, prepared, deadline, timeout_ms)``: one send attempt of a transport
#: (``deadline`` on ``time.monotonic()``, s; ``timeout_ms`` for the error text).
BlockingAttempt = Callable[[MessageQueue, Prepared, float, float], SendResult]
AsyncAttempt = Callable[[MessageQueue, Prepared, float, float], Awaitable[SendResult]]


def retryable_error(exc: BaseException) -> bool:
    """A send error worth another attempt on another broker: a remoting error (connect, write,
    timeout) or a broker answer in :data:`RETRY_RESPONSE_CODES`."""
    if isinstance(exc, MQBrokerError):
        return exc.code in RETRY_RESPONSE_CODES
    return isinstance(exc, RemotingError)


ROUTE_REFRESH_MIN_INTERVAL_S = 0.2
"""Seconds between two route refreshes of one topic triggered by send errors."""


def stale_route_error(exc: BaseException) -> bool:
    """An error after which the route that chose the address is suspect: the connection was
    refused (Java client code 10001) or reset, or the broker answered SERVICE_NOT_AVAILABLE (14,
    a demoted master or a DLedger follower) or had no master address."""
    if isinstance(exc, MQBrokerError):
        return exc.code == ResponseCode.SERVICE_NOT_AVAILABLE
    return isinstance(exc, (RemotingConnectError, RemotingSendRequestError))


#: ``refresh(topic, timeout_s)``: fetch ``topic``'s route now (blocking; the producer's)
RouteRefresher = Callable[[str, float], None]
AsyncRouteRefresher = Callable[[str], Awaitable[None]]


def _not_stored_ok(result: SendResult) -> bool:
    return result.send_status is not _SEND_OK


class SendDispatcher:
    """Queue choice, fault bookkeeping and retry decisions of one producer (thread-safe).

    Args:
        config: the producer's settings (``retry_times_when_send_failed``,
            ``retry_times_when_send_async_failed``, ``retry_another_broker_when_not_store_ok``,
            ``send_latency_fault_enable``, ``latency_max``, ``not_available_duration``).

    Attributes:
        publish: topic (namespaced) → its :class:`TopicPublishInfo` (kept current by the client
            instance's route refreshes).
        fault: the :class:`MQFaultStrategy`.
        policy: the retry policy of sync sends; ``async_policy`` that of ``send_async``.
    """

    __slots__ = ("publish", "fault", "policy", "async_policy", "refresh_route", "arefresh_route", "_refreshed")

    def __init__(self, config: ProducerConfig) -> None:
        self.publish: dict[str, TopicPublishInfo] = {}
        self.fault = MQFaultStrategy(config.send_latency_fault_enable, config.latency_max,
                                     config.not_available_duration)
        on_result = _not_stored_ok if config.retry_another_broker_when_not_store_ok else None
        self.policy = RetryPolicy(config.retry_times_when_send_failed, retry_on_error=retryable_error,
                                  retry_on_result=on_result, refresh_route_on_error=stale_route_error)
        self.async_policy = self.policy.with_retries(config.retry_times_when_send_async_failed)
        #: set by the producer: refresh a topic's route (blocking / on the loop)
        self.refresh_route: RouteRefresher | None = None
        self.arefresh_route: AsyncRouteRefresher | None = None
        self._refreshed: dict[str, float] = {}  # topic → monotonic time of the last error refresh

    def _refresh_due(self, policy: RetryPolicy, exc: BaseException, topic: str) -> bool:
        if not policy.stale_route(exc):
            return False
        now = _monotonic()
        if now - self._refreshed.get(topic, -1e9) < ROUTE_REFRESH_MIN_INTERVAL_S:
            return False
        self._refreshed[topic] = now
        return True

    def _after_refresh(self, info: TopicPublishInfo, topic: str) -> TopicPublishInfo:
        fresh = self.publish.get(topic)
        return fresh if fresh is not None and fresh.ok else info

    def update_route(self, topic: str, info: TopicPublishInfo) -> None:
        """A refreshed route of ``topic``: the queue rotation is kept when the queues did not change."""
        old = self.publish.get(topic)
        if old is not None and old.queues == info.queues:
            old.route = info.route
            return
        self.publish[topic] = info

    def select_queue(self, info: TopicPublishInfo, avoid: str | None = None) -> MessageQueue:
        """The queue of the next attempt, avoiding broker ``avoid`` if another one is usable."""
        return self.fault.select_one_queue(info, avoid)

    def retry_after_error(self, policy: RetryPolicy, attempts: int, queue: MessageQueue, started: float,
                          exc: BaseException) -> bool:
        """Attempt number ``attempts`` (from 1) to ``queue``, begun at ``started``
        (``time.monotonic()``), raised ``exc``: record the failure; try again (on another broker)?"""
        self.fault.update_fault_item(queue.broker_name, (_monotonic() - started) * 1000.0, True)
        log.debug("send to %s failed (%s)", queue, exc)
        return policy.retry_error(attempts, exc)

    def retry_after_result(self, policy: RetryPolicy, attempts: int, queue: MessageQueue, started: float,
                           result: SendResult) -> bool:
        """Attempt number ``attempts`` to ``queue`` returned ``result``: record its latency; try
        again on another broker (a status other than SEND_OK, if the policy says so)?"""
        fault = self.fault
        if fault.enabled:
            fault.update_fault_item(queue.broker_name, (_monotonic() - started) * 1000.0, False)
        return result.send_status is not _SEND_OK and policy.retry_result(attempts, result)

    def send_blocking(self, info: TopicPublishInfo, policy: RetryPolicy, attempt: BlockingAttempt, p: Prepared,
                      deadline: float, timeout_ms: float) -> SendResult:
        """``attempt`` on queues of ``info`` until one succeeds or ``policy`` stops (blocking).

        Returns:
            the last attempt's result (SEND_OK, or another status the policy did not retry).

        Raises:
            the last attempt's error.
        """
        fault = self.fault
        attempts = 0
        avoid = None
        while True:
            queue = fault.select_one_queue(info, avoid)
            started = _monotonic() if fault.enabled else 0.0  # latencies are recorded only then
            attempts += 1
            try:
                result = attempt(queue, p, deadline, timeout_ms)
            except Exception as exc:
                retry = self.retry_after_error(policy, attempts, queue, started, exc)
                refresh = self.refresh_route
                if refresh is not None and self._refresh_due(policy, exc, p.topic):
                    try:
                        refresh(p.topic, max(0.05, deadline - _monotonic()))
                        info = self._after_refresh(info, p.topic)
                    except Exception as err:  # noqa: BLE001 - the send's own error is what counts
                        log.debug("route refresh of %s after a send error failed: %s", p.topic, err)
                if not retry:
                    raise
            else:
                if result.send_status is _SEND_OK and not fault.enabled:
                    return result  # nothing to record nor retry (retry_after_result, without a call)
                if not self.retry_after_result(policy, attempts, queue, started, result):
                    return result
            avoid = queue.broker_name

    async def send(self, info: TopicPublishInfo, policy: RetryPolicy, attempt: AsyncAttempt, p: Prepared,
                   deadline: float, timeout_ms: float, attempts: int = 0, avoid: str | None = None) -> SendResult:
        """:meth:`send_blocking` on the event loop; ``attempts`` already made (the callback
        transport's first), the last one to broker ``avoid``."""
        while True:
            queue = self.fault.select_one_queue(info, avoid)
            started = _monotonic()
            attempts += 1
            try:
                result = await attempt(queue, p, deadline, timeout_ms)
            except Exception as exc:
                retry = self.retry_after_error(policy, attempts, queue, started, exc)
                refresh = self.arefresh_route
                if refresh is not None and self._refresh_due(policy, exc, p.topic):
                    try:
                        await refresh(p.topic)
                        info = self._after_refresh(info, p.topic)
                    except Exception as err:  # noqa: BLE001
                        log.debug("route refresh of %s after a send error failed: %s", p.topic, err)
                if not retry:
                    raise
            else:
                if not self.retry_after_result(policy, attempts, queue, started, result):
                    return result
            avoid = queue.broker_name
