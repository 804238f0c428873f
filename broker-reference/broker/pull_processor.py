"""PULL_MESSAGE (11) with long polling (docs/protocol.md §3.4).

A pull that finds nothing (PULL_NOT_FOUND) with the SUSPEND flag is held for
``suspendTimeoutMillis`` and answered as soon as a message arrives on its queue (the store's
arrival listener wakes it) or when the time is up, exactly once.

As Java's ``PullRequestHoldService`` does, held pulls are also re-checked periodically (every
``pull_hold_check_interval`` ms, 5 s; ``short_polling_time_mills`` without long polling): a held
pull whose queue grew is answered then even if no arrival matched its SQL92 filter, so a pull
for which only non-matching messages arrived gets PULL_RETRY_IMMEDIATELY (NO_MATCHED_MESSAGE,
offset moved past them) within one period instead of at its own suspend timeout.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING

from rocketmq_broker.filter.consumer_filter import is_tag_type
from rocketmq_broker.store.results import GetMessageStatus
from rocketmq_sdk.protocol.bodies import SubscriptionData
from rocketmq_sdk.protocol.codes import (
    RETRY_GROUP_TOPIC_PREFIX,
    PermName,
    PullSysFlag,
    RequestCode,
    ResponseCode,
)
from rocketmq_sdk.protocol.headers import PullMessageRequestHeader
from rocketmq_sdk.remoting import Channel, RemotingCommand
from rocketmq_sdk.remoting.channel import bad_input_log

from .requests import ACL_NONE, SUB, Acl, GroupRes, SlaveRule, TopicRes, handles

if TYPE_CHECKING:
    from .context import BrokerContext

log = logging.getLogger("rocketmq_broker")

#: Java ``FAQUrl.suggestTodo(FAQUrl.SAME_GROUP_DIFFERENT_TOPIC)``, appended to SUBSCRIPTION_NOT_EXIST remarks
_FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."

_PULL_CODES = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


#: the remark of each status (the answer's remark is the status name)
_REMARKS = {status: status.value for status in GetMessageStatus}
_EMPTY_QUEUE = frozenset((GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE))

#: statuses whose next offset Java's ``DefaultMessageStore.nextOffsetCorrection`` corrects (masters only)
_CORRECTED = frozenset((GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_TOO_SMALL,
                        GetMessageStatus.OFFSET_OVERFLOW_BADLY, GetMessageStatus.OFFSET_FOUND_NULL,
                        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE))


def _arrival_matcher(tag_filter, fd):
    """``f(tags_code, properties) -> bool`` for a held pull: the SQL92 evaluation of a filtered
    subscription; None (every arrival wakes it) for a TAG subscription: a 4.9.8 broker answers a
    held tag pull with PULL_RETRY_IMMEDIATELY (NO_MATCHED_MESSAGE) when a message with another tag
    lands on its queue (``captures/java-push-consumer.jsonl`` seq 87), and we do the same."""
    if fd is not None:
        return lambda _code, props: fd.matches_properties(props)
    return None


#: most header subscriptions remembered (a consumer group's topics and versions)
_HEADER_SUBS_MAX = 4096


class PullProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        # (topic, queue_id) -> held pulls: (offset, channel, request, header, subscription, timer)
        self._held: dict[tuple[str, int], list] = {}
        #: (topic, expression, subVersion, type) -> the TAG subscription a pull's header builds
        #: (bounded; read-only once built): the consumer repeats the same one on every pull
        self._header_subs: dict[tuple, SubscriptionData] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None  # the loop's thread (``threading.get_ident()``)
        self._checker: asyncio.Task | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bind to the broker's loop and start the periodic re-check of held pulls."""
        self.loop = loop
        self._loop_thread = threading.get_ident()  # start() runs on the loop
        self._checker = loop.create_task(self._check_loop())

    def stop(self) -> None:
        """Stop the periodic re-check and answer every held pull."""
        if self._checker is not None:
            self._checker.cancel()
            self._checker = None
        self.release_all()

    @handles(RequestCode.PULL_MESSAGE, header=PullMessageRequestHeader, writes=True,
             acl=Acl(TopicRes("topic", SUB), GroupRes("consumerGroup")), on_slave=SlaveRule.SERVE)
    @handles(RequestCode.LITE_PULL_MESSAGE, header=PullMessageRequestHeader, writes=True, acl=ACL_NONE,
             on_slave=SlaveRule.SERVE, v5_only=True)
    def pull(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand | None:
        return self._process(ch, cmd, allow_suspend=True)

    def _subscription(self, cmd: RemotingCommand, h: PullMessageRequestHeader, sys_flag: int):
        """(subscription, SQL92 filter data or None, error response) as Java's PullMessageProcessor
        resolves them: from the header (SUBSCRIPTION flag) or from the group's heartbeat."""
        group_name, topic = h.consumer_group or "", h.topic or ""
        filters = self.broker.consumers.filters
        fd = None
        if sys_flag & PullSysFlag.SUBSCRIPTION:
            etype = h.expression_type or "TAG"
            key = (topic, h.subscription, h.sub_version, etype)
            sub = self._header_subs.get(key)
            if sub is None:
                sub = SubscriptionData.build(topic, h.subscription, h.sub_version or 0, etype)
                if is_tag_type(etype):
                    if len(self._header_subs) >= _HEADER_SUBS_MAX:
                        self._header_subs.clear()
                    self._header_subs[key] = sub
            if not is_tag_type(etype):
                # Java: FilterAPI.build rejects an empty expression, ConsumerFilterManager.build
                # compiles it; both failures answer SUBSCRIPTION_PARSE_FAILED here
                fd = filters.build(topic, group_name, h.subscription, etype, h.sub_version or 0)
                if fd is None:
                    bad_input_log.warning("Parse the consumer's subscription[%s] failed, group: %s",
                                          str(h.subscription)[:200], group_name)
                    return None, None, cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                                    "parse the consumer's subscription failed")
        else:
            group = self.broker.consumers.groups.get(group_name)
            if group is None:
                return None, None, cmd.response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                                "the consumer's group info not exist" + _FAQ)
            sub = group.subscriptions.get(topic)
            if sub is None:
                return None, None, cmd.response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                                "the consumer's subscription not exist" + _FAQ)
            if sub.sub_version < (h.sub_version or 0):
                return None, None, cmd.response(ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                                "the consumer's subscription not latest")
            if not is_tag_type(sub.expression_type):
                fd = filters.get(topic, group_name)
                if fd is None:
                    return None, None, cmd.response(
                        ResponseCode.FILTER_DATA_NOT_EXIST,
                        "The broker's consumer filter data is not exist!Your expression may be wrong!")
                if fd.client_version < (h.sub_version or 0):
                    return None, None, cmd.response(ResponseCode.FILTER_DATA_NOT_LATEST,
                                                    "the consumer's consumer filter data not latest")
        if not is_tag_type(sub.expression_type) and not self.broker.config.enable_property_filter:
            return None, None, cmd.response(
                ResponseCode.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {sub.expression_type}")
        return sub, fd, None

    def _process(self, ch: Channel, cmd: RemotingCommand, allow_suspend: bool,
                 h: PullMessageRequestHeader | None = None) -> RemotingCommand | None:
        """Java ``PullMessageProcessor.processRequest``; ``h``: the request's header when already
        read (a held pull answered on arrival: every check runs again, the header is the same)."""
        b = self.broker
        if h is None:
            h = PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        topic = h.topic or ""
        sg = b.groups.find(h.consumer_group or "")
        if sg is None:
            return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"subscription group [{h.consumer_group}] does not exist")
        if not sg.consume_enable:
            return cmd.response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {h.consumer_group}")
        tc = b.topics.get(topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not PermName.is_readable(tc.perm):
            return cmd.response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        queue_id = h.queue_id if h.queue_id is not None else -1
        if queue_id < 0 or queue_id >= tc.read_queue_nums:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                                f"[{tc.read_queue_nums}] consumer:[{ch.remote_addr}]")
        sys_flag = h.sys_flag or 0
        sub, fd, err = self._subscription(cmd, h, sys_flag)
        if err is not None:
            return err
        offset = h.queue_offset or 0
        codes = set(sub.code_set) if sub.tags_set and is_tag_type(sub.expression_type) else None
        tag_filter = codes.__contains__ if codes else None
        if b.config.filter_support_retry and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            fd = b.consumers.filters.retry_filter(topic)  # Java ExpressionForRetryMessageFilter
        suspend = allow_suspend and sys_flag & PullSysFlag.SUSPEND
        if suspend and b.store.is_caught_up(topic, queue_id, offset):
            # nothing to read yet (get_message would answer PULL_NOT_FOUND): held below unread
            result, code = None, ResponseCode.PULL_NOT_FOUND
        else:
            result = b.store.get_message(h.consumer_group or "", topic, queue_id, offset, h.max_msg_nums or 32,
                                         tag_filter, record_filter=fd.matches_record if fd is not None else None)
            if result is None:
                return cmd.response(ResponseCode.SYSTEM_ERROR, "store getMessage return null")
            if result.status in _EMPTY_QUEUE:
                code = ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
            else:
                code = _PULL_CODES.get(result.status, ResponseCode.PULL_NOT_FOUND)
        if allow_suspend and sys_flag & PullSysFlag.COMMIT_OFFSET and (h.commit_offset or 0) >= 0 and b.is_master:
            b.offsets.commit(h.consumer_group or "", topic, queue_id, h.commit_offset or 0)
        if code == ResponseCode.PULL_NOT_FOUND and suspend:
            timeout_ms = (h.suspend_timeout_millis or 15000) if b.config.long_polling_enable \
                else b.config.short_polling_time_mills
            self._hold(topic, queue_id, offset, ch, cmd, timeout_ms, _arrival_matcher(tag_filter, fd), h)
            return None
        assert result is not None  # (None only when held above)
        # slave reads (docs/protocol.md §8.7): which broker the client should pull from next
        suggest = 0
        if b.config.slave_read_enable:
            suggest = sg.which_broker_when_consume_slowly if result.suggest_pulling_from_slave else sg.broker_id
        if b.is_slave and not b.config.offset_check_in_slave and result.status in _CORRECTED:
            # Java nextOffsetCorrection: a slave (maybe behind its master) never moves the offset
            result.next_begin_offset = offset
            if code == ResponseCode.PULL_OFFSET_MOVED:
                code, suggest = ResponseCode.PULL_RETRY_IMMEDIATELY, sg.broker_id
        ext = {"suggestWhichBrokerId": str(suggest), "nextBeginOffset": str(result.next_begin_offset),
               "minOffset": str(result.min_offset), "maxOffset": str(result.max_offset)}
        if code == ResponseCode.SUCCESS:
            b.record_get(h.consumer_group or "", result.message_count)
            return cmd.response(code, _REMARKS[result.status], ext_fields=ext, body=result.body())
        return cmd.response(code, _REMARKS[result.status], ext_fields=ext)

    # -- long polling --------------------------------------------------------------------------
    def _hold(self, topic: str, queue_id: int, offset: int, ch: Channel, cmd: RemotingCommand, timeout_ms: int,
              matcher=None, h: PullMessageRequestHeader | None = None) -> None:
        """Park a pull; ``matcher(tags_code, properties)`` (None: any message) decides which
        arriving messages wake it (Java ``PullRequestHoldService.notifyMessageArriving``); ``h``
        the request's header, kept for its answer."""
        # the loop without asyncio.get_running_loop(), which makes a getpid() system call
        loop = self.loop if self._loop_thread == threading.get_ident() else asyncio.get_running_loop()
        entry = [offset, ch, cmd, None, matcher, h]
        key = (topic, queue_id)
        entry[3] = loop.call_later(timeout_ms / 1000.0, self._release, key, entry)
        self._held.setdefault(key, []).append(entry)

    def _release(self, key: tuple[str, int], entry: list) -> None:
        held = self._held.get(key)
        if held is None or entry not in held:
            return
        held.remove(entry)
        if not held:
            del self._held[key]
        entry[3].cancel()
        ch, cmd = entry[1], entry[2]
        if getattr(ch, "is_closed", False) or (ch.transport is None or ch.transport.is_closing()):
            return
        try:
            resp = self._process(ch, cmd, allow_suspend=False, h=entry[5])
        except Exception:  # noqa: BLE001 - answer rather than leave the client waiting
            log.exception("held pull failed")
            resp = cmd.response(ResponseCode.SYSTEM_ERROR, "pull failed")
        if resp is not None:
            try:
                ch.send(resp)
            except Exception:  # noqa: BLE001 - the client went away
                log.debug("could not answer held pull on %s", ch.remote_addr)

    def on_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int, properties) -> None:
        """Store arrival listener; may run on a store thread."""
        key = (topic, queue_id)
        if key not in self._held:
            return
        loop = self.loop
        if loop is None:
            return
        if self._loop_thread == threading.get_ident():  # (asyncio.get_running_loop() costs a getpid())
            # after the current callback: the send that stored the message is answered first
            # (Java wakes held pulls from its reput thread, off the send's path), so a
            # producer's round trip does not include serving the consumers' held pulls
            loop.call_soon(self._wake, key, max_offset, tags_code, properties)
        else:
            loop.call_soon_threadsafe(self._wake, key, max_offset, tags_code, properties)

    def _wake(self, key: tuple[str, int], max_offset: int, tags_code: int | None = None, properties=None) -> None:
        for entry in list(self._held.get(key, ())):
            if max_offset > entry[0] and (entry[4] is None or entry[4](tags_code, properties)):
                self._release(key, entry)

    def check_held(self) -> None:
        """Java ``checkHoldRequest``: wake every held pull whose queue holds messages past its
        offset, without a tags code or properties (every filter matches then)."""
        store = self.broker.store
        for key in list(self._held):
            try:
                self._wake(key, store.get_max_offset_in_queue(*key))
            except Exception:  # noqa: BLE001 - one queue must not stop the others
                log.exception("check hold request failed, topic=%s, queueId=%d", *key)

    async def _check_loop(self) -> None:
        cfg = self.broker.config
        while True:
            period_ms = cfg.pull_hold_check_interval if cfg.long_polling_enable else cfg.short_polling_time_mills
            await asyncio.sleep(max(period_ms, 1) / 1000.0)
            self.check_held()

    def release_all(self) -> None:
        for key, entries in list(self._held.items()):
            for entry in list(entries):
                self._release(key, entry)
