"""ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue and
QueryAssignment of the proxy, on the brokers' 5.x POP service (POP_MESSAGE, ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME over remoting; the broker holds a POP for its long polling).

The receipt handle a 5.x client gets is the broker's (``rocketmq_sdk.protocol.pop.ReceiptHandle``,
eight fields) followed by the message's CommitLog offset, which ForwardMessageToDeadLetterQueue
needs (CONSUMER_SEND_MSG_BACK). A handle is checked before it names a broker: its broker must be
one of the topic's route.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from rocketmq_sdk.client.mq_client_api import MQClientAPI
from rocketmq_sdk.exceptions import FrameError, RemotingError
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.grpc.convert import set_timestamp_ms, to_v2
from rocketmq_sdk.grpc.service import CLIENT_ID
from rocketmq_sdk.protocol.admin_bodies import SubscriptionGroupWrapper
from rocketmq_sdk.protocol.bodies import SubscriptionData
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import ConsumerSendMsgBackRequestHeader
from rocketmq_sdk.protocol.message_codec import decode_messages
from rocketmq_sdk.protocol.pop import (
    MAX_POP_MESSAGES,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    ReceiptHandle,
    RetryFlag,
    parse_offset_infos,
)
from rocketmq_sdk.remoting import RemotingCommand

from .checks import group_name, topic_name
from .renew import Held, Renewals
from .routes import Route, RouteCache
from .status import ProxyError, from_remoting, status

log = logging.getLogger("rocketmq_broker.proxy")

POP_CK = "POP_CK"
#: invisible time of a received message, ms (Apache's proxy allows 10 s .. 12 h; 1 s here, for tests)
MIN_INVISIBLE_MS = 1_000
MAX_INVISIBLE_MS = 12 * 3_600_000
#: invisible time of a push consumer's messages (auto_renew, no duration given), ms, renewed this
#: long before it ends while the client holds them (Apache's proxy: 60 s, 10 s)
DEFAULT_INVISIBLE_MS = 60_000
RENEW_AHEAD_MS = 10_000
#: longest long polling of one ReceiveMessage, ms, and the default
MAX_POLLING_MS = 30_000
DEFAULT_POLLING_MS = 20_000
INIT_MODE_MAX = 1  # a group's first POP of a queue starts at its end (at 0 while it starts at 0)


#: Apache RocketMQ 5's default group retry policy (``CustomizedRetryPolicy``: the delay levels 1 s
#: ... 2 h) and attempts (``retryMaxTimes`` 16, + 1), given to push consumers in their settings
CONSUMER_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
CONSUMER_MAX_ATTEMPTS = 17


#: how long the proxy uses a broker's subscription-group table before asking again, s
GROUP_CONFIG_TTL_S = 3.0


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """What the proxy tells a group's consumers of its broker-side settings."""

    orderly: bool = False  # 5.x consumeMessageOrderly: a FIFO group
    retry_max_times: int = CONSUMER_MAX_ATTEMPTS - 1


def consumer_retry_policy(policy: Any, group: GroupSettings) -> None:
    """Fill the ``v2.RetryPolicy`` of a consumer's Settings answer as Apache's proxy does for a
    group with the default retry policy: customized backoff, ``retryMaxTimes`` + 1 attempts (a
    push consumer makes a failed message invisible for the step of its attempt, and forwards it
    to the DLQ after the last one)."""
    policy.Clear()
    policy.max_attempts = max(1, group.retry_max_times + 1)
    for seconds in CONSUMER_BACKOFF_S:
        policy.customized_backoff.next.add(seconds=seconds)


@dataclass(frozen=True, slots=True)
class Handle:
    """A 5.x client's receipt handle: the broker's handle and the message's CommitLog offset."""

    pop: ReceiptHandle
    commit_log_offset: int

    def __str__(self) -> str:
        return f"{self.pop} {self.commit_log_offset}"

    @classmethod
    def parse(cls, text: str) -> Handle:
        """Raises ProxyError INVALID_RECEIPT_HANDLE for anything else."""
        head, _, tail = text.rpartition(" ")
        try:
            return cls(ReceiptHandle.parse(head), int(tail))
        except ValueError as exc:
            raise ProxyError(v2.INVALID_RECEIPT_HANDLE, f"illegal receipt handle: {exc}") from None


def _ms(duration: Any) -> int:
    return int(duration.seconds) * 1000 + int(duration.nanos) // 1_000_000


def long_polling_ms(req: Any, context: Any) -> int:
    """The long polling of a ReceiveMessage / PullMessage request, ms (``DEFAULT_POLLING_MS`` when
    not given), shortened so that the answer beats the call's deadline by 1 s.

    Raises:
        ProxyError: ILLEGAL_POLLING_TIME outside 0 .. ``MAX_POLLING_MS``.
    """
    polling = _ms(req.long_polling_timeout) if req.HasField("long_polling_timeout") else DEFAULT_POLLING_MS
    if not 0 <= polling <= MAX_POLLING_MS:
        raise ProxyError(v2.ILLEGAL_POLLING_TIME, f"long polling timeout {polling} ms is not within "
                                                  f"0..{MAX_POLLING_MS}")
    remaining = context.time_remaining()
    if remaining is not None:  # answer before the client's deadline
        polling = max(0, min(polling, int(remaining * 1000) - 1000))
    return polling


class Consuming:
    """The receive-side handlers (run on the proxy's loop)."""

    def __init__(self, api: MQClientAPI, routes: RouteCache, timeout_ms: float = 3000.0,
                 auto_renew_ms: tuple[int, int] = (DEFAULT_INVISIBLE_MS, RENEW_AHEAD_MS)) -> None:
        self.api = api
        self.routes = routes
        self.timeout_ms = timeout_ms
        self._groups: dict[tuple[str, str], tuple[float, GroupSettings]] = {}
        #: the messages of ``auto_renew`` receives kept invisible while their clients hold them
        self.renewals = Renewals(self._renew, *auto_renew_ms)

    async def _renew(self, held: Held, invisible_ms: int) -> str:
        route = await self.routes.get(held.topic)
        return str(await self._change(route, held.group, held.topic, Handle.parse(held.handle), invisible_ms))

    async def group_settings(self, group: str, topic: str) -> GroupSettings:
        """The group's settings on the first master of ``topic``'s route
        (GET_ALL_SUBSCRIPTIONGROUP_CONFIG, cached ``GROUP_CONFIG_TTL_S``); the defaults when the
        broker does not know the group yet (it is auto-created with them).

        Raises:
            ProxyError: the topic has no route; PROXY_TIMEOUT when the broker does not answer.
        """
        route = await self.routes.get(topic)
        addr = next(iter(route.masters.values()), None)
        if addr is None:
            return GroupSettings()
        cached = self._groups.get((addr, group))
        now = time.monotonic()
        if cached is not None and now - cached[0] < GROUP_CONFIG_TTL_S:
            return cached[1]
        resp = await self._invoke(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}, self.timeout_ms)
        if resp.code != ResponseCode.SUCCESS:
            raise ProxyError(from_remoting(resp.code), resp.remark or "reading the group's settings failed")
        try:
            table = SubscriptionGroupWrapper.from_json(resp.body).subscription_group_table
        except ValueError as exc:
            raise ProxyError(v2.INTERNAL_SERVER_ERROR, f"unreadable subscription groups of {addr}: {exc}") from None
        for name, cfg in table.items():
            self._groups[(addr, name)] = (now, GroupSettings(bool(cfg.consume_message_orderly), cfg.retry_max_times))
        settings = self._groups.setdefault((addr, group), (now, GroupSettings()))[1]
        return settings

    def _broker_addr(self, route: Route, broker_name: str) -> str:
        addr = route.masters.get(broker_name)
        if addr is None:
            raise ProxyError(v2.INVALID_RECEIPT_HANDLE if broker_name else v2.BAD_REQUEST,
                             f"broker {broker_name[:100]!r} serves no queue of topic {route.topic}")
        return addr

    async def _invoke(self, addr: str, code: int, ext: dict[str, str], timeout_ms: float) -> RemotingCommand:
        try:
            return await self.api.remoting.invoke(addr, RemotingCommand.request(code, ext), timeout_ms)
        except RemotingError as exc:
            raise ProxyError(v2.PROXY_TIMEOUT, f"broker {addr} did not answer: {exc}") from None

    async def subscription_group(self, settings: Any) -> GroupSettings | None:
        """The group settings of a consumer's Telemetry ``Settings`` (its group on the broker of
        its first subscribed topic); None for a producer, or when they cannot be read now (the
        client then gets the defaults and the next settings sync corrects them)."""
        if settings.WhichOneof("pub_sub") != "subscription" or not settings.subscription.subscriptions:
            return None
        try:
            return await self.group_settings(group_name(settings.subscription.group),
                                             topic_name(settings.subscription.subscriptions[0].topic))
        except ProxyError as exc:
            log.info("settings of group %s not read: %s", settings.subscription.group.name[:100], exc.message)
            return None

    # -- ReceiveMessage ---------------------------------------------------------------------
    async def receive(self, req: Any, context: Any) -> AsyncIterator[Any]:
        group = group_name(req.group)
        topic = topic_name(req.message_queue.topic)
        batch = req.batch_size or 1
        if not 1 <= batch <= MAX_POP_MESSAGES:
            raise ProxyError(v2.BAD_REQUEST, f"batch size {batch} is not within 1..{MAX_POP_MESSAGES}")
        renew = req.auto_renew and not req.HasField("invisible_duration")
        invisible = _ms(req.invisible_duration) if req.HasField("invisible_duration") else (
            self.renewals.invisible_ms if req.auto_renew else 0)
        if not MIN_INVISIBLE_MS <= invisible <= MAX_INVISIBLE_MS:
            raise ProxyError(v2.ILLEGAL_INVISIBLE_TIME,
                             f"invisible duration {invisible} ms is not within {MIN_INVISIBLE_MS}..{MAX_INVISIBLE_MS}")
        polling = long_polling_ms(req, context)
        exp_type, exp = "TAG", "*"
        if req.filter_expression.expression:
            exp = req.filter_expression.expression
            exp_type = "SQL92" if req.filter_expression.type == v2.SQL else "TAG"
        route = await self.routes.get(topic)
        broker = req.message_queue.broker.name or next(iter(route.masters), "")
        addr = self._broker_addr(route, broker)
        fifo = (await self.group_settings(group, topic)).orderly  # as Apache's proxy: the group decides
        header = PopMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=-1, max_msg_nums=batch, invisible_time=invisible,
            poll_time=polling, born_time=int(time.time() * 1000), init_mode=INIT_MODE_MAX, exp_type=exp_type,
            exp=exp, order=fifo, attempt_id=req.attempt_id or None, bname=broker)
        resp = await self._invoke(addr, RequestCode.POP_MESSAGE, header.to_ext_fields(), polling + self.timeout_ms)
        if resp.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.NO_MESSAGE, ResponseCode.PULL_NOT_FOUND):
            yield v2.ReceiveMessageResponse(status=status(v2.MESSAGE_NOT_FOUND, "no new message"))
            return
        if resp.code != ResponseCode.SUCCESS:
            code = v2.BAD_REQUEST if resp.code == ResponseCode.INVALID_PARAMETER else from_remoting(resp.code)
            yield v2.ReceiveMessageResponse(status=status(code, resp.remark or "pop failed"))
            return
        messages = await self._deliverable(route, group, topic, exp_type, exp,
                                           self._popped(req.message_queue.topic, broker, resp))
        if not messages:
            yield v2.ReceiveMessageResponse(status=status(v2.MESSAGE_NOT_FOUND, "no new message"))
            return
        if renew:
            client_id = next((v for k, v in context.invocation_metadata() or () if k == CLIENT_ID), "")
            for m in messages:
                handle = m.system_properties.receipt_handle
                self.renewals.track(handle, group, topic, client_id, invisible,
                                    popped_ms=Handle.parse(handle).pop.pop_time)
        yield v2.ReceiveMessageResponse(status=status())
        now = v2.ReceiveMessageResponse()
        set_timestamp_ms(now.delivery_timestamp, int(time.time() * 1000))
        yield now
        for m in messages:
            yield v2.ReceiveMessageResponse(message=m)

    async def _deliverable(self, route: Route, group: str, topic: str, exp_type: str, exp: str,
                           messages: list[Any]) -> list[Any]:
        """Apache's proxy's filter of popped messages: a tag that only shares its hash code with
        a subscribed one is acknowledged unseen; a message whose reconsume times reached the
        group's max attempts (``retryMaxTimes`` + 1) goes to the DLQ instead of the client."""
        tags = SubscriptionData.build(topic, exp, 0).tags_set if exp_type == "TAG" else set()
        max_attempts = (await self.group_settings(group, topic)).retry_max_times + 1
        out = []
        for m in messages:
            sp = m.system_properties
            handle = Handle.parse(sp.receipt_handle)
            try:
                if tags and sp.tag not in tags:
                    await self._ack_one(route, group, topic, handle.pop)
                elif sp.delivery_attempt - 1 >= max_attempts:
                    await self._to_dlq(route, group, topic, handle, sp.message_id, max_attempts)
                    log.info("group %s: message %s reached %d attempts; forwarded to the dead letter queue",
                             group, sp.message_id, max_attempts)
                else:
                    out.append(m)
            except ProxyError as exc:  # not settled: it comes back after its invisible time
                log.warning("group %s: settling filtered message %s failed: %s", group, sp.message_id, exc.message)
        return out

    @staticmethod
    def _popped(topic_resource: Any, broker: str, resp: RemotingCommand) -> list[Any]:
        h = PopMessageResponseHeader.from_ext_fields(resp.ext_fields)
        try:
            starts = parse_offset_infos(resp.ext_fields.get("startOffsetInfo"))
            msgs = decode_messages(resp.body)
        except (ValueError, FrameError) as exc:
            raise ProxyError(v2.INTERNAL_SERVER_ERROR, f"unreadable POP answer: {exc}") from None
        out = []
        for msg in msgs:
            props = dict(msg.properties)
            ck = props.pop(POP_CK, None)
            if ck is not None:
                handle = ReceiptHandle.parse(ck)
            else:
                start = starts.get((RetryFlag.NORMAL, msg.queue_id), [msg.queue_offset])[0]
                handle = ReceiptHandle(start, h.pop_time or 0, h.invisible_time or 0, h.revive_qid or 0,
                                       RetryFlag.NORMAL, broker, msg.queue_id, msg.queue_offset)
            m = to_v2(topic_resource.name, msg.body, props, namespace=topic_resource.resource_namespace)
            sp = m.system_properties
            sp.ClearField("delivery_timestamp")  # it was due: delivered now
            sp.receipt_handle = str(Handle(handle, msg.commit_log_offset))
            sp.queue_id = msg.queue_id
            sp.queue_offset = msg.queue_offset
            sp.delivery_attempt = msg.reconsume_times + 1
            sp.invisible_duration.seconds, rest = divmod(h.invisible_time or 0, 1000)
            sp.invisible_duration.nanos = rest * 1_000_000
            set_timestamp_ms(sp.born_timestamp, msg.born_timestamp)
            sp.born_host = msg.born_host.rsplit(":", 1)[0]
            set_timestamp_ms(sp.store_timestamp, msg.store_timestamp)
            sp.store_host = msg.store_host
            out.append(m)
        return out

    # -- AckMessage / ChangeInvisibleDuration / DLQ -------------------------------------------
    async def ack(self, req: Any, context: Any) -> Any:
        group = group_name(req.group)
        topic = topic_name(req.topic)
        if not req.entries:
            raise ProxyError(v2.BAD_REQUEST, "no entry to acknowledge")
        route = await self.routes.get(topic)
        resp = v2.AckMessageResponse()
        failed = []
        for e in req.entries:
            out = resp.entries.add(message_id=e.message_id, receipt_handle=e.receipt_handle)
            try:
                await self._ack_one(route, group, topic, Handle.parse(await self.renewals.settled(e.receipt_handle)).pop)
                self.renewals.forget(e.receipt_handle)
                out.status.CopyFrom(status())
            except ProxyError as exc:
                out.status.CopyFrom(status(exc.code, exc.message))
                failed.append(out.status)
        if not failed:
            resp.status.CopyFrom(status())
        elif len(req.entries) == 1:
            resp.status.CopyFrom(failed[0])
        else:
            resp.status.CopyFrom(status(v2.MULTIPLE_RESULTS, f"{len(failed)} of {len(req.entries)} acks failed"))
        return resp

    async def _ack_one(self, route: Route, group: str, topic: str, h: ReceiptHandle) -> None:
        addr = self._broker_addr(route, h.broker_name)
        header = AckMessageRequestHeader(consumer_group=group, topic=h.topic_for_ack(group, topic), queue_id=h.queue_id,
                                         extra_info=str(h), offset=h.queue_offset, bname=h.broker_name)
        answer = await self._invoke(addr, RequestCode.ACK_MESSAGE, header.to_ext_fields(), self.timeout_ms)
        if answer.code != ResponseCode.SUCCESS:
            code = v2.INVALID_RECEIPT_HANDLE if answer.code in (ResponseCode.NO_MESSAGE, ResponseCode.INVALID_PARAMETER) \
                else from_remoting(answer.code)
            raise ProxyError(code, answer.remark or "ack failed")

    async def change_invisible_duration(self, req: Any, context: Any) -> Any:
        group = group_name(req.group)
        topic = topic_name(req.topic)
        handle = Handle.parse(await self.renewals.settled(req.receipt_handle))
        invisible = _ms(req.invisible_duration)
        if not MIN_INVISIBLE_MS <= invisible <= MAX_INVISIBLE_MS:
            raise ProxyError(v2.ILLEGAL_INVISIBLE_TIME,
                             f"invisible duration {invisible} ms is not within {MIN_INVISIBLE_MS}..{MAX_INVISIBLE_MS}")
        route = await self.routes.get(topic)
        new = await self._change(route, group, topic, handle, invisible)
        self.renewals.forget(req.receipt_handle)  # the client decides its invisibility from now on
        return v2.ChangeInvisibleDurationResponse(status=status(), receipt_handle=str(new))

    async def _change(self, route: Route, group: str, topic: str, handle: Handle, invisible: int) -> Handle:
        """CHANGE_MESSAGE_INVISIBLETIME of ``handle``: the message's new handle."""
        h = handle.pop
        addr = self._broker_addr(route, h.broker_name)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=group, topic=h.topic_for_ack(group, topic), queue_id=h.queue_id, extra_info=str(h),
            offset=h.queue_offset, invisible_time=invisible, bname=h.broker_name)
        answer = await self._invoke(addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields(),
                                    self.timeout_ms)
        if answer.code != ResponseCode.SUCCESS:
            code = v2.INVALID_RECEIPT_HANDLE if answer.code in (ResponseCode.NO_MESSAGE, ResponseCode.INVALID_PARAMETER) \
                else from_remoting(answer.code)
            raise ProxyError(code, answer.remark or "change invisible duration failed")
        ext = answer.ext_fields
        new = h.replace(ck_offset=h.queue_offset, pop_time=int(ext.get("popTime", h.pop_time)),
                        invisible_time=int(ext.get("invisibleTime", invisible)),
                        revive_qid=int(ext.get("reviveQid", h.revive_qid)))
        return Handle(new, handle.commit_log_offset)

    async def forward_to_dlq(self, req: Any, context: Any) -> Any:
        group = group_name(req.group)
        topic = topic_name(req.topic)
        handle = Handle.parse(await self.renewals.settled(req.receipt_handle))
        route = await self.routes.get(topic)
        await self._to_dlq(route, group, topic, handle, req.message_id, req.max_delivery_attempts)
        self.renewals.forget(req.receipt_handle)
        return v2.ForwardMessageToDeadLetterQueueResponse(status=status())

    async def _to_dlq(self, route: Route, group: str, topic: str, handle: Handle, message_id: str,
                      max_attempts: int) -> None:
        """CONSUMER_SEND_MSG_BACK to ``%DLQ%<group>`` (delay level -1), then ACK the pop."""
        addr = self._broker_addr(route, handle.pop.broker_name)
        header = ConsumerSendMsgBackRequestHeader(
            offset=handle.commit_log_offset, group=group, delay_level=-1, origin_msg_id=message_id or None,
            origin_topic=topic, max_reconsume_times=max_attempts or None, bname=handle.pop.broker_name)
        answer = await self._invoke(addr, RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields(), self.timeout_ms)
        if answer.code != ResponseCode.SUCCESS:
            raise ProxyError(from_remoting(answer.code), answer.remark or "forward to DLQ failed")
        await self._ack_one(route, group, topic, handle.pop)

    # -- QueryAssignment ----------------------------------------------------------------------
    async def query_assignment(self, req: Any, context: Any, endpoints: Any) -> Any:
        group_name(req.group)
        topic = topic_name(req.topic)
        route = await self.routes.get(topic)
        resp = v2.QueryAssignmentResponse(status=status())
        for broker in sorted({b for b, _, perm in route.queues if perm in (v2.READ, v2.READ_WRITE)}):
            mq = resp.assignments.add().message_queue
            mq.topic.CopyFrom(req.topic)
            mq.id = -1
            mq.permission = v2.READ_WRITE
            mq.broker.name = broker
            mq.broker.endpoints.CopyFrom(endpoints)
        return resp
