"""``Producer``: sends messages to RocketMQ brokers (Java ``DefaultMQProducer``).

The sync methods prepare the message in the caller's thread (validation, ``UNIQ_KEY``,
compression, the V2 header) and run the network part on the client instance's event loop, so
many threads can send at once over one connection per broker with many requests in flight.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_none

from ..client.instance import MQClientInstance, get_client_instance, release_client_instance
from ..client.route import TopicPublishInfo
from ..config import ProducerConfig
from ..exceptions import (
    ClientStateError,
    IllegalArgumentError,
    MQBrokerError,
    RemotingError,
    RemotingTimeoutError,
    TopicNotExistError,
)
from ..protocol.codes import (
    GROUP_MAX_LENGTH,
    RequestCode,
    ResponseCode,
    check_name,
    is_not_allowed_send_topic,
    is_retry_topic,
)
from ..protocol.codes import MessageConst as MC
from ..protocol.codes import MessageSysFlag as SF
from ..protocol.message import Message, MessageQueue, SendResult
from ..protocol.message_codec import encode_batch, encode_properties
from ..protocol.msgid import create_uniq_id
from .selector import SelectorLike

__all__ = ["Producer", "RETRY_RESPONSE_CODES"]

log = logging.getLogger("rocketmq_sdk.producer")

#: Broker codes after which Java's sync send retries (another queue, avoiding the failed broker).
RETRY_RESPONSE_CODES = frozenset({ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE,
                                  ResponseCode.SYSTEM_ERROR, ResponseCode.NO_PERMISSION,
                                  ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT})


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, MQBrokerError):
        return exc.code in RETRY_RESPONSE_CODES
    return isinstance(exc, RemotingError)


@dataclass(slots=True)
class _Prepared:
    """A message ready for the wire: V2 header (without queue/broker), body and id."""

    topic: str
    ext: dict[str, str]
    body: bytes
    uniq_id: str
    code: int = RequestCode.SEND_MESSAGE_V2


class Producer:
    """A message producer.

    Args:
        group: producer group (``^[%|a-zA-Z0-9_-]+$``, ≤ 255 characters).
        namesrv_addr: name server list ``"host:port;host:port"``.
        **config: any :class:`rocketmq_sdk.config.ProducerConfig` setting (``send_msg_timeout``,
            ``retry_times_when_send_failed``, ``compress_msg_body_over_howmuch``,
            ``max_message_size``, ``instance_name``...).

    Raises:
        IllegalArgumentError: illegal group name or unknown setting.

    Use as a context manager or call ``start()`` / ``shutdown()``.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, **config: Any) -> None:
        self.group = check_name(group, "producer group", GROUP_MAX_LENGTH)
        self.config = ProducerConfig.from_kwargs(namesrv_addr=namesrv_addr, **config)
        self._publish: dict[str, TopicPublishInfo] = {}
        self._instance: MQClientInstance | None = None
        self._state_lock = threading.Lock()
        self._state = "CREATED"

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
            if not self.config.namesrv_addr_list:
                raise ClientStateError("namesrv_addr is not set")
            inst = get_client_instance(self.config)
            inst.register_producer(self)
            try:
                inst.run(inst.start(), self.config.mq_client_api_timeout / 1000.0)
            except BaseException:
                inst.producers.pop(self.group, None)
                release_client_instance(inst)
                raise
            self._instance = inst
            self._state = "RUNNING"
        log.info("producer %s started (client %s)", self.group, inst.client_id)

    def shutdown(self) -> None:
        """Unregister from the brokers and release the client instance. Idempotent."""
        with self._state_lock:
            if self._state != "RUNNING":
                self._state = "SHUTDOWN"
                return
            self._state = "SHUTDOWN"
            inst, self._instance = self._instance, None
        assert inst is not None
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
        inst = self._instance
        if inst is None or self._state != "RUNNING":
            raise ClientStateError(f"producer {self.group} is not running ({self._state}); call start()")
        return inst

    # -------------------------------------------------------------- ProducerInner (instance side)

    def publish_topics(self) -> list[str]:
        return list(self._publish)

    def update_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
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
        timeout = self.config.send_msg_timeout if timeout_ms is None else timeout_ms
        prepared = self._prepare(msg)
        if selector is not None and mq is None:
            info = self._publish.get(msg.topic)
            if info is None or not info.ok:
                info = inst.run(self._find_publish_info(msg.topic), timeout / 1000.0)
            mq = self._select(selector, info.queues, msg, arg)
        coro = self._send_prepared(prepared, mq, timeout)
        return inst.run(coro, timeout / 1000.0 + 1.0)

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
        return inst.run(self._send_prepared(prepared, mq, timeout), timeout / 1000.0 + 1.0)

    async def send_async(self, msg: Message, selector: SelectorLike | None = None, arg: Any = None, *,
                         mq: MessageQueue | None = None, timeout_ms: float | None = None) -> SendResult:
        """Coroutine form of :meth:`send`; await it on the client instance's loop
        (``producer.instance.loop_thread.loop``)."""
        self._running()
        timeout = self.config.send_msg_timeout if timeout_ms is None else timeout_ms
        prepared = self._prepare(msg)
        if selector is not None and mq is None:
            info = await self._find_publish_info(msg.topic)
            mq = self._select(selector, info.queues, msg, arg)
        return await self._send_prepared(prepared, mq, timeout)

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
        check_name(topic, "topic")
        if is_not_allowed_send_topic(topic):
            raise IllegalArgumentError(f"sending a message to topic {topic} is forbidden")
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
                "e": "0", "f": str(sys_flag), "g": str(int(time.time() * 1000)), "h": str(flag),
                "i": properties, "j": "0", "k": "false", "m": "true" if batch else "false"}

    def _prepare(self, msg: Message) -> _Prepared:
        """Validate and build the V2 header and the (possibly compressed) body."""
        cfg = self.config
        uniq_id = self._check_message(msg)
        topic, body, props = msg.topic, msg.body, msg.properties
        sys_flag = 0
        if len(body) >= cfg.compress_msg_body_over_howmuch:
            body = zlib.compress(body, cfg.compress_level)
            sys_flag |= SF.COMPRESSED
        if props.get(MC.TRANSACTION_PREPARED) == "true":
            sys_flag |= SF.TRANSACTION_PREPARED_TYPE
        ext = self._header(topic, sys_flag, msg.flag, encode_properties(props), False)
        if is_retry_topic(topic):
            ext["j"] = props.get(MC.RECONSUME_TIME, "0")
            max_times = props.get(MC.MAX_RECONSUME_TIMES)
            if max_times:
                ext["l"] = max_times
        return _Prepared(topic, ext, body, uniq_id)

    def _prepare_batch(self, msgs: Sequence[Message]) -> _Prepared:
        """Java ``MessageBatch.generateFromList`` + checks: one topic, no delay, no retry topic,
        one ``WAIT`` value; each message gets its ``UNIQ_KEY``; the batch is never compressed."""
        msgs = list(msgs)
        if not msgs:
            raise IllegalArgumentError("the batch is empty")
        first = msgs[0]
        ids = []
        for m in msgs:
            ids.append(self._check_message(m))
            if m.topic != first.topic:
                raise IllegalArgumentError("the topic of the messages in one batch should be the same")
            if m.delay_time_level > 0:
                raise IllegalArgumentError("delayed messages are not supported in batches")
            if is_retry_topic(m.topic):
                raise IllegalArgumentError("retry group topics are not supported in batches")
            if m.wait_store_msg_ok != first.wait_store_msg_ok:
                raise IllegalArgumentError("the waitStoreMsgOK of the messages in one batch should be the same")
        body = encode_batch(msgs)
        if len(body) > self.config.max_message_size:
            raise IllegalArgumentError(
                f"the batch body size {len(body)} exceeds max_message_size {self.config.max_message_size}")
        props = encode_properties({MC.WAIT_STORE_MSG_OK: "true" if first.wait_store_msg_ok else "false"})
        ext = self._header(first.topic, 0, 0, props, True)
        return _Prepared(first.topic, ext, body, ",".join(ids), RequestCode.SEND_BATCH_MESSAGE)

    # -------------------------------------------------------------- core (event loop)

    async def _find_publish_info(self, topic: str) -> TopicPublishInfo:
        """Cached publish info, else the topic's route, else the default topic's (TBW102).

        Raises:
            TopicNotExistError: neither route exists.
        """
        info = self._publish.get(topic)
        if info is not None and info.ok:
            return info
        inst = self._running()
        self._publish.setdefault(topic, TopicPublishInfo(topic, []))
        await inst.update_topic_route(topic)
        info = self._publish[topic]
        if not info.ok:
            await inst.update_topic_route(topic, default_topic=self.config.create_topic_key,
                                          default_queue_nums=self.config.default_topic_queue_nums)
            info = self._publish[topic]
        if not info.ok:
            raise TopicNotExistError(ResponseCode.TOPIC_NOT_EXIST, f"no route info of topic {topic}")
        return info

    async def _send_prepared(self, p: _Prepared, mq: MessageQueue | None, timeout_ms: float) -> SendResult:
        deadline = time.monotonic() + timeout_ms / 1000.0
        if mq is not None:
            return await self._send_to(mq, p, deadline, timeout_ms)
        info = await self._find_publish_info(p.topic)
        mq = info.select_one_queue(None)
        attempts = 1 + max(0, self.config.retry_times_when_send_failed)
        try:  # fast path: the first attempt without building a retry controller
            return await self._send_to(mq, p, deadline, timeout_ms)
        except Exception as exc:
            if attempts == 1 or not _retryable(exc):
                raise
            log.debug("send of %s to %s failed (%s); retrying", p.uniq_id, mq, exc)
            last_broker = mq.broker_name
        retrying = AsyncRetrying(stop=stop_after_attempt(attempts - 1), wait=wait_none(),
                                 retry=retry_if_exception(_retryable), reraise=True)
        async for attempt in retrying:
            with attempt:
                mq = info.select_one_queue(last_broker)
                try:
                    return await self._send_to(mq, p, deadline, timeout_ms)
                except Exception as exc:
                    last_broker = mq.broker_name
                    log.debug("send of %s to %s failed (%s)", p.uniq_id, mq, exc)
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _send_to(self, mq: MessageQueue, p: _Prepared, deadline: float, timeout_ms: float) -> SendResult:
        remaining = (deadline - time.monotonic()) * 1000.0
        if remaining <= 0:
            raise RemotingTimeoutError(mq.broker_name, timeout_ms, "send")
        inst = self._running()
        addr = inst.find_broker_master(mq.broker_name)
        if addr is None:
            addr = await inst.find_broker_master_or_refresh(mq.broker_name, p.topic)
            if addr is None:
                raise MQBrokerError(ResponseCode.SERVICE_NOT_AVAILABLE,
                                    f"no master address for broker {mq.broker_name}")
        ext = dict(p.ext)
        ext["e"] = str(mq.queue_id)
        ext["n"] = mq.broker_name
        return await inst.api.send_message(addr, mq, ext, p.body, p.uniq_id, remaining, code=p.code)

    # -------------------------------------------------------------- misc

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of ``topic`` (route lookup with the TBW102 fallback).

        Raises:
            ClientStateError, TopicNotExistError, RemotingError.
        """
        inst = self._running()
        return list(inst.run(self._find_publish_info(topic), self.config.mq_client_api_timeout / 1000.0).queues)

    def __repr__(self) -> str:
        return f"Producer(group={self.group!r}, state={self._state})"
