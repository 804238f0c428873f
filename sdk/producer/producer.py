"""``Producer``: sends messages to RocketMQ brokers (Java ``DefaultMQProducer``).

The sync methods prepare the message in the caller's thread (validation, ``UNIQ_KEY``,
compression, the V2 header) and run the network part on the client instance's event loop, so
many threads can send at once over one connection per broker with many requests in flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar, Unpack

from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception,
    retry_if_result,
    stop_after_attempt,
    wait_none,
)

from ..aio import AsyncLifecycle
from ..client.instance import MQClientInstance, get_client_instance, release_client_instance
from ..client.route import TopicPublishInfo
from ..config import ProducerConfig
from ..config_types import ProducerSettings
from ..exceptions import (
    ClientStateError,
    IllegalArgumentError,
    MQBrokerError,
    RemotingError,
    RemotingTimeoutError,
    TopicNotExistError,
    topic_missing_remark,
)
from ..protocol import deflate
from ..protocol.codes import (
    GROUP_MAX_LENGTH,
    RETRY_GROUP_TOPIC_PREFIX,
    RequestCode,
    ResponseCode,
    check_name,
    is_not_allowed_send_topic,
    is_retry_topic,
)
from ..protocol.codes import MessageConst as MC
from ..protocol.codes import MessageSysFlag as SF
from ..protocol.message import Message, MessageQueue, SendResult, SendStatus
from ..protocol.message_codec import encode_batch, encode_properties
from ..protocol.msgid import create_uniq_id
from ..remoting.command import RemotingCommand
from ..trace.dispatcher import TraceDispatcher, start_or_none
from ..trace.hooks import PubTraceSpan
from .async_send import AsyncSend, DeadlineQueue, InFlight, OnewaySend
from .callbacks import run_callback
from .fault import MQFaultStrategy
from .namespace import unwrap_namespace, wrap_namespace
from .request import REPLY_MESSAGE_FLAG, RequestReplyMixin
from .selector import SelectorLike
from .send_request import SendHeaderTemplate, send_request
from .submit import BatchedSubmitter
from .tracing import PublishSpan, publish_span_is_no_op, start_publish_span

__all__ = ["Producer", "RETRY_RESPONSE_CODES", "SendCallback"]

log = logging.getLogger("rocketmq_sdk.producer")

T = TypeVar("T")

#: Oneway sends handed to the I/O loop and not yet written (Java ``semaphoreOneway``: 65535).
ONEWAY_MAX_QUEUED = 65535

#: ``callback(result, error)`` of :meth:`Producer.send_async`: exactly one of them is None.
SendCallback = Callable[[SendResult | None, BaseException | None], Any]


_FORKS = [0]  # fork() calls this process descends through (after_in_child)


def _count_fork() -> None:
    _FORKS[0] += 1


os.register_at_fork(after_in_child=_count_fork)



#: Broker codes after which Java's sync send retries (another queue, avoiding the failed broker).
RETRY_RESPONSE_CODES = frozenset({ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE,
                                  ResponseCode.SYSTEM_ERROR, ResponseCode.NO_PERMISSION,
                                  ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT})


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, MQBrokerError):
        return exc.code in RETRY_RESPONSE_CODES
    return isinstance(exc, RemotingError)


class _Prepared:
    """A message ready for the wire: V2 header (without queue/broker), body and id.

    With a header template (``head``; ``vals`` = the ``f, g, h, i`` fields) the ``ext`` dict is
    only built when read (the retry and fallback paths, RPC hooks); requests are rendered from
    the template (``send_request.py``)."""

    __slots__ = ("topic", "_ext", "body", "uniq_id", "code", "span", "head", "vals")

    def __init__(self, topic: str, ext: dict[str, str] | None, body: bytes, uniq_id: str,
                 code: int = RequestCode.SEND_MESSAGE_V2, span: PublishSpan | None = None,
                 head: SendHeaderTemplate | None = None, vals: tuple[str, str, str, str] | None = None) -> None:
        self.topic = topic
        self._ext = ext
        self.body = body
        self.uniq_id = uniq_id
        self.code = code
        self.span = span
        self.head = head
        self.vals = vals

    @property
    def ext(self) -> dict[str, str]:
        """The V2 header fields without ``n``, ``e`` = ``"0"`` (do not modify: copy)."""
        ext = self._ext
        if ext is None:
            ext = self._ext = self.head.ext("0", *self.vals)  # type: ignore[union-attr]
        return ext


class Producer(RequestReplyMixin, AsyncLifecycle):
    """A message producer.

    Args:
        group: producer group (``^[%|a-zA-Z0-9_-]+$``, ≤ 255 characters).
        namesrv_addr: name server list ``"host:port;host:port"``.
        **config: any :class:`rocketmq_sdk.config.ProducerConfig` setting (``send_msg_timeout``,
            ``retry_times_when_send_failed``, ``compress_msg_body_over_howmuch``,
            ``max_message_size``, ``instance_name``...).
        enable_msg_trace: write Apache RocketMQ message traces (a ``Pub`` record per answered
            send, batched asynchronously to the trace topic; Java ``enableMsgTrace``, False).
        customized_trace_topic: the trace topic (default ``RMQ_SYS_TRACE_TOPIC``).

    Raises:
        IllegalArgumentError: illegal group name or unknown setting.

    Use as a context manager or call ``start()`` / ``shutdown()``.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *, enable_msg_trace: bool = False,
                 customized_trace_topic: str | None = None, **config: Unpack[ProducerSettings]) -> None:
        self.group = check_name(group, "producer group", GROUP_MAX_LENGTH)
        self.config = ProducerConfig.from_kwargs(namesrv_addr=namesrv_addr, **config)
        self._msg_trace = TraceDispatcher(group, "PRODUCE", customized_trace_topic, self.config) \
            if enable_msg_trace else None
        self.group = wrap_namespace(self.config.namespace, self.group)
        self._publish: dict[str, TopicPublishInfo] = {}
        self._instance: MQClientInstance | None = None
        self._state_lock = threading.Lock()
        self._state = "CREATED"
        self._pid = os.getpid()
        self._forks = _FORKS[0]  # fork() count of this process at start (cheaper than getpid per send)
        cfg = self.config
        self._fault = MQFaultStrategy(cfg.send_latency_fault_enable, cfg.latency_max, cfg.not_available_duration)
        # unfinished send_async calls (bounded) and queued oneway sends; idle when none
        self._inflight_slots = InFlight(cfg.async_send_max_in_flight, ONEWAY_MAX_QUEUED)
        self._idle = self._inflight_slots.idle
        self._inflight_lock = threading.Lock()
        self._callbacks: concurrent.futures.ThreadPoolExecutor | None = None
        self._batched: BatchedSubmitter | None = None
        self._deadlines: DeadlineQueue | None = None
        self._topics_ok: set[str] = set()  # topic names already validated
        self._templates: dict[tuple, SendHeaderTemplate] = {}  # send header templates (_template)

    # -------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Register with the client instance and start it.

        Raises:
            ClientStateError: already started or shut down; the group is already used by another
                producer of the same client instance.
        """
        with self._state_lock:
            if self._state != "CREATED":
                raise ClientStateError(f"producer {self.group} cannot start: it is {self._state}")
            if not self.config.namesrv_addr_list and not self.config.address_server:
                raise ClientStateError("no name server: set namesrv_addr (or $NAMESRV_ADDR) or namesrv_domain")
            inst = get_client_instance(self.config)
            inst.register_producer(self)
            try:
                inst.run(inst.start(), self.config.mq_client_api_timeout / 1000.0)
            except BaseException:
                inst.producers.pop(self.group, None)
                release_client_instance(inst)
                raise
            self._instance = inst
            self._pid = os.getpid()
            self._forks = _FORKS[0]
            self._state = "RUNNING"
        inst.loop_thread.call_soon(inst.spawn_background, inst.announce_producer(self.config.create_topic_key))
        self._msg_trace = start_or_none(self._msg_trace)
        log.info("producer %s started (client %s)", self.group, inst.client_id)

    def shutdown(self) -> None:
        """Wait up to ``shutdown_timeout`` ms for in-flight async sends, unregister from the
        brokers and release the client instance. Idempotent."""
        with self._state_lock:
            if self._state != "RUNNING" or os.getpid() != self._pid:
                # never started, already shut down, or inherited through fork(): the I/O thread
                # and connections belong to the parent, so there is nothing to close here
                self._state = "SHUTDOWN"
                self._instance = None
                return
            self._state = "SHUTTING_DOWN"  # refuses new sends; in-flight ones finish
            inst = self._instance
        assert inst is not None
        if not self._idle.wait(self.config.shutdown_timeout / 1000.0):
            log.warning("producer %s: %d async sends still in flight after %d ms; shutting down anyway",
                        self.group, self._inflight_slots.total, self.config.shutdown_timeout)
        with self._state_lock:
            self._state = "SHUTDOWN"
            self._instance = None
        self._abandon_requests()  # request_async futures still waiting for a reply
        if self._msg_trace is not None:
            self._msg_trace.shutdown()
        if self._callbacks is not None:
            self._callbacks.shutdown(wait=False)
        try:
            inst.run(inst.unregister(producer_group=self.group), self.config.mq_client_api_timeout / 1000.0 + 1)
        except Exception:
            log.warning("producer %s: unregister failed", self.group, exc_info=True)
            inst.producers.pop(self.group, None)
        release_client_instance(inst)
        log.info("producer %s shut down", self.group)

    def __enter__(self) -> Producer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _running(self) -> MQClientInstance:
        if _FORKS[0] != self._forks and os.getpid() != self._pid:
            raise ClientStateError(
                f"producer {self.group} was started in process {self._pid} and cannot be used after fork() "
                f"(this is process {os.getpid()}); create and start a new Producer in the child, e.g. in a "
                "post-fork hook (gunicorn post_fork, Celery worker_process_init)")
        inst = self._instance
        if inst is None or self._state != "RUNNING":
            raise ClientStateError(f"producer {self.group} is not running ({self._state}); call start()")
        return inst

    def _inst(self) -> MQClientInstance:
        """The instance for work already accepted (in-flight sends finish during shutdown)."""
        inst = self._instance
        if inst is None:
            raise ClientStateError(f"producer {self.group} is shut down")
        return inst

    # -------------------------------------------------------------- ProducerInner (instance side)

    def _publish_topics(self) -> list[str]:
        return list(self._publish)

    def _update_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        old = self._publish.get(topic)
        if old is not None and old.queues == info.queues:
            old.route = info.route
            return
        self._publish[topic] = info

    # -------------------------------------------------------------- public sends

    def send(self, msg: Message, selector: SelectorLike | None = None, arg: Any = None, *,
             mq: MessageQueue | None = None, timeout_ms: float | None = None) -> SendResult:
        """Send ``msg`` synchronously and return the broker's answer.

        Without ``selector``/``mq`` the queue is chosen round robin; a failed attempt is retried
        ``retry_times_when_send_failed`` times (default 2) on another queue, avoiding the broker
        that failed, for remoting errors and broker codes 17, 14, 1, 16, 204, 205 (as Java). With
        ``selector`` (ordered send: ``selector(mqs, msg, arg)``) or an explicit ``mq`` there is
        one attempt only, so per-key order is never broken by a retry on another queue.

        Args:
            msg: the message (its ``UNIQ_KEY`` property is set if missing).
            selector: a ``MessageQueueSelector`` or callable for ordered sends.
            arg: the selector's argument (e.g. an order id).
            mq: send to this queue.
            timeout_ms: overall timeout in ms, retries included (default ``send_msg_timeout``).

        Returns:
            ``SendResult`` with status SEND_OK, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or
            SLAVE_NOT_AVAILABLE.

        Raises:
            IllegalArgumentError: illegal topic, empty or oversized body.
            ClientStateError: the producer is not running.
            TopicNotExistError: no route for the topic nor the default topic.
            MQBrokerError: the broker refused the message (``.code``).
            RemotingError: network failure or timeout (after the retries).
        """
        inst = self._running()
        cfg = self.config
        timeout = cfg.send_msg_timeout if timeout_ms is None else timeout_ms
        prepared = self._prepare(msg, fifo=selector is not None)
        if mq is not None:
            mq = self._wrap_mq(mq)
        retries = cfg.retry_times_when_send_failed
        if self._can_send_blocking(inst, prepared, selector):
            if prepared.span is None:
                return self._send_blocking(inst, prepared, mq, timeout, retries)
            return self._traced(prepared, self._send_blocking, inst, prepared, mq, timeout, retries)
        coro = self._send_core(prepared, msg, selector, arg, mq, timeout, retries)
        return self._run_traced(inst, prepared, coro, timeout)

    def _traced(self, p: _Prepared, fn: Callable[..., SendResult], *args: Any) -> SendResult:
        """Call ``fn(*args)`` ending ``p``'s publish span with its outcome."""
        try:
            result = fn(*args)
        except BaseException as exc:
            if p.span is not None:
                p.span.end(None, exc)
            raise
        if p.span is not None:
            p.span.end(result)
        return result

    def send_orderly(self, msg: Message, selector: SelectorLike, arg: Any, *,
                     timeout_ms: float | None = None) -> SendResult:
        """``send(msg, selector, arg)``: one attempt on the queue the selector picks."""
        return self.send(msg, selector, arg, timeout_ms=timeout_ms)

    def send_batch(self, msgs: Sequence[Message], *, mq: MessageQueue | None = None,
                   timeout_ms: float | None = None) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE (320) request, retried like
        :meth:`send`; the broker stores them contiguously in one queue.

        Returns:
            ``SendResult`` whose ``msg_id`` is the messages' ``UNIQ_KEY`` ids joined with commas
            and ``queue_offset`` the offset of the first message (as Java).

        Raises:
            IllegalArgumentError: an empty batch, mixed topics, a delayed message, a retry
                topic, or an encoded batch over ``max_message_size``.
            ClientStateError, TopicNotExistError, MQBrokerError, RemotingError: as :meth:`send`.
        """
        inst = self._running()
        timeout = self.config.send_msg_timeout if timeout_ms is None else timeout_ms
        prepared = self._prepare_batch(msgs)
        mq = self._wrap_mq(mq)
        if self._can_send_blocking(inst, prepared, None):
            return self._traced(prepared, self._send_blocking, inst, prepared, mq, timeout,
                                self.config.retry_times_when_send_failed)
        return self._run_traced(inst, prepared, self._send_prepared(prepared, mq, timeout), timeout)

    def _run_traced(self, inst: MQClientInstance, p: _Prepared, coro: Coroutine[Any, Any, T],
                    timeout_ms: float) -> T:
        """Run a send coroutine on the I/O loop, ending ``p``'s publish span with its outcome."""
        try:
            result = inst.run(coro, timeout_ms / 1000.0 + 1.0)
        except BaseException as exc:
            if p.span is not None:
                p.span.end(None, exc)
            raise
        if p.span is not None:
            p.span.end(result if isinstance(result, SendResult) else None)
        return result

    def send_async(self, msg: Message | Sequence[Message], callback: SendCallback | None = None,
                   selector: SelectorLike | None = None, arg: Any = None, *, mq: MessageQueue | None = None,
                   timeout_ms: float | None = None) -> concurrent.futures.Future[SendResult]:
        """Start sending ``msg`` and return at once; usable from any thread.

        Validation happens in the caller's thread (errors are raised here, not through the
        future); the network part runs on the client instance's I/O loop, so thousands of sends
        can be in flight on one connection per broker. Failed attempts are retried
        ``retry_times_when_send_async_failed`` times (default 2) on another queue, as :meth:`send`
        (one attempt with ``selector`` or ``mq``). A list of messages is sent as one batch.

        Args:
            msg: a message, or a list of messages of one topic (a batch).
            callback: ``callback(result, error)`` called once with the ``SendResult`` and None, or
                None and the exception; it runs on a small callback thread pool, never on the I/O
                thread, so it may block or send again. An exception it raises is logged.
            selector, arg, mq, timeout_ms: as :meth:`send`; the timeout covers the retries.

        Returns:
            a ``concurrent.futures.Future`` of the ``SendResult`` (``result(timeout)`` blocks;
            asyncio code can ``await asyncio.wrap_future(fut)`` or use :meth:`asend`).

        Raises:
            IllegalArgumentError: illegal message (before anything is sent).
            ClientStateError: the producer is not running (or was inherited through fork()).
            RemotingTimeoutError: ``async_send_max_in_flight`` sends are in flight and none
                finished within the timeout.
        """
        inst = self._running()
        timeout = self.config.send_msg_timeout if timeout_ms is None else timeout_ms
        if isinstance(msg, Message):
            prepared = self._prepare(msg, fifo=selector is not None)
        else:
            prepared = self._prepare_batch(msg)
            selector = None
        if mq is not None:
            mq = self._wrap_mq(mq)
        retries = self.config.retry_times_when_send_async_failed
        # never block the client's own I/O thread (asend awaited there): fail fast instead
        in_loop = inst.loop_thread.in_loop_thread
        if not self._inflight_slots.acquire(timeout=0 if in_loop else timeout / 1000.0):
            if prepared.span is not None:
                prepared.span.end(None, RemotingTimeoutError("producer", timeout, "send_async"))
            raise RemotingTimeoutError("producer", timeout, f"send_async ({self.config.async_send_max_in_flight} "
                                                            "sends in flight)")
        try:
            submitter = self._submitter(inst)
            fast = None if selector is not None or in_loop else self._async_send(inst, prepared, mq, timeout, retries)
            if fast is not None:  # route and broker address cached: no Task (async_send.py)
                submitter.start(fast)
                fut = fast.fut  # a SendFuture: frees the in-flight slot itself when done
            else:
                fut = submitter.submit(self._send_core(prepared, msg, selector, arg, mq, timeout, retries))
                fut.add_done_callback(self._inflight_slots.release)
        except BaseException as exc:
            self._inflight_slots.release()
            if prepared.span is not None:
                prepared.span.end(None, exc)
            raise
        if prepared.span is not None:
            span = prepared.span
            fut.add_done_callback(lambda f: span.end(None if f.cancelled() or f.exception() else f.result(),
                                                     None if f.cancelled() else f.exception()))
        if callback is not None:
            fut.add_done_callback(lambda f: self._callback_pool().submit(run_callback, callback, f))
        return fut

    def _async_send(self, inst: MQClientInstance, p: _Prepared, mq: MessageQueue | None, timeout: float,
                    retries: int) -> AsyncSend | None:
        """The Task-free first attempt when the queue and its broker's address are cached."""
        if mq is None:
            info = self._publish.get(p.topic)
            if info is None or not info.ok:
                return None
            queue = self._fault.select_one_queue(info, None)
        else:
            info, queue = None, mq
        addr = inst.find_broker_master(queue.broker_name)
        if addr is None:
            return None
        return AsyncSend(self, inst, p, info, queue, addr, timeout, retries)

    def _deadlines_on(self, loop: asyncio.AbstractEventLoop) -> DeadlineQueue:
        """The timeouts of this producer's Task-free async sends (loop thread)."""
        q = self._deadlines
        if q is None or q.loop is not loop:
            q = self._deadlines = DeadlineQueue(loop)
        return q

    def _submitter(self, inst: MQClientInstance) -> BatchedSubmitter:
        sub = self._batched
        if sub is None or sub.loop_thread is not inst.loop_thread:
            sub = self._batched = BatchedSubmitter(inst.loop_thread)
        return sub

    async def _send_core(self, prepared: _Prepared, msg: Any, selector: SelectorLike | None, arg: Any,
                         mq: MessageQueue | None, timeout: float, retries: int) -> SendResult:
        if selector is not None and mq is None:
            info = await self._find_publish_info(prepared.topic)
            mq = self._select(selector, info.queues, msg, arg)
        return await self._send_prepared(prepared, mq, timeout, retries)

    def _callback_pool(self) -> concurrent.futures.ThreadPoolExecutor:
        pool = self._callbacks
        if pool is None:
            with self._inflight_lock:
                if self._callbacks is None:
                    self._callbacks = concurrent.futures.ThreadPoolExecutor(
                        max_workers=4, thread_name_prefix=f"rocketmq-send-callback-{self.group}")
                pool = self._callbacks
        return pool

    async def asend(self, msg: Message | Sequence[Message], selector: SelectorLike | None = None, arg: Any = None,
                    *, mq: MessageQueue | None = None, timeout_ms: float | None = None) -> SendResult:
        """Send ``msg`` from asyncio code: ``result = await producer.asend(msg)``.

        Awaitable on any event loop (the application's own); the loop is never blocked: the
        send runs on the client's I/O loop and its future is bridged with
        ``asyncio.wrap_future``. Same arguments, retries and errors as :meth:`send_async`;
        cancelling the awaiting task does not recall a message already written.
        """
        return await asyncio.wrap_future(self.send_async(msg, None, selector, arg, mq=mq, timeout_ms=timeout_ms))

    def send_oneway(self, msg: Message, selector: SelectorLike | None = None, arg: Any = None, *,
                    mq: MessageQueue | None = None, timeout_ms: float | None = None) -> None:
        """Send ``msg`` with the ONEWAY flag: the broker stores it but sends no answer, so the
        outcome is unknown (Java ``sendOneway``). One attempt, no retry. When the topic's route
        and broker address are cached the write is handed to the I/O loop and the call returns at
        once (at most 65535 queued, as Java's ``semaphoreOneway``; a failed write is logged);
        otherwise (first send of a topic) it returns once the request is written.

        Args:
            msg, selector, arg, mq: as :meth:`send`.
            timeout_ms: how long to wait for the route and the socket write, ms
                (default ``send_msg_timeout``).

        Raises:
            IllegalArgumentError, ClientStateError, TopicNotExistError: as :meth:`send`.
            RemotingError: cannot connect or write.
        """
        inst = self._running()
        timeout = self.config.send_msg_timeout if timeout_ms is None else timeout_ms
        prepared = self._prepare(msg, fifo=selector is not None, oneway=True)
        mq = self._wrap_mq(mq)
        target = self._cached_target(inst, prepared, msg, selector, arg, mq)
        if target is None or inst.loop_thread.in_loop_thread:  # first send of the topic: wait for the route
            self._run_traced(inst, prepared, self._send_oneway_core(prepared, msg, selector, arg, mq, timeout),
                             timeout)
            return
        # fast path (Java's semaphoreOneway): hand the write to the I/O loop and return at once
        if not self._inflight_slots.enter(timeout / 1000.0):
            raise RemotingTimeoutError("producer", timeout, "send_oneway (too many oneway sends queued)")
        mq, addr = target
        try:
            self._submitter(inst).start(OnewaySend(
                inst, addr, self._request_for(prepared, mq, inst.remoting.rpc_hooks, oneway=True), timeout,
                lambda error: self._oneway_done(prepared, mq, error)))
        except BaseException as exc:
            self._oneway_done(prepared, None, exc)
            raise

    def _cached_target(self, inst: MQClientInstance, p: _Prepared, msg: Message, selector: SelectorLike | None,
                       arg: Any, mq: MessageQueue | None) -> tuple[MessageQueue, str] | None:
        """Queue and master address from the caches alone, or None (a route lookup is needed)."""
        if mq is None:
            info = self._publish.get(p.topic)
            if info is None or not info.ok:
                return None
            mq = self._select(selector, info.queues, msg, arg) if selector is not None \
                else self._fault.select_one_queue(info, None)
        addr = inst.find_broker_master(mq.broker_name)
        return None if addr is None else (mq, addr)

    def _oneway_done(self, p: _Prepared, mq: MessageQueue | None, error: BaseException | None) -> None:
        self._inflight_slots.leave()
        if error is not None:
            log.warning("oneway send of %s to %s failed: %s", p.uniq_id, mq, error)
        if p.span is not None:
            p.span.end(None, error)

    @staticmethod
    def _ext_for(p: _Prepared, mq: MessageQueue) -> dict[str, str]:
        ext = dict(p.ext)
        ext["e"] = str(mq.queue_id)
        ext["n"] = mq.broker_name
        return ext

    async def _send_oneway_core(self, p: _Prepared, msg: Message, selector: SelectorLike | None, arg: Any,
                                mq: MessageQueue | None, timeout: float) -> None:
        if mq is None:
            info = await self._find_publish_info(p.topic)
            mq = self._select(selector, info.queues, msg, arg) if selector is not None \
                else self._fault.select_one_queue(info, None)
        inst = self._inst()
        addr = await self._master_addr(inst, mq, p.topic)
        await inst.api.send_message_oneway(addr, self._ext_for(p, mq), p.body, code=p.code, timeout_ms=timeout)

    def wait_for_in_flight(self, timeout_s: float) -> bool:
        """Wait until no ``send_async`` is in flight; False if some still are after ``timeout_s``."""
        return self._idle.wait(timeout_s)

    @property
    def instance(self) -> MQClientInstance:
        """The client instance (raises ClientStateError when not running)."""
        return self._running()

    # -------------------------------------------------------------- preparation (caller thread)

    @staticmethod
    def _select(selector: SelectorLike, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        mq = selector(mqs, msg, arg)
        if not isinstance(mq, MessageQueue):
            raise IllegalArgumentError(f"selector returned {mq!r}, not a MessageQueue")
        return mq

    def _check_message(self, msg: Message) -> str:
        """Java ``Validators.checkMessage``; sets ``UNIQ_KEY`` if missing and returns it."""
        if not isinstance(msg, Message):
            raise IllegalArgumentError(f"expected a Message, got {type(msg).__name__}")
        topic = msg.topic
        if topic not in self._topics_ok:
            check_name(topic, "topic")
            if is_not_allowed_send_topic(topic):
                raise IllegalArgumentError(f"sending a message to topic {topic} is forbidden")
            if len(self._topics_ok) < 10_000:
                self._topics_ok.add(topic)
        body = msg.body
        if not body:
            raise IllegalArgumentError("the message body is empty")
        if len(body) > self.config.max_message_size:
            raise IllegalArgumentError(
                f"the message body size {len(body)} exceeds max_message_size {self.config.max_message_size}")
        props = msg.properties
        uniq_id = props.get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if not uniq_id:
            uniq_id = props[MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = create_uniq_id()
        return uniq_id

    def _header(self, topic: str, sys_flag: int, flag: int, properties: str, batch: bool) -> dict[str, str]:
        cfg = self.config
        return {"a": self.group, "b": topic, "c": cfg.create_topic_key, "d": str(cfg.default_topic_queue_nums),
                "e": "0", "f": str(sys_flag) if sys_flag else "0", "g": str(int(time.time() * 1000)),
                "h": str(flag) if flag else "0", "i": properties, "j": "0", "k": "false",
                "m": "true" if batch else "false"}

    def _prepare(self, msg: Message, *, fifo: bool = False, oneway: bool = False) -> _Prepared:
        """Validate, start the publish span (its context goes into the properties), and build
        the V2 header and the (possibly compressed) body."""
        cfg = self.config
        uniq_id = self._check_message(msg)
        topic, body, props = msg.topic, msg.body, msg.properties
        if cfg.namespace:
            topic = wrap_namespace(cfg.namespace, topic)
        span = self._start_span(msg, topic, fifo, oneway)
        sys_flag = 0
        if len(body) >= cfg.compress_msg_body_over_howmuch:
            body = deflate.compress(body, cfg.compress_level)
            sys_flag |= SF.COMPRESSED
        if span is not None and self._msg_trace is not None:
            span.body_length = len(body)  # type: ignore[union-attr]
        if props.get(MC.TRANSACTION_PREPARED) == "true":
            sys_flag |= SF.TRANSACTION_PREPARED_TYPE
        code = RequestCode.SEND_REPLY_MESSAGE_V2 if props.get(MC.MESSAGE_TYPE) == REPLY_MESSAGE_FLAG \
            else RequestCode.SEND_MESSAGE_V2  # a reply (request-reply), as Java
        flag = msg.flag
        if type(flag) is int and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            head = self._template(topic, code, False)
            if head is not None:  # the header's f, g, h, i fields; the rest is in the template
                return _Prepared(topic, None, body, uniq_id, code, span, head, (
                    str(sys_flag) if sys_flag else "0", str(int(time.time() * 1000)),
                    str(flag) if flag else "0", encode_properties(props)))
        ext = self._header(topic, sys_flag, flag, encode_properties(props), False)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # is_retry_topic
            ext["j"] = props.get(MC.RECONSUME_TIME, "0")
            max_times = props.get(MC.MAX_RECONSUME_TIMES)
            if max_times:
                ext["l"] = max_times
        return _Prepared(topic, ext, body, uniq_id, code, span)

    def _template(self, topic: str, code: int, batch: bool) -> SendHeaderTemplate | None:
        """The header template of ``topic`` (None if it cannot have one: ``send_request.py``)."""
        cfg = self.config
        key = (topic, code, batch, cfg.create_topic_key, cfg.default_topic_queue_nums)
        head = self._templates.get(key)
        if head is None:
            if len(self._templates) >= 1024:
                self._templates.clear()
            head = self._templates[key] = SendHeaderTemplate(code, self.group, topic, cfg.create_topic_key,
                                                             str(cfg.default_topic_queue_nums), batch)
        return head if head.pieces is not None else None

    def _request_for(self, p: _Prepared, mq: MessageQueue, hooks: Sequence[Any],
                     oneway: bool = False) -> RemotingCommand:
        """The send request of ``p`` to ``mq``: rendered from the topic's header template when
        there are no RPC hooks (they need the fields), else a plain command of ``_ext_for``."""
        head = p.head
        if head is not None and not hooks and type(mq.queue_id) is int:
            f, g, h, i = p.vals  # type: ignore[misc]
            return send_request(head, (str(mq.queue_id), f, g, h, i, mq.broker_name), p.body, oneway)
        return RemotingCommand.request(p.code, self._ext_for(p, mq), p.body, oneway)

    def _start_span(self, msgs: Message | Sequence[Message], topic: str, fifo: bool = False,
                    oneway: bool = False) -> PublishSpan | PubTraceSpan | None:
        if self._msg_trace is not None and not oneway:  # oneway sends get no Pub record (Java)
            inst = self._instance
            ns = self.config.namespace
            return PubTraceSpan(self._msg_trace, self._start_otel_span(msgs, topic, fifo, oneway), msgs,
                                unwrap_namespace(ns, self.group), unwrap_namespace(ns, topic),
                                lambda name: inst.find_broker_master(name) if inst else None)
        return self._start_otel_span(msgs, topic, fifo, oneway)

    def _start_otel_span(self, msgs: Message | Sequence[Message], topic: str, fifo: bool,
                         oneway: bool) -> PublishSpan | None:
        if publish_span_is_no_op():  # no span: skip the arguments and a second check
            return None
        inst = self._instance
        return start_publish_span(msgs, topic, self.group, client_id=inst.client_id if inst else None,
                                  namespace=self.config.namespace, fifo=fifo, oneway=oneway)

    def _prepare_batch(self, msgs: Sequence[Message]) -> _Prepared:
        """Java ``MessageBatch.generateFromList`` + checks: one topic, no delay, no retry topic,
        one ``WAIT`` value; each message gets its ``UNIQ_KEY``; the batch is never compressed."""
        msgs = list(msgs)
        if not msgs:
            raise IllegalArgumentError("the batch is empty")
        first = msgs[0]
        ids = []
        check = self._check_message
        check(first)  # a non-Message is refused before its attributes are read
        topic0, wait0 = first.topic, first.wait_store_msg_ok
        retry = is_retry_topic(topic0)  # the same for every message of the batch
        for m in msgs:  # checks in Java's order, per message (the first offending one is reported)
            ids.append(check(m))
            if m.topic != topic0:
                raise IllegalArgumentError("the topic of the messages in one batch should be the same")
            props = m.properties
            delay = props.get(MC.DELAY_TIME_LEVEL)
            if delay and int(delay) > 0:
                raise IllegalArgumentError("delayed messages are not supported in batches")
            if retry:
                raise IllegalArgumentError("retry group topics are not supported in batches")
            if (props.get(MC.WAIT_STORE_MSG_OK, "true") != "false") != wait0:
                raise IllegalArgumentError("the waitStoreMsgOK of the messages in one batch should be the same")
        topic = self._wrap(first.topic)
        span = self._start_span(msgs, topic)
        body = encode_batch(msgs)
        if span is not None and self._msg_trace is not None:
            span.body_length = len(body)  # type: ignore[union-attr]
        if len(body) > self.config.max_message_size:
            if span is not None:
                span.end(None, IllegalArgumentError("batch too large"))
            raise IllegalArgumentError(
                f"the batch body size {len(body)} exceeds max_message_size {self.config.max_message_size}")
        props = encode_properties({MC.WAIT_STORE_MSG_OK: "true" if first.wait_store_msg_ok else "false"})
        code = RequestCode.SEND_BATCH_MESSAGE
        head = self._template(topic, code, True)
        if head is not None:
            return _Prepared(topic, None, body, ",".join(ids), code, span, head,
                             ("0", str(int(time.time() * 1000)), "0", props))
        return _Prepared(topic, self._header(topic, 0, 0, props, True), body, ",".join(ids), code, span)

    # -------------------------------------------------------------- core (event loop)

    async def _find_publish_info(self, topic: str) -> TopicPublishInfo:
        """Cached publish info, else the topic's route, else the default topic's (TBW102).

        Raises:
            TopicNotExistError: neither route exists.
        """
        info = self._publish.get(topic)
        if info is not None and info.ok:
            return info
        inst = self._inst()
        self._publish.setdefault(topic, TopicPublishInfo(topic, []))
        await inst.update_topic_route(topic)
        info = self._publish[topic]
        if not info.ok:
            await inst.update_topic_route(topic, default_topic=self.config.create_topic_key,
                                          default_queue_nums=self.config.default_topic_queue_nums)
            info = self._publish[topic]
        if not info.ok:
            raise TopicNotExistError(ResponseCode.TOPIC_NOT_EXIST, topic_missing_remark(topic, inst.api.namesrv.addrs))
        return info

    async def _send_prepared(self, p: _Prepared, mq: MessageQueue | None, timeout_ms: float,
                             retries: int | None = None) -> SendResult:
        """Send ``p`` to ``mq``, or to queues chosen by the fault strategy with ``retries`` extra
        attempts (default ``retry_times_when_send_failed``) on retryable errors and, with
        ``retry_another_broker_when_not_store_ok``, on a status other than SEND_OK."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        if mq is not None:
            return await self._send_to(mq, p, deadline, timeout_ms)
        info = await self._find_publish_info(p.topic)
        if retries is None:
            retries = self.config.retry_times_when_send_failed
        last: list[str | None] = [None]
        attempt = self._attempt_fn(p, info, deadline, timeout_ms, last)
        try:  # fast path: the first attempt without building a retry controller
            result = await attempt()
        except Exception as exc:
            if retries <= 0 or not _retryable(exc):
                raise
        else:
            if retries <= 0 or not self._retry_result(result):
                return result
        return await AsyncRetrying(**self._retry_policy(retries))(attempt)

    def _attempt_fn(self, p: _Prepared, info: TopicPublishInfo, deadline: float, timeout_ms: float,
                    last: list[str | None]) -> Callable[[], Coroutine[Any, Any, SendResult]]:
        """One attempt of :meth:`_send_prepared`: a queue avoiding ``last[0]``, fault bookkeeping."""

        async def attempt() -> SendResult:
            queue = self._fault.select_one_queue(info, last[0])
            started = time.monotonic()
            try:
                result = await self._send_to(queue, p, deadline, timeout_ms)
            except Exception as exc:
                self._attempt_done(p, queue, started, last, exc=exc)
                raise
            return self._attempt_done(p, queue, started, last, result=result)

        return attempt

    async def _retry_attempts(self, p: _Prepared, info: TopicPublishInfo, deadline: float, timeout_ms: float,
                              retries: int, last: list[str | None]) -> SendResult:
        """The ``retries`` attempts of :meth:`_send_prepared` after a failed first one
        (``AsyncSend``); ``last[0]`` is the broker to avoid."""
        attempt = self._attempt_fn(p, info, deadline, timeout_ms, last)
        return await AsyncRetrying(**self._retry_policy(retries))(attempt)

    def _attempt_done(self, p: _Prepared, queue: MessageQueue, started: float, last: list[str | None], *,
                      result: SendResult | None = None, exc: Exception | None = None) -> SendResult:
        """Fault-strategy bookkeeping after one attempt; remembers the broker to avoid next."""
        failed = exc is not None
        self._fault.update_fault_item(queue.broker_name, (time.monotonic() - started) * 1000.0, failed)
        if failed:
            log.debug("send of %s to %s failed (%s)", p.uniq_id, queue, exc)
        if failed or (result is not None and result.send_status is not SendStatus.SEND_OK):
            last[0] = queue.broker_name
        return result  # type: ignore[return-value]

    def _retry_policy(self, retries: int) -> dict[str, Any]:
        """tenacity arguments of the attempts after the first: ``retries`` more, no wait, on
        retryable errors and (``retry_another_broker_when_not_store_ok``) non-OK results; the
        last outcome is returned or raised."""
        return {"stop": stop_after_attempt(retries), "wait": wait_none(),
                "retry": retry_if_exception(_retryable) | retry_if_result(self._retry_result),
                "retry_error_callback": lambda state: state.outcome.result()}

    def _retry_result(self, result: SendResult) -> bool:
        return self.config.retry_another_broker_when_not_store_ok and result.send_status is not SendStatus.SEND_OK

    # -------------------------------------------------------------- sync sends in the caller thread

    def _send_blocking(self, inst: MQClientInstance, p: _Prepared, mq: MessageQueue | None, timeout_ms: float,
                       retries: int) -> SendResult:
        """:meth:`_send_prepared` in the calling thread over its own connection (no I/O-thread
        hop; ``benchmarks/PROFILE.md`` P1). The caller checked that the route is cached."""
        started = time.monotonic()
        deadline = started + timeout_ms / 1000.0
        if mq is not None:
            return self._send_to_blocking(inst, mq, p, deadline, timeout_ms)
        info = self._publish[p.topic]
        last: list[str | None] = [None]
        # the first attempt inline (no closure); the others through the retry policy
        queue = self._fault.select_one_queue(info, None)
        try:
            result = self._send_to_blocking(inst, queue, p, deadline, timeout_ms)
        except Exception as exc:
            self._attempt_done(p, queue, started, last, exc=exc)
            if retries <= 0 or not _retryable(exc):
                raise
        else:
            if result.send_status is SendStatus.SEND_OK and not self._fault.enabled:
                return result  # nothing to record (what _attempt_done does for this case)
            self._attempt_done(p, queue, started, last, result=result)
            if result.send_status is SendStatus.SEND_OK or retries <= 0 or not self._retry_result(result):
                return result

        def attempt() -> SendResult:
            queue = self._fault.select_one_queue(info, last[0])
            started = time.monotonic()
            try:
                result = self._send_to_blocking(inst, queue, p, deadline, timeout_ms)
            except Exception as exc:
                self._attempt_done(p, queue, started, last, exc=exc)
                raise
            return self._attempt_done(p, queue, started, last, result=result)

        return Retrying(**self._retry_policy(retries))(attempt)

    def _send_to_blocking(self, inst: MQClientInstance, mq: MessageQueue, p: _Prepared, deadline: float,
                          timeout_ms: float) -> SendResult:
        remaining = (deadline - time.monotonic()) * 1000.0
        if remaining <= 0:
            raise RemotingTimeoutError(mq.broker_name, timeout_ms, "send")
        addr = inst.find_broker_master(mq.broker_name)
        if addr is None:
            raise MQBrokerError(ResponseCode.SERVICE_NOT_AVAILABLE, f"no master address for broker {mq.broker_name}")
        conns = inst.blocking
        result = inst.api.send_request_blocking(conns, addr, mq, self._request_for(p, mq, conns.rpc_hooks),
                                                p.uniq_id, remaining)
        return self._unwrap_result(result) if self.config.namespace else result

    def _can_send_blocking(self, inst: MQClientInstance, p: _Prepared, selector: SelectorLike | None) -> bool:
        if not self.config.sync_send_in_caller_thread or selector is not None or inst.loop_thread.in_loop_thread:
            return False
        info = self._publish.get(p.topic)
        return info is not None and info.ok

    async def _send_to(self, mq: MessageQueue, p: _Prepared, deadline: float, timeout_ms: float) -> SendResult:
        remaining = (deadline - time.monotonic()) * 1000.0
        if remaining <= 0:
            raise RemotingTimeoutError(mq.broker_name, timeout_ms, "send")
        inst = self._inst()
        addr = await self._master_addr(inst, mq, p.topic)
        ext = dict(p.ext)
        ext["e"] = str(mq.queue_id)
        ext["n"] = mq.broker_name
        result = await inst.api.send_message(addr, mq, ext, p.body, p.uniq_id, remaining, code=p.code)
        return self._unwrap_result(result)

    def _unwrap_result(self, result: SendResult) -> SendResult:
        if self.config.namespace:
            q = result.message_queue
            result.message_queue = MessageQueue(unwrap_namespace(self.config.namespace, q.topic), q.broker_name,
                                                q.queue_id)
        return result

    def _wrap(self, topic: str) -> str:
        return wrap_namespace(self.config.namespace, topic)

    def _wrap_mq(self, mq: MessageQueue | None) -> MessageQueue | None:
        if mq is None or not self.config.namespace:
            return mq
        return MessageQueue(self._wrap(mq.topic), mq.broker_name, mq.queue_id)

    @staticmethod
    async def _master_addr(inst: MQClientInstance, mq: MessageQueue, topic: str) -> str:
        addr = inst.find_broker_master(mq.broker_name)
        if addr is None:
            addr = await inst.find_broker_master_or_refresh(mq.broker_name, topic)
            if addr is None:
                raise MQBrokerError(ResponseCode.SERVICE_NOT_AVAILABLE,
                                    f"no master address for broker {mq.broker_name}")
        return addr

    # -------------------------------------------------------------- misc

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of ``topic`` (route lookup with the TBW102 fallback).

        Raises:
            ClientStateError, TopicNotExistError, RemotingError.
        """
        inst = self._running()
        info = inst.run(self._find_publish_info(self._wrap(topic)), self.config.mq_client_api_timeout / 1000.0)
        return list(info.queues)

    def __repr__(self) -> str:
        return f"Producer(group={self.group!r}, state={self._state})"
