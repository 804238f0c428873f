"""``AsyncSend``: the first attempt of a ``send_async`` without an asyncio Task.

The request is built in the caller's thread (queue choice, V2 header, ``RemotingCommand``) and
handed to the I/O loop with the producer's ``BatchedSubmitter`` (one loop wake-up per burst).
On the loop it is registered in the channel's pending table under its opaque — the channel
only needs ``done()``, ``set_result(response)`` and ``set_exception(error)`` from what it finds
there — and written; one ``call_later`` timer bounds the wait. The response completes the
caller's ``concurrent.futures.Future`` directly. Only the uncommon paths use coroutines: a
broker without an open connection, a channel under backpressure or still unproven (TLS probe),
and the retries after a failed first attempt (``SendDispatcher.send``), so behaviour, errors
and retries are those of the other transports: the producer's ``SendDispatcher`` chooses the
queue and decides every retry (``dispatch.py``). Why no Task: ``benchmarks/profiling/LOG.md``.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..client.mq_client_api import send_result_from_response
from ..exceptions import RemotingTimeoutError
from ..protocol.message import MessageQueue, SendResult, SendStatus
from ..remoting.command import RemotingCommand
from ..remoting.hooks import HookChain
from ..retry import RetryPolicy
from .dispatch import SendDispatcher
from .namespace import unwrap_result
from .prepare import Prepared
from .submit import copy_outcome

if TYPE_CHECKING:
    from ..client.instance import MQClientInstance
    from ..client.route import TopicPublishInfo
    from ..remoting.channel import Channel

__all__ = ["AsyncSend", "AsyncSendContext", "DeadlineQueue", "InFlight", "OnewaySend", "SendFuture"]

#: ``send(prepared, mq, timeout_ms, policy, deadline, attempts, avoid)``: the asyncio transport's
#: send (``mq`` None: queues chosen by the dispatcher), continuing after ``attempts`` made.
AsyncFallback = Callable[[Prepared, MessageQueue | None, float, RetryPolicy, float, int, str | None],
                         Coroutine[Any, Any, SendResult]]

log = logging.getLogger("rocketmq_sdk.producer")

_monotonic = time.monotonic
_SEND_OK = SendStatus.SEND_OK

#: CPython versions whose ``concurrent.futures.Future`` internals :class:`SendFuture` is tested
#: against (its ``_state`` values, ``_condition``, ``_waiters``, ``_done_callbacks``,
#: ``_invoke_callbacks``); any other interpreter or version uses the public methods only.
FUTURE_INTERNALS_TESTED = ((3, 11), (3, 12), (3, 13))


def _future_internals_usable(version: tuple[int, ...] | None = None) -> bool:
    """True on a tested CPython (``version``: this one's) whose ``Future`` still has the fields
    and method SendFuture touches (checked on a fresh one), else False: the public-method
    fallback."""
    version = tuple(sys.version_info[:2] if version is None else version[:2])
    if sys.implementation.name != "cpython" or version not in FUTURE_INTERNALS_TESTED:
        return False
    probe: concurrent.futures.Future[None] = concurrent.futures.Future()
    fields = ("_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks")
    return all(hasattr(probe, f) for f in fields) and callable(getattr(probe, "_invoke_callbacks", None)) \
        and all(hasattr(concurrent.futures._base, s) for s in ("PENDING", "CANCELLED", "CANCELLED_AND_NOTIFIED",
                                                              "FINISHED"))


#: SendFuture completes and frees its slot through ``Future``'s internals (one lock round trip)
#: when True, through ``set_result`` & co. and a done callback when False (tests set it).
FUTURE_INTERNALS = _future_internals_usable()
if FUTURE_INTERNALS:  # the states concurrent.futures.Future keeps in _state (read only when it is True)
    from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING



def _frame_for(hooks: HookChain, addr: str, cmd: RemotingCommand, frame: bytes | None) -> bytes:
    """The bytes to write for ``cmd``: the frame encoded in the caller's thread, or, when RPC
    hooks (ACL signing) are set, ``cmd`` encoded after they ran (they may change the header)."""
    if hooks:
        hooks.before_request(addr, cmd)
        return cmd.encode()
    return cmd.encode() if frame is None else frame

_allocate_lock = threading.Lock


class FutureCondition:
    """What ``concurrent.futures.Future`` and ``wait()``/``as_completed()`` use of the future's
    ``threading.Condition`` (``with``, ``acquire``, ``release``, ``wait``, ``notify_all``), on
    one plain lock, with the waiter queue made only when someone waits.

    A ``threading.Condition`` over an ``RLock`` is eight objects the cyclic garbage collector
    tracks (its ``__dict__``, the waiter deque, five bound lock methods), per send in flight;
    this is none. No ``Future`` method takes its condition twice. Used only where
    :data:`FUTURE_INTERNALS` is True.
    """

    __slots__ = ("_lock", "_waiters")

    def __init__(self) -> None:
        self._lock = _allocate_lock()
        self._waiters: collections.deque | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        """``threading.Condition.wait`` (the lock must be held)."""
        waiter = _allocate_lock()
        waiter.acquire()
        waiters = self._waiters
        if waiters is None:
            waiters = self._waiters = collections.deque()
        waiters.append(waiter)
        self._lock.release()
        got = False
        try:
            if timeout is None:
                waiter.acquire()
                got = True
            elif timeout > 0:
                got = waiter.acquire(True, timeout)
            else:
                got = waiter.acquire(False)
            return got
        finally:
            self._lock.acquire()
            if not got:
                try:
                    waiters.remove(waiter)
                except ValueError:
                    pass

    def notify_all(self) -> None:
        """Wake every waiter (the lock must be held)."""
        waiters = self._waiters
        if waiters:
            for waiter in waiters:
                waiter.release()
            waiters.clear()


class SendFuture(concurrent.futures.Future):
    """The ``concurrent.futures.Future`` of a Task-free ``send_async``.

    * It frees its producer's in-flight slot itself when it becomes done (answer, error or
      ``cancel()``), before the done callbacks run, as the ``add_done_callback(release)`` it
      replaces did (one lock round trip and one callback less per send).
    * :meth:`finish` is ``set_running_or_notify_cancel()`` + ``set_result()`` /
      ``set_exception()`` under one acquisition of the future's condition (same states,
      waiter notifications and callbacks as those calls).
    """

    def __init__(self, slots: InFlight) -> None:
        self._slots = slots
        if not FUTURE_INTERNALS:  # public methods only: the slot is freed by a done callback
            self._fast = False
            super().__init__()
            self.add_done_callback(self._free_slot)
            return
        self._fast = True
        # Future.__init__ with a FutureCondition (the same fields)
        self._condition = FutureCondition()  # type: ignore[assignment]
        self._state = PENDING
        self._result = None
        self._exception = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []

    def _free_slot(self, _: concurrent.futures.Future) -> None:
        self._slots.release()

    def _invoke_callbacks(self) -> None:  # CPython calls it once: when the future becomes done
        if self._fast:
            self._slots.release()
        super()._invoke_callbacks()  # type: ignore[misc]  # concurrent.futures.Future's own

    def finish(self, result: Any = None, exc: BaseException | None = None) -> None:
        """Complete the future with ``result`` or ``exc``, unless the caller cancelled it."""
        if not self._fast:
            try:
                if not self.set_running_or_notify_cancel():
                    return  # cancelled by the caller
            except RuntimeError:  # done already: a second completion is ignored
                return
            self.set_result(result) if exc is None else self.set_exception(exc)
            return
        with self._condition:
            state = self._state
            if state != PENDING:
                if state == CANCELLED:  # what set_running_or_notify_cancel does for it
                    self._state = CANCELLED_AND_NOTIFIED
                    for waiter in self._waiters:
                        waiter.add_cancelled(self)
                return
            self._state = FINISHED
            if exc is None:
                self._result = result
                for waiter in self._waiters:
                    waiter.add_result(self)
            else:
                self._exception = exc
                for waiter in self._waiters:
                    waiter.add_exception(self)
            self._condition.notify_all()
        self._invoke_callbacks()


class AsyncSendContext:
    """What the callback-driven sends of one producer share.

    Args:
        dispatcher: the producer's :class:`SendDispatcher` (fault bookkeeping, retry decisions).
        slots: the producer's in-flight accounting.
        namespace: the producer's namespace ('' for none): results are unwrapped.
        fallback: the asyncio transport (:data:`AsyncFallback`) for sends that cannot stay
            Task-free (no usable connection) and for the retries.
    """

    __slots__ = ("dispatcher", "slots", "namespace", "fallback", "_deadlines")

    def __init__(self, dispatcher: SendDispatcher, slots: InFlight, namespace: str | None,
                 fallback: AsyncFallback) -> None:
        self.dispatcher = dispatcher
        self.slots = slots
        self.namespace = namespace or ""
        self.fallback = fallback
        self._deadlines: DeadlineQueue | None = None

    def deadlines_on(self, loop: asyncio.AbstractEventLoop) -> DeadlineQueue:
        """The timeouts of these sends on ``loop`` (loop thread)."""
        q = self._deadlines
        if q is None or q.loop is not loop:
            q = self._deadlines = DeadlineQueue(loop)
        return q


class AsyncSend:
    """One ``send_async`` of a prepared message; ``fut`` is the caller's future.

    ``info`` is None for an explicit queue (one attempt, no fault bookkeeping, as the other
    transports with ``mq``); else the topic's publish info for retries, which ``policy`` decides.
    Registered in the channel with :meth:`Channel.expect_response`, it is completed through
    ``set_result`` / ``set_exception``.
    """

    __slots__ = ("ctx", "inst", "prepared", "info", "queue", "addr", "deadline", "timeout_ms",
                 "policy", "fut", "cmd", "frame", "started", "timer", "channel", "_done", "_remaining",
                 "expires_at", "opaque", "code")

    def __init__(self, ctx: AsyncSendContext, inst: MQClientInstance, prepared: Prepared,
                 info: TopicPublishInfo | None, queue: MessageQueue, addr: str, timeout_ms: float,
                 policy: RetryPolicy) -> None:
        self.ctx = ctx
        self.inst = inst
        self.prepared: Prepared | None = prepared
        self.info = info
        self.queue = queue
        self.addr = addr
        self.timeout_ms = timeout_ms
        self.deadline = _monotonic() + timeout_ms / 1000.0
        self.policy = policy
        self.fut: SendFuture = SendFuture(ctx.slots)
        hooks = inst.remoting.rpc_hooks
        cmd = prepared.request_for(queue, hooks)
        self.opaque, self.code = cmd.opaque, cmd.code
        # encoded here, in the caller's thread, unless RPC hooks must see (and sign) it first;
        # without hooks only the frame is kept (one object less for the GC per send in flight)
        self.cmd: RemotingCommand | None
        self.frame: bytes | None
        if hooks:
            self.cmd, self.frame = cmd, None
        else:
            self.cmd, self.frame = None, cmd.encode()
        self.expires_at = 0.0
        self.started = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.channel: Channel | None = None
        self._done = False
        self._remaining = 0.0

    # ------------------------------------------------------------------ on the I/O loop

    def start(self) -> None:
        """Write the request (called on the loop by the submitter)."""
        fut = self.fut
        # cancelled by the caller? (the state read without the future's lock: a cancel racing
        # with this check is seen when the answer completes the future)
        if (fut._state != PENDING) if fut._fast else fut.cancelled():
            fut.finish()  # notifies concurrent.futures.wait()/as_completed() of the cancel
            return
        remoting = self.inst.remoting
        channel = remoting.ready_channel(self.addr)
        if channel is None:
            self.fallback()  # connect / wait for the socket buffer / TLS probe: the coroutine path
            return
        self.started = now = _monotonic()
        remaining = (self.deadline - now) * 1000.0
        if remaining <= 0:
            self._failed(RemotingTimeoutError(self.queue.broker_name, self.timeout_ms, "send"))
            return
        try:
            hooks = remoting.rpc_hooks
            if hooks and self.cmd is None:  # hooks installed since: they see a fresh request
                assert self.prepared is not None
                self.cmd = self.prepared.request_for(self.queue, hooks)
                self.opaque = self.cmd.opaque
            cmd = self.cmd
            frame = self.frame if cmd is None else _frame_for(hooks, self.addr, cmd, self.frame)
            channel.expect_response(self.opaque, self)
            self.channel = channel
            self._remaining = remaining
            loop = channel.loop
            self.ctx.deadlines_on(loop).add(loop.time() + remaining / 1000.0, self)
            channel.write_frame(frame)  # type: ignore[arg-type]
        except Exception as exc:
            self._unregister()
            self._failed(exc)

    def done(self) -> bool:
        return self._done

    def set_result(self, resp: RemotingCommand) -> None:
        """The response arrived (``Channel.data_received``)."""
        if self._done:
            return
        self._done = True
        if self.timer is not None:
            self.timer.cancel()
        addr = self.addr
        try:
            if self.cmd is not None:  # sent through the RPC hooks
                self.inst.remoting.rpc_hooks.after_response(addr, self.cmd, resp)
            result = send_result_from_response(resp, addr, self.queue, self.prepared.uniq_id)  # type: ignore[union-attr]
        except Exception as exc:
            self._failed(exc)
            return
        ctx = self.ctx
        if ctx.namespace:
            result = unwrap_result(ctx.namespace, result)
        # a SEND_OK without latency fault tolerance: nothing to record (the dispatcher's fast path)
        if self.info is not None and (result.send_status is not _SEND_OK or ctx.dispatcher.fault.enabled) \
                and ctx.dispatcher.retry_after_result(self.policy, 1, self.queue, self.started, result):
            self._retry()
            return
        self.cmd = self.prepared = self.frame = None  # may wait in the DeadlineQueue
        self.fut.finish(result)

    def set_exception(self, exc: BaseException) -> None:
        """The channel failed the request (closed) or the timer expired."""
        if self._done:
            return
        self._done = True
        if self.timer is not None:
            self.timer.cancel()
        self._failed(exc)

    def _expire(self) -> None:
        if self._done:
            return
        self._unregister()
        remote = self.channel.remote_addr if self.channel is not None else self.addr
        self.set_exception(RemotingTimeoutError(remote, self._remaining, f"request code {self.code}"))

    def _unregister(self) -> None:
        channel = self.channel
        if channel is not None:
            channel.forget_response(self.opaque, self)

    def _failed(self, exc: BaseException) -> None:
        """The first attempt failed: the dispatcher decides between a retry and the caller's error."""
        self._done = True
        if self.info is not None and isinstance(exc, Exception) and self.ctx.dispatcher.retry_after_error(
                self.policy, 1, self.queue, self.started or _monotonic(), exc):
            self._retry()
            return
        self.cmd = self.prepared = self.frame = None
        self.fut.finish(None, exc)

    def _retry(self) -> None:
        """Attempts 2.. through the asyncio transport, avoiding this attempt's broker."""
        if self.fut.cancelled():
            self.fut.finish()  # notifies wait()/as_completed() of the cancel
            return
        assert self.prepared is not None
        self._watch(self.ctx.fallback(self.prepared, None, self.timeout_ms, self.policy, self.deadline, 1,
                                      self.queue.broker_name))

    def fallback(self) -> None:
        """The first attempt through the asyncio transport (no usable connection yet)."""
        assert self.prepared is not None
        mq = self.queue if self.info is None else None
        self._watch(self.ctx.fallback(self.prepared, mq, self.timeout_ms, self.policy, self.deadline, 0, None))

    def _watch(self, coro: Coroutine[Any, Any, SendResult]) -> None:
        loop = self.inst.loop_thread.loop
        task = loop.create_task(coro)
        fut = self.fut
        task.add_done_callback(lambda t: copy_outcome(t, fut))
        fut.add_done_callback(lambda f: f.cancelled() and loop.call_soon_threadsafe(task.cancel))


class DeadlineQueue:
    """Timeouts of one producer's ``AsyncSend`` requests with one timer: deadlines of sends with
    the same timeout come in increasing order, so a deque checked from its head replaces a
    ``call_later`` handle (and its cancellation) per request. A deadline earlier than the last
    one queued (a shorter ``timeout_ms``) gets its own timer. The timer also wakes every
    ``SWEEP_S`` to drop answered sends from the head."""

    SWEEP_S = 0.05

    __slots__ = ("loop", "items", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # the sends themselves, each with its ``expires_at`` (no tuple per send: fewer objects for
        # the GC while thousands are in flight)
        self.items: collections.deque[AsyncSend] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None

    def add(self, when: float, send: AsyncSend) -> None:
        """Call ``send._expire()`` at loop time ``when`` unless it is done by then (loop thread)."""
        items = self.items
        if items and when < items[-1].expires_at:
            send.timer = self.loop.call_at(when, send._expire)
            return
        send.expires_at = when
        items.append(send)
        if self.timer is None:
            self.timer = self.loop.call_at(min(when, self.loop.time() + self.SWEEP_S), self._fire)

    def _fire(self) -> None:
        self.timer = None
        items = self.items
        now = self.loop.time()
        while items:
            send = items[0]
            when = send.expires_at
            if send._done:
                items.popleft()
            elif when <= now:
                items.popleft()
                send._expire()
            else:
                break
        if items:
            self.timer = self.loop.call_at(min(items[0].expires_at, now + self.SWEEP_S), self._fire)


class InFlight:
    """The producer's in-flight accounting under one lock: every unfinished ``send_async`` and
    queued oneway send (``total``; ``idle`` is set when it is 0), a bound of ``limit`` on the
    ``send_async`` ones (``acquire``/``release`` behave like a ``BoundedSemaphore``'s) and one
    of ``oneway_limit`` on the queued oneway ones (``enter``/``leave``; Java's
    ``semaphoreOneway``). The plain lock is taken directly (a Condition only when someone waits
    for a slot): it is contended by the sending threads and the I/O loop once per message."""

    __slots__ = ("limit", "oneway_limit", "async_count", "total", "idle", "_lock", "_cond", "_waiting")

    def __init__(self, limit: int, oneway_limit: int = 65535) -> None:
        self.limit = max(1, limit)
        self.oneway_limit = max(1, oneway_limit)
        self.async_count = 0
        self.total = 0
        self.idle = threading.Event()
        self.idle.set()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0

    def acquire(self, timeout: float | None = None) -> bool:
        """Take an async slot (waiting up to ``timeout`` s; None: forever) and count the send;
        False if no slot freed in time."""
        with self._lock:
            if self.async_count >= self.limit and not self._wait(self._async_free, timeout):
                return False
            self.async_count += 1
            self.total += 1
            if self.total == 1:
                self.idle.clear()
        return True

    def _async_free(self) -> bool:
        return self.async_count < self.limit

    def _oneway_free(self) -> bool:
        return self.total - self.async_count < self.oneway_limit

    def _wait(self, free: Callable[[], bool], timeout: float | None) -> bool:
        """Wait (lock held) until ``free()``; False after ``timeout`` s (None: forever)."""
        self._waiting += 1
        try:
            return self._cond.wait_for(free, timeout)
        finally:
            self._waiting -= 1

    def release(self, _fut: Any = None) -> None:
        """A ``send_async`` finished (usable as a future's done callback).

        Raises:
            ValueError: more releases than acquisitions.
        """
        with self._lock:
            if self.async_count <= 0:
                raise ValueError("InFlight released too many times")
            self.async_count -= 1
            if self._waiting:
                self._cond.notify_all()  # an async or a oneway sender may wait
            self.total -= 1
            if not self.total:
                self.idle.set()

    def enter(self, timeout: float | None = None) -> bool:
        """Count a queued oneway send, waiting up to ``timeout`` s (None: forever) while
        ``oneway_limit`` are queued; False if none was written in time."""
        with self._lock:
            if self.total - self.async_count >= self.oneway_limit and not self._wait(self._oneway_free, timeout):
                return False
            self.total += 1
            if self.total == 1:
                self.idle.clear()
        return True

    def leave(self) -> None:
        """A queued oneway send was written (or failed).

        Raises:
            ValueError: more leaves than enters.
        """
        with self._lock:
            if self.total - self.async_count <= 0:
                raise ValueError("InFlight left too many times")
            self.total -= 1
            if self._waiting:
                self._cond.notify_all()  # an async or a oneway sender may wait
            if not self.total:
                self.idle.set()


class OnewaySend:
    """A oneway send whose queue and broker address are cached: the ONEWAY request is built in
    the caller's thread and written on the loop without a Task (a missing or busy connection
    falls back to ``MQClientAPI.send_message_oneway``). ``done(error)`` is called once."""

    __slots__ = ("inst", "addr", "cmd", "frame", "timeout_ms", "done")

    def __init__(self, inst: MQClientInstance, addr: str, cmd: RemotingCommand, timeout_ms: float,
                 done: Any) -> None:
        self.inst = inst
        self.addr = addr
        self.timeout_ms = timeout_ms
        self.cmd = cmd  # a ONEWAY send request (Prepared.request_for)
        self.frame = None if inst.remoting.rpc_hooks else cmd.encode()  # see AsyncSend
        self.done = done

    def start(self) -> None:
        remoting = self.inst.remoting
        addr = self.addr
        channel = remoting.writable_channel(addr)  # a oneway write waits for no answer: unproven will do
        if channel is None:
            cmd = self.cmd
            task = self.inst.loop_thread.loop.create_task(self.inst.api.send_message_oneway(
                addr, cmd.ext_fields, cmd.body, code=cmd.code, timeout_ms=self.timeout_ms))
            task.add_done_callback(lambda t: self.done(None if t.cancelled() else t.exception()))
            return
        try:
            channel.write_frame(_frame_for(remoting.rpc_hooks, addr, self.cmd, self.frame))
        except Exception as exc:
            self.done(exc)
            return
        self.done(None)
