"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and CONSUMER_SEND_MSG_BACK (36).

Follows docs/protocol.md §3.3 and §3.5: topic validation, auto-creation from TBW102, random queue
for ``queueId < 0``, MESSAGE_ILLEGAL for oversized bodies or properties, the CLUSTER property,
WAIT stripped from stored single messages, retry → DLQ after max reconsume times. Whether a
request is a batch is decided by the header's ``batch`` flag (the C++ client sends batches as
310 and the flag as ``"1"``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
import time
from typing import TYPE_CHECKING

from rocketmq_broker.store.batch_records import batch_extra, merge_properties
from rocketmq_broker.store.inner_message import InnerMessage, tags_string_to_tags_code
from rocketmq_broker.store.results import PutMessageStatus
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.protocol.codes import (
    CURRENT_VERSION,
    DLQ_GROUP_TOPIC_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    V3_4_9,
    LanguageCode,
    MessageSysFlag,
    PermName,
    RequestCode,
    ResponseCode,
    dlq_topic,
    retry_topic,
)
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.headers import ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader, V2Field
from rocketmq_sdk.protocol.message_codec import (
    decode_batch,
    decode_message,
    decode_properties,
    encode_properties,
)
from rocketmq_sdk.protocol.validators import group_problem, topic_problem
from rocketmq_sdk.remoting import Channel, RemotingCommand
from rocketmq_sdk.remoting.command import FLAG_RESPONSE

from .controller_util import then
from .requests import (
    ACL_NONE,
    SLAVE_REFUSES_SEND,
    V2_GROUP_FIELDS,
    V2_TOPIC_FIELDS,
    Acl,
    GroupRes,
    SendRes,
    SlaveRule,
    handles,
)

if TYPE_CHECKING:
    from rocketmq_sdk.protocol.bodies import TopicConfig

    from .context import BrokerContext

_STATUS_CODES = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutMessageStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutMessageStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
}
_MAX_PROPERTIES = 32767
#: properties of a message the timer wheel holds or delivers (no plain put)
_TIMED = frozenset((MC.TIMER_OUT_MS, *MC.TIMER_PROPERTIES))
_STORED_CODES = frozenset((ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                           ResponseCode.SLAVE_NOT_AVAILABLE))
_PYTHON = int(LanguageCode.PYTHON)
_new_command = object.__new__
_SEND_MESSAGE = int(RequestCode.SEND_MESSAGE)
_PERM_WRITE = int(PermName.WRITE)
#: longest wait for the registration of an auto-created topic before its first send is answered (s)
_REGISTRATION_WAIT_S = 3.0


async def _answer_after(registered: asyncio.Future, answer):
    """``answer`` (a response or a future of one) once ``registered`` is done, or after
    :data:`_REGISTRATION_WAIT_S` at the most (an unreachable name server delays, never fails, a send)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(registered), _REGISTRATION_WAIT_S)
    return await answer if inspect.isawaitable(answer) else answer


def topic_refusal(cmd: RemotingCommand, topic: str) -> RemotingCommand | None:
    """The answer refusing a send (or reply) to ``topic`` by its name, or None when the name may
    be sent to (Java 4.9.8 ``AbstractSendMessageProcessor.msgCheck``): SYSTEM_ERROR with
    ``TopicValidator.validateTopic``'s remark for a blank, illegal or too long name, NO_PERMISSION
    "Sending message to topic[..] is forbidden." for a system topic (``NOT_ALLOWED_SEND_TOPICS``)."""
    problem = topic_problem(topic)
    if problem is not None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, problem)
    if topic in NOT_ALLOWED_SEND_TOPICS:
        return cmd.response(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
    return None


class SendResponse(RemotingCommand):
    """The response to a stored send: its JSON header is rendered from a template holding the
    five ``SendMessageResponseHeader`` fields (msgId, queueId, queueOffset, MSG_REGION, TRACE_ON),
    byte-identical to :meth:`RemotingCommand.encode`'s generic JSON header (which it falls back to
    when the fields were changed); the values are hex ids and decimal numbers, nothing to escape."""

    __slots__ = ()

    def _encode_json_header(self) -> bytes:
        ext = self.ext_fields
        if self.remark is not None or self.language != _PYTHON or len(ext) != 5:
            return RemotingCommand._encode_json_header(self)
        return (f'{{"code":{int(self.code)},"extFields":{{"msgId":"{ext["msgId"]}","queueId":"{ext["queueId"]}",'
                f'"queueOffset":"{ext["queueOffset"]}","MSG_REGION":"{ext["MSG_REGION"]}",'
                f'"TRACE_ON":"{ext["TRACE_ON"]}"}},"flag":{int(self.flag)},"language":"PYTHON","opaque":{int(self.opaque)},'
                f'"serializeTypeCurrentRPC":"JSON","version":{int(self.version)}}}').encode()


# the template renders the generic encoder's bytes, so the C encoder may render them too (faster)
SendResponse._c_encodable = True


class SendProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self._valid_topics: set[str] = set()  # names topic_refusal let through (regex, system topics), bounded
        #: plain single sends take ``store.put_plain`` (False: every send goes through ``broker.put_message``)
        self.fast_put = True

    # -- send ------------------------------------------------------------------------------
    @handles(RequestCode.SEND_MESSAGE, header=SendMessageRequestHeader, writes=True,
             acl=Acl(SendRes("topic", "group")), on_slave=SLAVE_REFUSES_SEND)
    @handles(RequestCode.SEND_MESSAGE_V2, header=SendMessageRequestHeader, writes=True,
             acl=Acl(SendRes(V2Field.TOPIC, V2Field.PRODUCER_GROUP)), on_slave=SLAVE_REFUSES_SEND,
             topic_fields=V2_TOPIC_FIELDS, group_fields=V2_GROUP_FIELDS)
    @handles(RequestCode.SEND_BATCH_MESSAGE, header=SendMessageRequestHeader, writes=True, acl=ACL_NONE,
             on_slave=SLAVE_REFUSES_SEND, topic_fields=V2_TOPIC_FIELDS, group_fields=V2_GROUP_FIELDS)
    def send(self, ch: Channel, cmd: RemotingCommand):
        if cmd.code == _SEND_MESSAGE:
            h = SendMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        else:
            h = SendMessageRequestHeader.from_v2(cmd.ext_fields)
        topic = h.topic or ""
        if topic not in self._valid_topics:  # names that passed topic_refusal (constant checks)
            refused = topic_refusal(cmd, topic)
            if refused is not None:
                return refused
            if len(self._valid_topics) >= 4096:
                self._valid_topics.clear()
            self._valid_topics.add(topic)
        b = self.broker
        tc = b.topics.table.get(topic)  # TopicManager.get in one call less
        if tc is None:
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                tc, created = b.topics.create_system(topic, 1)
                if created:
                    b.register_to_namesrv_soon()
            else:
                tc = b.topics.create_in_send(topic, h.default_topic or "", h.default_topic_queue_nums or 4,
                                             0)
                if tc is None:
                    return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                        f"topic[{topic}] not exist, apply first please!")
                registered = b.register_to_namesrv_before_answering()
                if registered is not None:
                    return _answer_after(registered, self._send_to(ch, cmd, h, topic, tc))
        return self._send_to(ch, cmd, h, topic, tc)

    def _send_to(self, ch: Channel, cmd: RemotingCommand, h: SendMessageRequestHeader, topic: str,
                 tc: TopicConfig):
        b = self.broker
        if not tc.perm & _PERM_WRITE:  # PermName.is_writeable
            return cmd.response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        queue_id = h.queue_id if h.queue_id is not None else -1
        if queue_id < 0:
            queue_id = random.randrange(tc.write_queue_nums)
        if queue_id >= max(tc.read_queue_nums, tc.write_queue_nums):
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"request queueId[{queue_id}] is illegal, {tc} Producer: {ch.remote_addr}")
        body = cmd.body
        if len(body) > b.config.store.max_message_size:
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL,
                                f"the message body size over max value, MAX: {b.config.store.max_message_size}")
        props_string = h.properties or ""
        if len(props_string.encode("utf-8")) > _MAX_PROPERTIES:
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, "the message properties length too long")
        sys_flag = h.sys_flag or 0
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MessageSysFlag.MULTI_TAGS
        born = h.born_timestamp or int(time.time() * 1000)
        reconsume = h.reconsume_times or 0
        if h.batch:
            return self._send_batch(cmd, h, topic, queue_id, sys_flag, born, reconsume, ch)
        props = decode_properties(props_string)
        plain = True
        if b.timer is not None and (refused := b.timer.check(props)) is not None:  # 5.x timer messages
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, refused)
        if not props.keys().isdisjoint(_TIMED):
            plain = False
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            plain = False
            max_times = h.max_reconsume_times if h.max_reconsume_times is not None else 16
            if reconsume >= max_times:
                topic = dlq_topic(topic[len(RETRY_GROUP_TOPIC_PREFIX):])
                if b.topics.create_system(topic, 1)[1]:
                    b.register_to_namesrv_soon()
                queue_id = 0
        props[MC.CLUSTER] = b.config.broker_cluster_name
        wait = props.pop(MC.WAIT_STORE_MSG_OK, "true") != "false"
        if plain and self.fast_put and MC.DELAY_TIME_LEVEL not in props and MC.TRANSACTION_PREPARED not in props:
            # the common single send in one flat store call (None: the InnerMessage path below decides)
            put = b.store.put_plain(topic, queue_id, body, props, h.flag or 0, sys_flag, born, ch.remote_addr,
                                    b.config.broker_addr, reconsume)
            if put is not None:
                b.stats_put += 1
                return self._stored(cmd, ResponseCode.SUCCESS, put[0], queue_id, put[1])
        inner = self._inner(topic, queue_id, body, props, h.flag or 0, sys_flag, born, ch.remote_addr, reconsume)
        inner.wait_store_msg_ok = wait
        if MC.TRANSACTION_PREPARED in props:  # half message (TRAN_MSG)
            refused = b.transactions.refusal(props)
            if refused is not None:
                return cmd.response(ResponseCode.NO_PERMISSION, refused)
            inner = b.transactions.prepare(inner)
        elif b.timer is not None and not plain:
            inner = b.timer.transform(inner)
            recall = b.timer.recall_handle(inner, b.config.broker_name)
            if recall is not None:  # 5.x: the answer to a timer message carries its recall handle
                return then(b.put_message(inner), lambda result: self._with_recall(
                    self._response(cmd, result, queue_id), recall))
        result = b.put_message(inner)
        if isinstance(result, asyncio.Future):  # SYNC_FLUSH: answered after the group commit
            return then(result, lambda result: self._response(cmd, result, queue_id))
        return self._response(cmd, result, queue_id)

    @staticmethod
    def _with_recall(resp: RemotingCommand, recall_handle: str) -> RemotingCommand:
        if resp.code in _STORED_CODES:
            resp.ext_fields["recallHandle"] = recall_handle
        return resp

    def _inner(self, topic: str, queue_id: int, body: bytes, props: dict[str, str], flag: int, sys_flag: int,
               born: int, born_host: str, reconsume: int) -> InnerMessage:
        return InnerMessage(topic=topic, queue_id=queue_id, body=body, properties_string=encode_properties(props),
                            flag=flag, tags_code=tags_string_to_tags_code(props.get(MC.TAGS)), sys_flag=sys_flag,
                            born_timestamp=born, born_host=born_host, store_host=self.broker.config.broker_addr,
                            reconsume_times=reconsume, properties=props)

    def _send_batch(self, cmd, h, topic, queue_id, sys_flag, born, reconsume, ch):
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, "Retry group topic can not be sent in batch")
        config = self.broker.config
        store = self.broker.store
        extra = batch_extra(h.properties or "", config.broker_cluster_name)
        # fast path: the body turned into CommitLog records in one step (C accelerator); None for
        # anything unusual, answered by the InnerMessage path below with its exact refusal
        batch = store.commit_log.encode_batch(cmd.body, topic, extra, queue_id, sys_flag, born, ch.remote_addr,
                                              config.broker_addr, reconsume)
        if batch is not None:
            result = store.put_encoded_batch_async(batch)
            if isinstance(result, asyncio.Future):
                return then(result, lambda result: self._response(cmd, result, queue_id))
            return self._response(cmd, result, queue_id)
        try:
            entries = decode_batch(cmd.body)
        except FrameError as exc:
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, f"malformed batch body: {exc}")
        store_host = config.broker_addr
        born_host = ch.remote_addr
        inners = []
        for flag, body, props_text in entries:
            props = merge_properties(props_text, extra)
            inners.append(InnerMessage(topic, queue_id, body, encode_properties(props),
                                       flag, tags_string_to_tags_code(props.get(MC.TAGS)),
                                       sys_flag, born, born_host, store_host, reconsume, 0, True, props))
        if not inners:
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
        result = self.broker.put_messages(inners)
        if isinstance(result, asyncio.Future):
            return then(result, lambda result: self._response(cmd, result, queue_id))
        return self._response(cmd, result, queue_id)

    def _response(self, cmd: RemotingCommand, result, queue_id: int) -> RemotingCommand:
        if result is None:
            return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, "store is not running")
        code = _STATUS_CODES.get(result.put_message_status, ResponseCode.SYSTEM_ERROR)
        ar = result.append_message_result
        if ar is None or code not in _STORED_CODES:
            if code == ResponseCode.SERVICE_NOT_AVAILABLE:
                return cmd.response(code, "service not available now. It may be caused by one of the following "
                                          "reasons: the broker's disk is full, messages are put to the slave, "
                                          "message store has been shut down, etc.")
            return cmd.response(code, f"store put failed: {result.status.value}")
        self.broker.stats_put += ar.msg_num
        return self._stored(cmd, code, ar.msg_id, queue_id, ar.logics_offset)

    @staticmethod
    def _stored(cmd: RemotingCommand, code: int, msg_id: str, queue_id: int, queue_offset: int) -> SendResponse:
        """The response to a stored send (``SendMessageResponseHeader`` fields)."""
        resp = _new_command(SendResponse)
        resp.code = code
        resp.language = _PYTHON
        resp.version = CURRENT_VERSION
        resp.opaque = cmd.opaque
        resp.flag = FLAG_RESPONSE
        resp.remark = None
        resp.ext_fields = {"msgId": msg_id, "queueId": str(queue_id), "queueOffset": str(queue_offset),
                           "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
        resp.body = b""
        resp.serialize_type = cmd.serialize_type
        return resp

    # -- consumer send-back ---------------------------------------------------------------------
    @handles(RequestCode.CONSUMER_SEND_MSG_BACK, header=ConsumerSendMsgBackRequestHeader, writes=True,
             acl=Acl(GroupRes("group")),
             on_slave=SlaveRule.refuse(ResponseCode.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE"))
    def send_back(self, ch: Channel, cmd: RemotingCommand):
        h = ConsumerSendMsgBackRequestHeader.from_ext_fields(cmd.ext_fields)
        b = self.broker
        group = h.group or ""
        # the retry/DLQ topic is built from the group: the group and that name must both be legal
        # (before anything is stored; the request guard checked the group already)
        problem = group_problem(group) or topic_problem(dlq_topic(group)) or topic_problem(retry_topic(group))
        if problem is not None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, problem)
        raw = b.store.look_message_by_offset(h.offset or 0)
        if raw is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        try:
            msg, _ = decode_message(raw, 0, decompress=False)
        except FrameError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"stored message unreadable: {exc}")
        sg = b.groups.find(group)
        if sg is None:
            return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}")
        if sg.retry_queue_nums <= 0:
            return cmd.response(ResponseCode.SUCCESS)  # Java: the group keeps no retry queue
        props = dict(msg.properties)
        props.setdefault(MC.RETRY_TOPIC, msg.topic)
        props[MC.WAIT_STORE_MSG_OK] = "false"
        max_times = (h.max_reconsume_times if (h.max_reconsume_times is not None and cmd.version >= V3_4_9)
                     else sg.retry_max_times)
        delay = h.delay_level or 0
        if msg.reconsume_times >= max_times or delay < 0:
            topic, queue_id, delay = dlq_topic(group), 0, 0
        else:
            topic = retry_topic(group)
            queue_id = 0
            delay = delay or 3 + msg.reconsume_times
        if b.topics.create_system(topic, 1)[1]:
            b.register_to_namesrv_soon()  # as Java's registerBrokerAll: the new topic is routable at once
        props.setdefault(MC.ORIGIN_MESSAGE_ID, h.origin_msg_id or msg.offset_msg_id)
        if delay > 0:
            props[MC.DELAY_TIME_LEVEL] = str(delay)
        inner = self._inner(topic, queue_id, msg.body, props, msg.flag, msg.sys_flag, msg.born_timestamp,
                            msg.born_host, msg.reconsume_times + 1)
        inner.store_host = msg.store_host
        def answer(result):
            if result is None or not result.is_ok():
                return cmd.response(ResponseCode.SYSTEM_ERROR, "send back failed to store")
            return cmd.response(ResponseCode.SUCCESS)

        return then(b.put_message(inner), answer)


def is_dlq(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)
