"""Listener adapters of the push consumer: coroutine listeners and per-topic handlers.

- :class:`AsyncListenerRunner`: an ``async def`` listener runs on the application's loop when
  the consumer was started from it (``astart()``, ``async with``, ``start()`` in a coroutine),
  else on a dedicated asyncio loop thread (``rocketmq-listener-<group>``); never on the client's
  I/O loop, so a listener that awaits slow work cannot stall heartbeats or pulls. The consume
  thread waits for its result.
- :class:`TopicDispatcher`: the listener behind ``@consumer.on_message(topic, tags)``: each
  batch (always from one queue, so one topic) goes to the handler registered for its topic.
- :class:`ListenerRegistry`: ``register_message_listener`` / ``listener`` / ``on_message``, the
  same for the remoting and the gRPC push consumer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from ..exceptions import ClientStateError, IllegalArgumentError, RemotingTimeoutError
from ..lifecycle import ServiceState
from ..protocol.message import MessageExt
from ..remoting.loop import EventLoopThread

__all__ = ["AsyncListenerRunner", "ListenerRegistry", "TopicDispatcher", "is_async_listener"]

log = logging.getLogger("rocketmq_sdk.consumer.listener")

#: how often a consume thread waiting for a listener on the application's loop checks that the
#: loop still runs, s
_APP_LOOP_CHECK_S = 1.0


def is_async_listener(fn: Any) -> bool:
    """True for ``async def`` functions and objects whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or (callable(fn) and inspect.iscoroutinefunction(type(fn).__call__))


class AsyncListenerRunner:
    """One loop thread per consumer for its coroutine listeners; :meth:`wrap` turns an
    ``async def fn(msgs, context)`` into the plain callable the consume threads call.

    Args:
        name: loop thread name.
        timeout_s: how long one call may take before the consume thread gives up (the
            coroutine is cancelled and the batch counts as failed); None: no limit.
        event_loop: loop implementation (``"auto"`` / ``"asyncio"`` / ``"uvloop"``, see
            :func:`rocketmq_sdk.remoting.loop.new_event_loop`).
    """

    def __init__(self, name: str, timeout_s: float | None = None, event_loop: str | None = "auto") -> None:
        self.name = name
        self.timeout_s = timeout_s
        self.event_loop = event_loop
        self._loop: EventLoopThread | None = None
        #: the application's loop, when the consumer was started from one: listeners run there
        self.app_loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        if self._loop is None or not self._loop.is_running:
            self._loop = EventLoopThread(name=self.name, event_loop=self.event_loop)

    def wrap(self, fn: Callable[..., Any]) -> Callable[[list[MessageExt], Any], Any]:
        def call(msgs: list[MessageExt], context: Any) -> Any:
            app = self.app_loop
            if app is not None and app.is_running():
                return self._run_on(app, fn(msgs, context))
            loop = self._loop
            if loop is None:
                raise IllegalArgumentError("the asyncio listener loop is not started")
            return loop.run(fn(msgs, context), self.timeout_s)
        return call

    def _run_on(self, app: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the application's loop and wait (this is a consume thread) for its
        result, at most ``timeout_s``; gives up early if that loop stops running (the call
        then fails and the batch is redelivered)."""
        future = asyncio.run_coroutine_threadsafe(coro, app)
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        while True:
            wait_s = _APP_LOOP_CHECK_S if deadline is None else min(_APP_LOOP_CHECK_S, deadline - time.monotonic())
            try:
                return future.result(max(0.0, wait_s))
            except concurrent.futures.TimeoutError:
                if deadline is not None and time.monotonic() >= deadline:
                    future.cancel()
                    raise RemotingTimeoutError("application event loop", (self.timeout_s or 0) * 1000.0,
                                               "async listener call") from None
                if not app.is_running():
                    future.cancel()
                    raise RemotingTimeoutError("application event loop", 0, "async listener call (the "
                                               "loop stopped before the listener finished)") from None

    def stop(self, timeout_s: float = 5.0) -> None:
        self.app_loop = None
        if self._loop is not None:
            self._loop.stop(timeout_s)
            self._loop = None


class TopicDispatcher:
    """Routes each batch to the handler of its topic (handlers may be sync or async; async
    ones are run by :class:`AsyncListenerRunner` instances the consumer starts)."""

    def __init__(self) -> None:
        self.handlers: dict[str, Callable[..., Any]] = {}

    def add(self, topic: str, fn: Callable[..., Any]) -> None:
        """Raises IllegalArgumentError: ``topic`` already has a handler."""
        if topic in self.handlers:
            raise IllegalArgumentError(f"topic {topic!r} already has a handler")
        self.handlers[topic] = fn

    def __call__(self, msgs: list[MessageExt], context: Any) -> Any:
        fn = self.handlers.get(msgs[0].topic)
        if fn is None:  # e.g. a topic subscribed without a handler: treat as a failure
            log.warning("no handler for topic %s; %d messages not consumed", msgs[0].topic, len(msgs))
            return None
        return fn(msgs, context)


class ListenerRegistry:
    """How a push consumer is given its listener (mixed into the remoting ``PushConsumer`` and
    the gRPC ``GrpcPushConsumer``; they set the attributes below in ``__init__``)."""

    _listener: Callable[[list[MessageExt], Any], Any] | None
    _dispatcher: TopicDispatcher | None
    _async_runner: AsyncListenerRunner
    #: the listener is orderly (``register_message_listener(..., orderly=True)``).
    orderly: bool

    @property
    def state(self) -> ServiceState:  # pragma: no cover - provided by the consumer class
        raise NotImplementedError

    def subscribe(self, topic: str, expression: Any = "*") -> None:  # pragma: no cover - the consumer's
        raise NotImplementedError

    def register_message_listener(self, listener: Any, *, orderly: bool | None = None) -> None:
        """Set the listener: ``fn(msgs: list[MessageExt], context) -> status`` or an object with
        ``consume_message(msgs, context)``. It runs on the consume thread pool.

        Concurrent (default): returns ``ConsumeConcurrentlyStatus``; an exception or a None
        result means RECONSUME_LATER. Orderly (``orderly=True``, or an object whose ``orderly``
        attribute is True; Java ``MessageListenerOrderly``): called with
        ``ConsumeOrderlyContext``, one batch at a time per queue in queue order, returns
        ``ConsumeOrderlyStatus``; an exception or None means SUSPEND_CURRENT_QUEUE_A_MOMENT.

        Raises:
            IllegalArgumentError: not callable, or ``on_message`` handlers are registered.
            ClientStateError: the consumer is already started.
        """
        if self.state is not ServiceState.CREATE_JUST:
            raise ClientStateError("register the listener before start()")
        if self._dispatcher is not None and listener is not self._dispatcher:
            raise IllegalArgumentError("handlers are registered with on_message(); use one style")
        fn = getattr(listener, "consume_message", listener)
        if not callable(fn):
            raise IllegalArgumentError("the listener must be callable or have consume_message()")
        self._listener = self._async_runner.wrap(fn) if is_async_listener(fn) else fn
        self.orderly = bool(getattr(listener, "orderly", False)) if orderly is None else orderly

    def listener(self, fn: Any = None, *, orderly: bool = False) -> Any:
        """Decorator form of :meth:`register_message_listener`::

            @consumer.listener
            def handle(msgs, ctx): ...

            @consumer.listener(orderly=True)
            async def handle(msgs, ctx): ...   # coroutines run on a dedicated loop thread

        Returns the function unchanged."""
        def register(f: Any) -> Any:
            self.register_message_listener(f, orderly=orderly)
            return f
        return register(fn) if fn is not None else register

    def on_message(self, topic: str, expression: str | None = "*", *, orderly: bool = False) -> Callable[[Any], Any]:
        """Decorator: subscribe to ``topic`` with ``expression`` and consume its messages with
        the decorated function (sync or ``async``; same signature and results as a listener).
        Several topics may each have their own handler; all are orderly or none.

        Raises:
            IllegalArgumentError: the topic already has a handler, or a listener was registered
                with :meth:`register_message_listener`.
        """
        def register(f: Any) -> Any:
            if self._dispatcher is None:
                if self._listener is not None:
                    raise IllegalArgumentError("a listener is already registered; use one style")
                self._dispatcher = TopicDispatcher()
                self.register_message_listener(self._dispatcher, orderly=orderly)
            fn = getattr(f, "consume_message", f)
            self._dispatcher.add(topic, self._async_runner.wrap(fn) if is_async_listener(fn) else fn)
            self.subscribe(topic, expression)
            return f
        return register
