"""Request-reply over RocketMQ (Java 4.9 ``DefaultMQProducer.request``, ``RequestResponseFuture``,
``RequestFutureTable``, ``MessageUtil.createReplyMessage``, ``ClientRemotingProcessor.receiveReplyMessage``).

The round trip, as the Java client and broker do it:

1. The requester sets ``CORRELATION_ID`` (a random UUID), ``REPLY_TO_CLIENT`` (its client id)
   and ``TTL`` (the timeout, ms) on the message and sends it normally. Before the first request
   to a topic it fetches the route and heartbeats every broker, so the broker knows the
   client's connection when the reply comes back.
2. A consumer receives the request (the broker added the ``CLUSTER`` property), builds the
   reply with :func:`create_reply_message` (topic ``<cluster>_REPLY_TOPIC``, ``MSG_TYPE=reply``,
   the three properties copied) and sends it with any producer; a message whose ``MSG_TYPE`` is
   ``reply`` goes out as SEND_REPLY_MESSAGE_V2 (325).
3. The broker pushes the reply to the requester's connection (PUSH_REPLY_MESSAGE_TO_CLIENT,
   326, header ``ReplyMessageRequestHeader``), found by the ``REPLY_TO_CLIENT`` client id, and
   stores it when ``storeReplyMessageEnable``.
4. The requester's client instance hands the reply to the waiting future by ``CORRELATION_ID``
   (:func:`receive_reply_message`).

Java 4.9 marks only the reply with ``MSG_TYPE`` (``"reply"``); the request message carries no
``MSG_TYPE``, so neither does ours.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..exceptions import ClientStateError, IllegalArgumentError, RequestTimeoutError
from ..protocol import deflate
from ..protocol.codes import MessageConst as MC
from ..protocol.codes import MessageSysFlag, ResponseCode
from ..protocol.headers import ReplyMessageRequestHeader
from ..protocol.message import Message, MessageExt, MessageQueue, SendResult
from ..protocol.message_codec import decode_properties
from ..remoting.command import RemotingCommand
from .callbacks import run_callback
from .prepare import REPLY_MESSAGE_FLAG
from .selector import SelectorLike

if TYPE_CHECKING:
    from ..client.instance import MQClientInstance
    from ..config import ProducerConfig

__all__ = [
    "REPLY_MESSAGE_FLAG",
    "RequestCallback",
    "RequestReplyMixin",
    "RequestResponseFuture",
    "create_reply_message",
    "get_reply_to_client",
    "pending_request_count",
    "receive_reply_message",
    "register_request",
    "reply_topic",
    "unregister_request",
]

log = logging.getLogger("rocketmq_sdk.producer.request")

#: Java ``MixAll.REPLY_TOPIC_POSTFIX``.
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"

#: ``callback(reply, error)`` of :meth:`RequestReplyMixin.request_async`: exactly one is None.
RequestCallback = Callable[[MessageExt | None, BaseException | None], Any]


def reply_topic(cluster: str) -> str:
    """``<cluster>_REPLY_TOPIC`` (Java ``MixAll.getReplyTopic``)."""
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


def create_reply_message(request_msg: Message, body: bytes | str) -> Message:
    """The reply to ``request_msg`` (Java ``MessageUtil.createReplyMessage``).

    Topic ``<CLUSTER>_REPLY_TOPIC`` from the request's ``CLUSTER`` property (set by the broker
    that stored the request); ``MSG_TYPE=reply``; ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and
    ``TTL`` copied from the request; no ``WAIT`` property (as Java's). Send it with any
    producer's ``send``.

    Args:
        request_msg: the request as received by a consumer.
        body: the reply payload (bytes; a ``str`` is encoded as UTF-8).

    Raises:
        IllegalArgumentError: ``request_msg`` is None or has no ``CLUSTER`` property (it was
            not received from a broker), as Java's ``CREATE_REPLY_MESSAGE_EXCEPTION``.
    """
    if request_msg is None:
        raise IllegalArgumentError("create reply message fail, requestMessage cannot be null.")
    cluster = request_msg.get_property(MC.CLUSTER)
    if not cluster:
        raise IllegalArgumentError(
            f"create reply message fail, requestMessage error, property[{MC.CLUSTER}] is null.")
    reply = Message(reply_topic(cluster), body)
    del reply.properties[MC.WAIT_STORE_MSG_OK]  # Java's reply is a bare ``new Message()``: no WAIT
    reply.put_property(MC.MESSAGE_TYPE, REPLY_MESSAGE_FLAG)
    for name in (MC.CORRELATION_ID, MC.MESSAGE_REPLY_TO_CLIENT, MC.MESSAGE_TTL):
        value = request_msg.get_property(name)
        if value is not None:
            reply.put_property(name, value)
    return reply


def get_reply_to_client(msg: Message) -> str | None:
    """The requesting client id of a request message (Java ``MessageUtil.getReplyToClient``)."""
    return msg.get_property(MC.MESSAGE_REPLY_TO_CLIENT)


class RequestResponseFuture:
    """One request waiting for its reply (Java ``RequestResponseFuture``).

    Attributes:
        correlation_id: the request's ``CORRELATION_ID``.
        topic: the request's topic.
        timeout_ms: the request timeout, ms.
        future: ``concurrent.futures.Future`` of the reply ``MessageExt``.
        send_ok: True once the broker accepted the request message.
    """

    __slots__ = ("correlation_id", "topic", "timeout_ms", "begin", "future", "send_ok", "_timer")

    def __init__(self, correlation_id: str, topic: str, timeout_ms: float) -> None:
        self.correlation_id = correlation_id
        self.topic = topic
        self.timeout_ms = timeout_ms
        self.begin = time.monotonic()
        self.future: concurrent.futures.Future[MessageExt] = concurrent.futures.Future()
        self.send_ok = False
        self._timer: asyncio.TimerHandle | None = None

    def put_response(self, msg: MessageExt) -> None:
        """Complete with the reply (called on the I/O loop by the 326 processor)."""
        self._settle(result=msg)

    def fail(self, exc: BaseException) -> None:
        """Complete with an error (send failure or timeout)."""
        self._settle(error=exc)

    def timeout_error(self) -> RequestTimeoutError:
        return RequestTimeoutError(self.topic, self.timeout_ms, self.correlation_id, sent=self.send_ok)

    def expire(self) -> None:
        """Fail with :class:`RequestTimeoutError` unless already completed (loop timer)."""
        self._timer = None
        if not self.future.done():
            self.fail(self.timeout_error())

    def _settle(self, result: MessageExt | None = None, error: BaseException | None = None) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        try:
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(result)  # type: ignore[arg-type]
        except concurrent.futures.InvalidStateError:
            pass  # lost the race against the timeout or a late reply: the first outcome stands


# Java ``RequestFutureTable``: one table per process, keyed by correlation id (a random UUID).
_futures: dict[str, RequestResponseFuture] = {}
_futures_lock = threading.Lock()


def register_request(rr: RequestResponseFuture) -> None:
    """Make ``rr`` the waiter of its correlation id (the 326 processor completes it)."""
    with _futures_lock:
        _futures[rr.correlation_id] = rr


def unregister_request(correlation_id: str) -> RequestResponseFuture | None:
    """Remove and return the waiter of ``correlation_id`` (None if there is none)."""
    with _futures_lock:
        return _futures.pop(correlation_id, None)


def pending_request_count() -> int:
    """Requests of this process still waiting for a reply."""
    return len(_futures)


def _host(addr: str | None) -> str:
    """``ip:port`` as 4.9.8 sends it; a ``/ip:port`` (``SocketAddress.toString``) is tolerated."""
    if not addr:
        return ""
    return addr.rpartition("/")[2]


def decode_reply_message(cmd: RemotingCommand, arrive_time_ms: int | None = None) -> MessageExt:
    """The reply carried by a PUSH_REPLY_MESSAGE_TO_CLIENT request: header fields, body
    (inflated when the COMPRESSED sysFlag is set) and properties plus ``ARRIVE_TIME``."""
    h = ReplyMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    body = cmd.body or b""
    sys_flag = h.sys_flag or 0
    if sys_flag & MessageSysFlag.COMPRESSED:
        try:
            body = deflate.decompress(body)
        except deflate.ERRORS:
            log.warning("reply message body does not inflate; passed on as is")
    props = decode_properties(h.properties or "")
    props[MC.REPLY_MESSAGE_ARRIVE_TIME] = str(arrive_time_ms if arrive_time_ms is not None
                                              else int(time.time() * 1000))
    return MessageExt(topic=h.topic or "", queue_id=h.queue_id or 0, store_timestamp=h.store_timestamp or 0,
                      born_host=_host(h.born_host), store_host=_host(h.store_host), body=body,
                      flag=h.flag or 0, properties=props, born_timestamp=h.born_timestamp or 0,
                      reconsume_times=h.reconsume_times or 0, sys_flag=sys_flag)


def receive_reply_message(channel: Any, cmd: RemotingCommand) -> RemotingCommand:
    """Processor of PUSH_REPLY_MESSAGE_TO_CLIENT (326) on the client instance's connections:
    completes the waiting request by ``CORRELATION_ID``; an unmatched reply (late, or for
    another process) is logged. Answers SUCCESS, or SYSTEM_ERROR ``process reply message fail``
    when the frame cannot be read (as Java)."""
    arrive = int(time.time() * 1000)
    try:
        msg = decode_reply_message(cmd, arrive)
    except Exception:
        log.warning("unreadable reply message from %s", getattr(channel, "remote_addr", "?"), exc_info=True)
        return cmd.response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
    correlation_id = msg.get_property(MC.CORRELATION_ID) or ""
    rr = unregister_request(correlation_id)
    if rr is None:
        log.warning("receive reply message, but not matched any request, CorrelationId: %s, reply from host: %s",
                    correlation_id, msg.born_host)
    else:
        rr.put_response(msg)
    return cmd.response(ResponseCode.SUCCESS)


class RequestReplyMixin:
    """``request`` / ``request_async`` / ``arequest`` / ``reply`` of :class:`Producer`."""

    if TYPE_CHECKING:  # provided by Producer
        config: ProducerConfig

        def _running(self) -> MQClientInstance: ...
        def _inst(self) -> MQClientInstance: ...
        def _wrap(self, topic: str) -> str: ...
        async def _find_publish_info(self, topic: str) -> Any: ...
        def _callback_pool(self) -> concurrent.futures.ThreadPoolExecutor: ...
        def send(self, msg: Message, selector: SelectorLike | None = None, arg: Any = None, *,
                 mq: MessageQueue | None = None, timeout_ms: float | None = None) -> SendResult: ...
        def send_async(self, msg: Message, callback: Any = None, selector: SelectorLike | None = None,
                       arg: Any = None, *, mq: MessageQueue | None = None,
                       timeout_ms: float | None = None) -> concurrent.futures.Future[SendResult]: ...

    def _async_requests(self) -> set[RequestResponseFuture]:
        pending = self.__dict__.get("_pending_requests")
        if pending is None:
            pending = self.__dict__["_pending_requests"] = set()
        return pending

    def _abandon_requests(self) -> None:
        """At shutdown: fail the ``request_async`` futures still waiting (their timers lived on
        the client's I/O loop, which stops) with ``ClientStateError``."""
        pending = self._async_requests()
        for rr in list(pending):
            rr.fail(ClientStateError(f"producer shut down while request {rr.correlation_id} to <{rr.topic}> "
                                     "waited for its reply"))
        pending.clear()

    def _reply_ready_topics(self) -> set[str]:
        ready = self.__dict__.get("_reply_ready")
        if ready is None:
            ready = self.__dict__["_reply_ready"] = set()
        return ready

    def _new_request(self, inst: MQClientInstance, msg: Message, timeout_ms: float) -> RequestResponseFuture:
        """Java ``prepareSendRequest``: the three properties, and the waiter registered."""
        if not isinstance(msg, Message):
            raise IllegalArgumentError(f"expected a Message, got {type(msg).__name__}")
        if timeout_ms <= 0:
            raise IllegalArgumentError(f"request timeout must be positive, got {timeout_ms} ms")
        correlation_id = str(uuid.uuid4())
        msg.put_property(MC.CORRELATION_ID, correlation_id)
        msg.put_property(MC.MESSAGE_REPLY_TO_CLIENT, inst.client_id)
        msg.put_property(MC.MESSAGE_TTL, str(int(timeout_ms)))
        rr = RequestResponseFuture(correlation_id, msg.topic, timeout_ms)
        register_request(rr)
        return rr

    async def _prepare_reply_path(self, topic: str) -> None:
        """First request to ``topic``: its route, then a heartbeat to every broker so that the
        broker replying knows this client's connection (Java does both when the topic has no
        route yet)."""
        ready = self._reply_ready_topics()
        if topic in ready:
            return
        inst = self._inst()
        await self._find_publish_info(topic)
        await inst.send_heartbeat_to_all()
        ready.add(topic)

    def request(self, msg: Message, timeout_ms: float | None = None, selector: SelectorLike | None = None,
                arg: Any = None, *, mq: MessageQueue | None = None) -> MessageExt:
        """Send ``msg`` as a request and wait for its reply (Java ``DefaultMQProducer.request``).

        A consumer of the topic answers with ``producer.send(create_reply_message(msg, body))``
        (or :meth:`reply`); the broker pushes the reply back to this client.

        Args:
            msg: the request (``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and ``TTL`` are set on it).
            timeout_ms: time for the send and the reply together, ms (default
                ``send_msg_timeout``); also sent as ``TTL``.
            selector, arg: ordered send to the queue the selector picks, as :meth:`send`.
            mq: send the request to this queue (Java ``request(msg, mq, timeout)``).

        Returns:
            the reply, a ``MessageExt`` (``body``, ``properties`` with ``ARRIVE_TIME``...).

        Raises:
            RequestTimeoutError: no reply within ``timeout_ms``.
            IllegalArgumentError, ClientStateError, TopicNotExistError, MQBrokerError,
            RemotingError: the request message could not be sent (as :meth:`send`).
        """
        inst = self._running()
        timeout = self.config.send_msg_timeout if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + timeout / 1000.0
        rr = self._new_request(inst, msg, timeout)
        try:
            topic = self._wrap(msg.topic)
            if topic not in self._reply_ready_topics():
                inst.run(self._prepare_reply_path(topic), timeout / 1000.0)
            remaining_ms = (deadline - time.monotonic()) * 1000.0
            if remaining_ms <= 0:
                raise rr.timeout_error()
            self.send(msg, selector, arg, mq=mq, timeout_ms=remaining_ms)
            rr.send_ok = True
            try:
                return rr.future.result(max(0.0, deadline - time.monotonic()))
            except concurrent.futures.TimeoutError:
                if not rr.future.done():
                    raise rr.timeout_error() from None
                return rr.future.result()
        finally:
            unregister_request(rr.correlation_id)

    def request_async(self, msg: Message, timeout_ms: float | None = None, selector: SelectorLike | None = None,
                      arg: Any = None, callback: RequestCallback | None = None, *, mq: MessageQueue | None = None
                      ) -> concurrent.futures.Future[MessageExt]:
        """Start a request and return at once (Java ``request(msg, RequestCallback, timeout)``).

        Args:
            msg, timeout_ms, selector, arg, mq: as :meth:`request`.
            callback: ``callback(reply, error)`` called once, on the producer's callback threads
                (never the I/O thread).

        Returns:
            a ``concurrent.futures.Future`` of the reply; it fails with
            :class:`RequestTimeoutError` after ``timeout_ms``, with the send's error, or with
            ``ClientStateError`` when the producer shuts down first.

        Raises:
            IllegalArgumentError, ClientStateError: before anything is sent.
        """
        inst = self._running()
        timeout = self.config.send_msg_timeout if timeout_ms is None else timeout_ms
        rr = self._new_request(inst, msg, timeout)
        pending = self._async_requests()
        pending.add(rr)

        def finished(_f: concurrent.futures.Future) -> None:
            unregister_request(rr.correlation_id)
            pending.discard(rr)

        rr.future.add_done_callback(finished)
        if callback is not None:
            pool = self._callback_pool()
            rr.future.add_done_callback(lambda f: pool.submit(run_callback, callback, f, "request"))
        try:
            inst.loop_thread.submit(self._request_core(rr, msg, selector, arg, mq))
        except BaseException as exc:
            rr.fail(exc)
            raise
        return rr.future

    async def _request_core(self, rr: RequestResponseFuture, msg: Message, selector: SelectorLike | None,
                            arg: Any, mq: MessageQueue | None) -> None:
        """On the I/O loop: arm the timeout, prepare the reply path, send; failures go to ``rr``."""
        remaining_s = rr.timeout_ms / 1000.0 - (time.monotonic() - rr.begin)
        rr._timer = asyncio.get_running_loop().call_later(max(0.0, remaining_s), rr.expire)
        try:
            await self._prepare_reply_path(self._wrap(msg.topic))
            remaining_ms = rr.timeout_ms - (time.monotonic() - rr.begin) * 1000.0
            if remaining_ms <= 0:
                rr.expire()
                return
            send = self.send_async(msg, None, selector, arg, mq=mq,
                                   timeout_ms=remaining_ms)
            await asyncio.wrap_future(send)
            rr.send_ok = True
        except Exception as exc:
            rr.fail(exc)

    async def arequest(self, msg: Message, timeout_ms: float | None = None, selector: SelectorLike | None = None,
                       arg: Any = None, *, mq: MessageQueue | None = None) -> MessageExt:
        """:meth:`request` from asyncio code: ``reply = await producer.arequest(msg)``; the
        awaiting loop is never blocked. Same arguments and errors as :meth:`request_async`."""
        return await asyncio.wrap_future(self.request_async(msg, timeout_ms, selector, arg, mq=mq))

    def reply(self, request_msg: Message, body: bytes | str, *, timeout_ms: float | None = None) -> SendResult:
        """Answer ``request_msg`` (received by a consumer) with ``body``:
        ``send(create_reply_message(request_msg, body))``, which goes out as
        SEND_REPLY_MESSAGE_V2 (325).

        Raises:
            IllegalArgumentError: ``request_msg`` has no ``CLUSTER`` property.
            MQBrokerError: the broker could not push the reply (code 1, e.g. the requester is
                gone: ``push reply message fail, channel of <clientId> not found.``).
            ClientStateError, RemotingError: as :meth:`send`.
        """
        return self.send(create_reply_message(request_msg, body), timeout_ms=timeout_ms)
