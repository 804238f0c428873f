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

from ..aio import AsyncLifecycle
from ..client.instance import MQClientInstance, get_client_instance, release_client_instance
from ..client.route import TopicPublishInfo
from ..config import ProducerConfig, grpc_twin_wanted
from ..config_types import ProducerSettings
from ..exceptions import (
    ClientStateError,
    IllegalArgumentError,
    MQBrokerError,
    RemotingTimeoutError,
    TopicNotExistError,
    topic_missing_remark,
)
from ..lifecycle import Lifecycle
from ..protocol.codes import GROUP_MAX_LENGTH, ResponseCode, check_name
from ..protocol.headers import CheckTransactionStateRequestHeader
from ..protocol.message import Message, MessageExt, MessageQueue, SendResult
from ..retry import RetryPolicy
from ..trace.dispatcher import TraceDispatcher, set_trace_producer_factory, start_or_none
from ..trace.hooks import PubTraceSpan
from ..trace.otel import PublishSpan, publish_span_is_no_op, start_publish_span
from .async_send import AsyncSend, AsyncSendContext, InFlight, OnewaySend
from .batch import EncodedBatch
from .callbacks import run_callback
from .dispatch import RETRY_RESPONSE_CODES, SendDispatcher
from .fault import MQFaultStrategy
from .namespace import unwrap_namespace, unwrap_result, wrap_namespace
from .prepare import MessagePreparer, Prepared
from .recall import check_recall, recall_message
from .request import RequestReplyMixin, receive_reply_message
from .selector import SelectorLike
from .submit import BatchedSubmitter
from .timer_support import cached_timer_support, timer_support

__all__ = ["Producer", "RETRY_RESPONSE_CODES", "SendCallback"]

log = logging.getLogger("rocketmq_sdk.producer")

T = TypeVar("T")

_monotonic = time.monotonic

#: Oneway sends handed to the I/O loop and not yet written (Java ``semaphoreOneway``: 65535).
ONEWAY_MAX_QUEUED = 65535

#: ``callback(result, error)`` of :meth:`Producer.send_async`: exactly one of them is None.
SendCallback = Callable[[SendResult | None, BaseException | None], Any]


_FORKS = [0]  # fork() calls this process descends through (after_in_child)


def _count_fork() -> None:
    _FORKS[0] += 1


os.register_at_fork(after_in_child=_count_fork)


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
        protocol: ``"remoting"`` (default) or ``"grpc"``: RocketMQ 5's gRPC API to a 5.x proxy
            given as ``endpoints="host:port"`` (a ``grpc://host:port`` address selects it too);
            the object is then a :class:`~rocketmq_sdk.producer.grpc_producer.GrpcProducer`
            (needs the ``grpc`` extra; differences in docs/grpc.md).

    Raises:
        IllegalArgumentError: illegal group name, unknown setting or protocol.

    Use as a context manager or call ``start()`` / ``shutdown()``.

    A send goes through the send pipeline (docs/architecture.md): the message is prepared in the
    caller's thread (``prepare.py``), the dispatcher picks each attempt's queue and decides the
    retries (``dispatch.py``), and one of three transports carries the attempts: this class's
    blocking one (``send`` in the caller's thread) or asyncio one (on the client's I/O loop), or
    the callback-driven first attempt of ``send_async`` (``async_send.py``).
    """

    def __new__(cls, group: str = "", namesrv_addr: str | None = None, *args: Any, protocol: str = "remoting",
                **kwargs: Any) -> Any:
        # protocol="grpc" (or a grpc:// address) makes a GrpcProducer: RocketMQ 5's gRPC API
        if grpc_twin_wanted(cls, Producer, protocol, namesrv_addr, ", or GrpcTransactionProducer "
                            "(rocketmq_sdk.producer.grpc_transaction) for transactions"):
            from .grpc_producer import GrpcProducer
            return GrpcProducer(group, namesrv_addr, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, group: str, namesrv_addr: str | None = None, *, enable_msg_trace: bool = False,
                 customized_trace_topic: str | None = None, protocol: str = "remoting",
                 **config: Unpack[ProducerSettings]) -> None:
        self.group = check_name(group, "producer group", GROUP_MAX_LENGTH)
        self.config = ProducerConfig.from_kwargs(namesrv_addr=namesrv_addr, **config)
        self._msg_trace = TraceDispatcher(group, "PRODUCE", customized_trace_topic, self.config) \
            if enable_msg_trace else None
        self.group = wrap_namespace(self.config.namespace, self.group)
        self._instance: MQClientInstance | None = None  # from start() until shutdown() is done
        self._accepting: MQClientInstance | None = None  # the instance while RUNNING (new sends)
        self._lifecycle = Lifecycle(f"producer {self.group}")
        self._pid = os.getpid()
        self._forks = _FORKS[0]  # fork() count of this process at start (cheaper than getpid per send)
        cfg = self.config
        self._preparer = MessagePreparer(self.group, cfg)
        # without message tracing (fixed here) a send's span is OpenTelemetry's alone: one call less per send
        self._preparer.start_span = self._start_span if self._msg_trace is not None else self._start_otel_span
        self._dispatcher = SendDispatcher(cfg)
        self._dispatcher.refresh_route = self._refresh_route_blocking
        self._dispatcher.arefresh_route = self._refresh_route
        # unfinished send_async calls (bounded) and queued oneway sends; idle when none
        self._inflight_slots = InFlight(cfg.async_send_max_in_flight, ONEWAY_MAX_QUEUED)
        self._idle = self._inflight_slots.idle
        self._async_ctx = AsyncSendContext(self._dispatcher, self._inflight_slots, cfg.namespace, self._send_prepared)
        self._inflight_lock = threading.Lock()
        self._callbacks: concurrent.futures.ThreadPoolExecutor | None = None
        self._batched: BatchedSubmitter | None = None

    # -------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Register with the client instance and start it.

        Raises:
            ClientStateError: already started or shut down; the group is already used by another
                producer of the same client instance.
        """
        with self._lifecycle.starting():
            self.config.check_name_server()
            inst = get_client_instance(self.config)
            inst.register_producer(self)
            inst.set_reply_processor(receive_reply_message)
            try:
                inst.run(inst.start(), self.config.mq_client_api_timeout / 1000.0)
            except BaseException:
                inst.unregister_producer(self.group)
                release_client_instance(inst)
                raise
            self._instance = self._accepting = inst
            self._pid = os.getpid()
            self._forks = _FORKS[0]
        inst.loop_thread.call_soon(inst.spawn_background, inst.announce_producer(self.config.create_topic_key))
        self._msg_trace = start_or_none(self._msg_trace)
        log.info("producer %s started (client %s)", self.group, inst.client_id)

    def shutdown(self) -> None:
        """Wait up to ``shutdown_timeout`` ms for in-flight async sends, unregister from the
        brokers and release the client instance. Idempotent."""
        lifecycle = self._lifecycle
        with lifecycle.lock:  # not during a start() in another thread
            inst = self._instance
            self._accepting = None  # refuses new sends; in-flight ones finish
            began = lifecycle.begin_shutdown()
        if not began or os.getpid() != self._pid:
            # never started, already shut down, or inherited through fork(): the I/O thread
            # and connections belong to the parent, so there is nothing to close here
            lifecycle.shutdown_done()
            self._instance = None
            return
        assert inst is not None
        if not self._idle.wait(self.config.shutdown_timeout / 1000.0):
            log.warning("producer %s: %d async sends still in flight after %d ms; shutting down anyway",
                        self.group, self._inflight_slots.total, self.config.shutdown_timeout)
        with lifecycle.lock:
            lifecycle.shutdown_done()
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
            inst.unregister_producer(self.group)
        release_client_instance(inst)
        log.info("producer %s shut down", self.group)

    def _running(self) -> MQClientInstance:
        if _FORKS[0] != self._forks and os.getpid() != self._pid:
            raise ClientStateError(
                f"producer {self.group} was started in process {self._pid} and cannot be used after fork() "
                f"(this is process {os.getpid()}); create and start a new Producer in the child, e.g. in a "
                "post-fork hook (gunicorn post_fork, Celery worker_process_init)")
        inst = self._accepting  # None unless RUNNING: one attribute read per send
        if inst is None:
            self._lifecycle.check_running()
            raise ClientStateError(f"producer {self.group} is shut down")
        return inst

    def _inst(self) -> MQClientInstance:
        """The instance for work already accepted (in-flight sends finish during shutdown)."""
        inst = self._instance
        if inst is None:
            raise ClientStateError(f"producer {self.group} is shut down")
        return inst

    # -------------------------------------------------------------- ProducerInner (instance side)

    def publish_topic_list(self) -> list[str]:
        return list(self._dispatcher.publish)

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        self._dispatcher.update_route(topic, info)

    def check_transaction_state(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        """CHECK_TRANSACTION_STATE from ``addr``: a plain producer has no transaction listener,
        so the check is logged and ignored (Java ``checkTransactionState``); see
        ``TransactionProducer``."""
        log.warning("transaction check of %s from %s ignored: producer %s has no transaction listener",
                    header.msg_id, addr, self.group)

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
            MQBrokerError: the broker refused the message (``.code``); also SERVICE_NOT_AVAILABLE
                (14) when the topic exists but none of its brokers has a master right now (a
                DLedger election, a master restarting): retriable.
            RemotingError: network failure or timeout (after the retries).
        """
        inst = self._running()
        cfg = self.config
        timeout = cfg.send_msg_timeout if timeout_ms is None else timeout_ms
        prepared = self._preparer.prepare(msg, selector is not None)
        if mq is not None:
            mq = self._wrap_mq(mq)
        info = self._blocking_route(inst, prepared, selector)
        if info is not None:
            if prepared.span is None and mq is None:  # _send_blocking, one call less per send
                dispatcher = self._dispatcher
                return dispatcher.send_blocking(info, dispatcher.policy, self._send_to_blocking, prepared,
                                                _monotonic() + timeout / 1000.0, timeout)
            return self._traced(prepared, self._send_blocking, info, prepared, mq, timeout)
        coro = self._send_core(prepared, msg, selector, arg, mq, timeout, self._dispatcher.policy)
        return self._run_traced(inst, prepared, coro, timeout)

    def _traced(self, p: Prepared, fn: Callable[..., SendResult], *args: Any) -> SendResult:
        """Call ``fn(*args)`` ending ``p``'s publish span with its outcome."""
        try:
            result = fn(*args)
        except BaseException as exc:
            p.end_span(None, exc)
            raise
        p.end_span(result)
        return result

    def send_orderly(self, msg: Message, selector: SelectorLike, arg: Any, *,
                     timeout_ms: float | None = None) -> SendResult:
        """``send(msg, selector, arg)``: one attempt on the queue the selector picks."""
        return self.send(msg, selector, arg, timeout_ms=timeout_ms)

    def send_batch(self, msgs: Sequence[Message] | EncodedBatch, *, mq: MessageQueue | None = None,
                   timeout_ms: float | None = None) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE (320) request, retried like
        :meth:`send`; the broker stores them contiguously in one queue. ``msgs`` may be an
        :class:`~rocketmq_sdk.producer.EncodedBatch` (its body sent as it is).

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
        info = self._blocking_route(inst, prepared, None)
        if info is not None:
            return self._traced(prepared, self._send_blocking, info, prepared, mq, timeout)
        return self._run_traced(inst, prepared, self._send_prepared(prepared, mq, timeout), timeout)

    def _run_traced(self, inst: MQClientInstance, p: Prepared, coro: Coroutine[Any, Any, T],
                    timeout_ms: float) -> T:
        """Run a send coroutine on the I/O loop, ending ``p``'s publish span with its outcome."""
        try:
            result = inst.run(coro, timeout_ms / 1000.0 + 1.0)
        except BaseException as exc:
            p.end_span(None, exc)
            raise
        p.end_span(result if isinstance(result, SendResult) else None)
        return result

    def send_async(self, msg: Message | Sequence[Message] | EncodedBatch, callback: SendCallback | None = None,
                   selector: SelectorLike | None = None, arg: Any = None, *, mq: MessageQueue | None = None,
                   timeout_ms: float | None = None) -> concurrent.futures.Future[SendResult]:
        """Start sending ``msg`` and return at once; usable from any thread.

        Validation happens in the caller's thread (errors are raised here, not through the
        future); the network part runs on the client instance's I/O loop, so thousands of sends
        can be in flight on one connection per broker. Failed attempts are retried
        ``retry_times_when_send_async_failed`` times (default 2) on another queue, as :meth:`send`
        (one attempt with ``selector`` or ``mq``). A list of messages is sent as one batch.

        Args:
            msg: a message, or a list of messages of one topic (a batch), or an
                :class:`~rocketmq_sdk.producer.EncodedBatch`.
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
            prepared = self._preparer.prepare(msg, selector is not None)
        else:
            prepared = self._prepare_batch(msg)
            selector = None
        if mq is not None:
            mq = self._wrap_mq(mq)
        policy = self._dispatcher.async_policy
        # never block the client's own I/O thread (asend awaited there): fail fast instead
        in_loop = inst.loop_thread.in_loop_thread
        if not self._inflight_slots.acquire(timeout=0 if in_loop else timeout / 1000.0):
            prepared.end_span(None, RemotingTimeoutError("producer", timeout, "send_async"))
            raise RemotingTimeoutError("producer", timeout, f"send_async ({self.config.async_send_max_in_flight} "
                                                            "sends in flight)")
        try:
            submitter = self._submitter(inst)
            fast = None if selector is not None or in_loop else self._async_send(inst, prepared, mq, timeout, policy)
            fut: concurrent.futures.Future[SendResult]
            if fast is not None:  # route and broker address cached: no Task (async_send.py)
                submitter.start(fast)
                fut = fast.fut  # a SendFuture: frees the in-flight slot itself when done
            else:
                fut = submitter.submit(self._send_core(prepared, msg, selector, arg, mq, timeout, policy))
                fut.add_done_callback(self._inflight_slots.release)
        except BaseException as exc:
            self._inflight_slots.release()
            prepared.end_span(None, exc)
            raise
        if prepared.span is not None:
            span = prepared.span
            fut.add_done_callback(lambda f: span.end(None if f.cancelled() or f.exception() else f.result(),
                                                     None if f.cancelled() else f.exception()))
        if callback is not None:
            fut.add_done_callback(lambda f: self._callback_pool().submit(run_callback, callback, f))
        return fut

    def _async_send(self, inst: MQClientInstance, p: Prepared, mq: MessageQueue | None, timeout: float,
                    policy: RetryPolicy) -> AsyncSend | None:
        """The callback transport's first attempt when the queue and its broker's address are cached."""
        if mq is None:  # the cached route and the fault strategy's queue, read inline (per send)
            dispatcher = self._dispatcher
            info = dispatcher.publish.get(p.topic)
            if info is None or not info.ok:
                return None
            queue = dispatcher.fault.select_one_queue(info, None)
        else:
            info, queue = None, mq
        addr = inst.find_broker_master(queue.broker_name)
        if addr is None:
            return None
        return AsyncSend(self._async_ctx, inst, p, info, queue, addr, timeout, policy)

    def _submitter(self, inst: MQClientInstance) -> BatchedSubmitter:
        sub = self._batched
        if sub is None or sub.loop_thread is not inst.loop_thread:
            sub = self._batched = BatchedSubmitter(inst.loop_thread)
        return sub

    async def _send_core(self, prepared: Prepared, msg: Any, selector: SelectorLike | None, arg: Any,
                         mq: MessageQueue | None, timeout: float, policy: RetryPolicy) -> SendResult:
        if selector is not None and mq is None:
            info = await self._find_publish_info(prepared.topic)
            mq = self._select(selector, info.queues, msg, arg)
        return await self._send_prepared(prepared, mq, timeout, policy)

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
        prepared = self._preparer.prepare(msg, selector is not None, True)
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
                inst, addr, prepared.request_for(mq, inst.remoting.rpc_hooks, True), timeout,
                lambda error: self._oneway_done(prepared, mq, error)))
        except BaseException as exc:
            self._oneway_done(prepared, None, exc)
            raise

    def _cached_target(self, inst: MQClientInstance, p: Prepared, msg: Message, selector: SelectorLike | None,
                       arg: Any, mq: MessageQueue | None) -> tuple[MessageQueue, str] | None:
        """Queue and master address from the caches alone, or None (a route lookup is needed)."""
        if mq is None:  # the cached route and the fault strategy's queue, read inline (per send)
            dispatcher = self._dispatcher
            info = dispatcher.publish.get(p.topic)
            if info is None or not info.ok:
                return None
            mq = self._select(selector, info.queues, msg, arg) if selector is not None \
                else dispatcher.fault.select_one_queue(info, None)
        addr = inst.find_broker_master(mq.broker_name)
        return None if addr is None else (mq, addr)

    def _oneway_done(self, p: Prepared, mq: MessageQueue | None, error: BaseException | None) -> None:
        self._inflight_slots.leave()
        if error is not None:
            log.warning("oneway send of %s to %s failed: %s", p.uniq_id, mq, error)
        p.end_span(None, error)

    async def _send_oneway_core(self, p: Prepared, msg: Message, selector: SelectorLike | None, arg: Any,
                                mq: MessageQueue | None, timeout: float) -> None:
        if mq is None:
            info = await self._find_publish_info(p.topic)
            mq = self._select(selector, info.queues, msg, arg) if selector is not None \
                else self._dispatcher.select_queue(info)
        inst = self._inst()
        addr = await self._master_addr(inst, mq, p.topic)
        await inst.api.send_message_oneway(addr, p.ext_for(mq), p.body, code=p.code, timeout_ms=timeout)

    def wait_for_in_flight(self, timeout_s: float) -> bool:
        """Wait until no ``send_async`` is in flight; False if some still are after ``timeout_s``."""
        return self._idle.wait(timeout_s)

    @property
    def in_flight(self) -> InFlight:
        """The in-flight accounting: unfinished ``send_async`` calls (at most
        ``async_send_max_in_flight``) and queued oneway sends (Java ``semaphoreAsyncSendNum`` /
        ``semaphoreOneway``)."""
        return self._inflight_slots

    @property
    def fault_strategy(self) -> MQFaultStrategy:
        """The latency fault tolerance of this producer's queue choice (Java
        ``DefaultMQProducerImpl.getMqFaultStrategy``)."""
        return self._dispatcher.fault

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """The message trace dispatcher with ``enable_msg_trace`` (Java ``getTraceDispatcher``),
        else None."""
        return self._msg_trace

    @property
    def instance(self) -> MQClientInstance:
        """The client instance (raises ClientStateError when not running)."""
        return self._running()

    # -------------------------------------------------------------- preparation (caller thread)

    def _prepare_batch(self, msgs: Sequence[Message] | EncodedBatch) -> Prepared:
        """``prepare_batch`` of a list, ``prepare_encoded_batch`` of an :class:`EncodedBatch`
        (decoded back into messages when sends are traced: the trace context goes into each)."""
        if type(msgs) is EncodedBatch:
            if self._msg_trace is None and publish_span_is_no_op():
                return self._preparer.prepare_encoded_batch(msgs)
            msgs = msgs.messages()
        return self._preparer.prepare_batch(msgs)  # type: ignore[arg-type]

    @staticmethod
    def _select(selector: SelectorLike, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        mq = selector(mqs, msg, arg)
        if not isinstance(mq, MessageQueue):
            raise IllegalArgumentError(f"selector returned {mq!r}, not a MessageQueue")
        return mq

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

    # -------------------------------------------------------------- core (event loop)

    async def _find_publish_info(self, topic: str) -> TopicPublishInfo:
        """Cached publish info, else the topic's route, else the default topic's (TBW102).

        Raises:
            TopicNotExistError: neither route exists.
            MQBrokerError: SERVICE_NOT_AVAILABLE (14), the topic's route has no master.
        """
        publish = self._dispatcher.publish
        info = publish.get(topic)
        if info is not None and info.ok:
            return info
        inst = self._inst()
        publish.setdefault(topic, TopicPublishInfo(topic, []))
        route = await inst.update_topic_route(topic)
        info = publish[topic]
        if not info.ok:
            await inst.update_topic_route(topic, default_topic=self.config.create_topic_key,
                                          default_queue_nums=self.config.default_topic_queue_nums)
            info = publish[topic]
        if not info.ok:
            if route is not None and route.queue_datas:
                # the topic exists, but none of its brokers has a master right now (a DLedger
                # election, a master restarting): retriable, and the route is refreshed on it
                names = ", ".join(sorted({q.broker_name for q in route.queue_datas}))
                raise MQBrokerError(ResponseCode.SERVICE_NOT_AVAILABLE,
                                    f"topic {topic} has no master to write to (brokers {names}): a master "
                                    "election or restart is in progress")
            raise TopicNotExistError(ResponseCode.TOPIC_NOT_EXIST, topic_missing_remark(topic, inst.api.namesrv.addrs))
        return info


    async def _refresh_route(self, topic: str) -> None:
        """Fetch ``topic``'s route now (a send error said the cached one is stale)."""
        inst = self._instance
        if inst is not None:
            await inst.update_topic_route(topic)

    def _refresh_route_blocking(self, topic: str, timeout_s: float) -> None:
        """:meth:`_refresh_route` from the caller's thread, waiting at most ``timeout_s``."""
        inst = self._instance
        if inst is not None and not inst.loop_thread.in_loop_thread:
            inst.run(inst.update_topic_route(topic), timeout_s)

    async def _send_prepared(self, p: Prepared, mq: MessageQueue | None, timeout_ms: float,
                             policy: RetryPolicy | None = None, deadline: float | None = None, attempts: int = 0,
                             avoid: str | None = None) -> SendResult:
        """The asyncio transport: send ``p`` to ``mq`` (one attempt), or to the queues the
        dispatcher chooses, retried by ``policy`` (default the sync sends'), continuing after
        ``attempts`` already made (the last one to broker ``avoid``: ``async_send.py``)."""
        if deadline is None:
            deadline = _monotonic() + timeout_ms / 1000.0
        if mq is not None:
            return await self._send_to(mq, p, deadline, timeout_ms)
        info = await self._find_publish_info(p.topic)
        dispatcher = self._dispatcher
        return await dispatcher.send(info, dispatcher.policy if policy is None else policy, self._send_to, p,
                                     deadline, timeout_ms, attempts, avoid)

    # -------------------------------------------------------------- sync sends in the caller thread


    def _send_blocking(self, info: TopicPublishInfo, p: Prepared, mq: MessageQueue | None,
                       timeout_ms: float) -> SendResult:
        """The blocking transport: :meth:`_send_prepared` in the calling thread over its own
        connection (no I/O-thread hop, ``client/blocking.py``); ``info`` is the cached route."""
        deadline = _monotonic() + timeout_ms / 1000.0
        if mq is not None:
            return self._send_to_blocking(mq, p, deadline, timeout_ms)
        dispatcher = self._dispatcher
        return dispatcher.send_blocking(info, dispatcher.policy, self._send_to_blocking, p, deadline, timeout_ms)


    def _send_to_blocking(self, mq: MessageQueue, p: Prepared, deadline: float, timeout_ms: float) -> SendResult:
        """One attempt of the blocking transport."""
        remaining = (deadline - _monotonic()) * 1000.0
        if remaining <= 0:
            raise RemotingTimeoutError(mq.broker_name, timeout_ms, "send")
        inst = self._instance
        if inst is None:
            raise ClientStateError(f"producer {self.group} is shut down")
        addr = inst.find_broker_master(mq.broker_name)
        if addr is None:
            raise MQBrokerError(ResponseCode.SERVICE_NOT_AVAILABLE, f"no master address for broker {mq.broker_name}")
        conns = inst.blocking
        result = inst.api.send_request_blocking(conns, addr, mq, p.request_for(mq, conns.rpc_hooks),
                                                p.uniq_id, remaining)
        return unwrap_result(self.config.namespace, result) if self.config.namespace else result


    def _blocking_route(self, inst: MQClientInstance, p: Prepared, selector: SelectorLike | None
                        ) -> TopicPublishInfo | None:
        """The cached route when ``p`` may go by the blocking transport, else None."""
        if not self.config.sync_send_in_caller_thread or selector is not None or inst.loop_thread.in_loop_thread:
            return None
        info = self._dispatcher.publish.get(p.topic)  # read inline: this runs per send
        return info if info is not None and info.ok else None


    async def _send_to(self, mq: MessageQueue, p: Prepared, deadline: float, timeout_ms: float) -> SendResult:
        """One attempt of the asyncio transport."""
        remaining = (deadline - _monotonic()) * 1000.0
        if remaining <= 0:
            raise RemotingTimeoutError(mq.broker_name, timeout_ms, "send")
        inst = self._inst()
        addr = await self._master_addr(inst, mq, p.topic)
        result = await inst.api.send_message(addr, mq, p.ext_for(mq), p.body, p.uniq_id, remaining, code=p.code)
        return unwrap_result(self.config.namespace, result)

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

    # -------------------------------------------------------------- recall (5.3)

    def recall_message(self, topic: str, recall_handle: str, *, timeout_ms: float | None = None) -> str:
        """Cancel a timer message before it is delivered (RocketMQ 5.3 RECALL_MESSAGE, Java
        ``DefaultMQProducer.recallMessage``).

        ``recall_handle`` is the :attr:`SendResult.recall_handle` of the send (a 5.x broker sets
        it for a ``deliver_time_ms`` / ``delay_ms`` message that went into its timer wheel). The
        broker writes a delete entry for the message's wheel slot: the message is not delivered.
        A second recall of the same handle, or of a well-formed handle of no message, succeeds
        too (as 5.3.3). The broker must have ``recallMessageEnable=true`` (false by default).

        Args:
            topic: the message's topic (the handle's; the namespace is applied).
            recall_handle: the handle, as returned.
            timeout_ms: request timeout in ms (default ``mq_client_api_timeout``, 3000).

        Returns:
            the recalled message's ``UNIQ_KEY`` (its ``SendResult.msg_id``).

        Raises:
            IllegalArgumentError: an illegal or retry/DLQ topic; a handle that is not a str or
                does not decode ("recall handle is invalid"). Nothing is sent.
            ClientStateError: the producer is not running.
            IllegalOperationError: (604) the handle is of another topic or broker, or its time
                has passed (the message is due or delivered: "recall failed, timestamp invalid").
            MQBrokerError: 16 NO_PERMISSION (recall disabled on the broker), 17 TOPIC_NOT_EXIST,
                10/11 slave; 3 ``RequestCodeNotSupportedError`` from a broker before 5.3; 14 when
                no master of the handle's broker is known.
            RemotingError: network failure or timeout.
        """
        inst = self._running()
        wrapped = self._wrap(topic)
        check_recall(wrapped, recall_handle)
        timeout = self.config.mq_client_api_timeout if timeout_ms is None else timeout_ms
        return inst.run(recall_message(inst, self.group, wrapped, recall_handle, timeout), timeout / 1000.0 + 1.0)

    async def arecall_message(self, topic: str, recall_handle: str, *, timeout_ms: float | None = None) -> str:
        """:meth:`recall_message` from asyncio code (on any loop; runs on the client's I/O loop)."""
        inst = self._running()
        wrapped = self._wrap(topic)
        check_recall(wrapped, recall_handle)
        timeout = self.config.mq_client_api_timeout if timeout_ms is None else timeout_ms
        return await asyncio.wrap_future(inst.loop_thread.submit(
            recall_message(inst, self.group, wrapped, recall_handle, timeout)))

    # -------------------------------------------------------------- misc

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of ``topic`` (route lookup with the TBW102 fallback).

        Raises:
            ClientStateError, TopicNotExistError, RemotingError.
        """
        inst = self._running()
        info = inst.run(self._find_publish_info(self._wrap(topic)), self.config.mq_client_api_timeout / 1000.0)
        return list(info.queues)

    def supports_timer_messages(self, topic: str) -> bool:
        """Whether ``topic``'s brokers honour timer messages (:attr:`Message.deliver_time_ms`,
        :attr:`Message.delay_ms`, RocketMQ 5.x's ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC``).

        True when every master the topic's messages may go to (its route, or the default topic's
        ``TBW102`` for a topic still to be auto-created) answered as a RocketMQ 5.x broker; False
        when one is older (a 4.x broker ignores the properties and delivers at once) or has no
        master. The version comes from the brokers' heartbeat answers: the first call for a broker
        not heard from yet sends a heartbeat (one round trip), later calls read cached state.

        Raises:
            ClientStateError: the producer is not started or shut down.
            TopicNotExistError: neither the topic nor the default topic has a route.
            RemotingError: the name server cannot be reached.
        """
        inst = self._running()
        wrapped = self._wrap(topic)
        info = self._dispatcher.publish.get(wrapped)
        if info is not None and info.ok:
            known = cached_timer_support(inst.broker_heartbeats, self._master_addrs(inst, info))
            if known is not None:
                return known

        async def ask() -> bool:
            found = await self._find_publish_info(wrapped)
            return await timer_support(inst.broker_heartbeats, lambda: self._master_addrs(inst, found),
                                       inst.send_heartbeat_to_all)

        return inst.run(ask(), self.config.mq_client_api_timeout / 1000.0)

    @staticmethod
    def _master_addrs(inst: MQClientInstance, info: TopicPublishInfo) -> list[str | None]:
        return [inst.find_broker_master(name) for name in sorted({mq.broker_name for mq in info.queues})]

    def __repr__(self) -> str:
        return f"Producer(group={self.group!r}, state={self._lifecycle.state.name})"


set_trace_producer_factory(Producer)  # message traces are sent by an inner Producer (trace/dispatcher.py)
