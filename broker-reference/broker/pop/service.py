"""``PopService``: RocketMQ 5.x POP consumption on the reference broker, callable in-process.

The request processors (:mod:`.processor`) and the 5.x gRPC front call the same methods:

* :meth:`PopService.pop` - hand out up to 32 messages of a topic (one queue or all), invisible to
  the group for ``invisible_time`` ms; the answer carries a :class:`ReceiptHandle` per message;
* :meth:`PopService.ack` / :meth:`PopService.batch_ack` - acknowledge handles;
* :meth:`PopService.change_invisible_time` - extend/shorten a message's invisibility, giving a new handle;
* :meth:`PopService.revive` - copy un-acknowledged, expired messages into the group's POP retry
  topic ``%RETRY%<group>_<topic>`` with ``reconsumeTimes`` + 1 (run every ``revive_interval`` ms).

Semantics follow Apache RocketMQ 5.3.3 (``PopMessageProcessor``, ``AckMessageProcessor``,
``ChangeInvisibleTimeProcessor``, ``PopReviveService``; ``../shared/docs/rocketmq5-remoting.md`` §5):
the group's consumer offset advances at pop time and a checkpoint remembers what was handed out;
order pops (``order=True``, ``reviveQid`` 999) block their queue until every popped offset is
acknowledged or the invisible time passes, then deliver the same messages again from the same queue.
Errors are :class:`PopError` carrying the 5.x response code and remark.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rocketmq_broker.store.inner_message import InnerMessage
from rocketmq_broker.store.results import GetMessageStatus
from rocketmq_sdk.protocol.bodies import SubscriptionData
from rocketmq_sdk.protocol.codes import PermName, ResponseCode
from rocketmq_sdk.protocol.message_codec import decode_message, encode_message_ext
from rocketmq_sdk.protocol.pop import (
    FIRST_POP_TIME,
    MAX_POP_MESSAGES,
    ORDER_REVIVE_QID,
    POP_CK,
    BatchAck,
    ReceiptHandle,
    RetryFlag,
    format_offset_infos,
    format_order_count_info,
    pop_retry_topic,
)
from rocketmq_sdk.remoting.channel import bad_input_log

from .checkpoint import CheckPoint, CheckPointTable

log = logging.getLogger("rocketmq_broker.pop")

#: longest invisible time accepted (ms): 12 h, the 5.x proxy's ``maxInvisibleTimeMills``
MAX_INVISIBLE_TIME_MS = 12 * 3600 * 1000
INIT_MODE_MIN, INIT_MODE_MAX = 0, 1


class PopError(Exception):
    """A refused POP request: ``code`` is the 5.x response code, ``remark`` its text."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = int(code)
        self.remark = remark


@dataclass(slots=True)
class PopResult:
    """What :meth:`PopService.pop` found.

    Attributes:
        records: stored message records (docs/protocol.md §4.5) ready for a POP answer body;
            messages from the retry topic are re-encoded with the original topic and ``POP_CK``.
        handles: the receipt handle of each record, same order.
        reconsume_times: per record, times it was delivered before (order pops: from the order
            state; otherwise the record's own ``reconsumeTimes``).
        pop_time / invisible_time: epoch ms of this pop / ms of invisibility.
        revive_qid: revive queue of this pop (999 for order pops).
        rest_num: messages still available in the queues read.
        start_offset_info / msg_offset_info / order_count_info: the 5.x header strings.
    """

    pop_time: int
    invisible_time: int
    revive_qid: int
    records: list[bytes] = field(default_factory=list)
    handles: list[ReceiptHandle] = field(default_factory=list)
    reconsume_times: list[int] = field(default_factory=list)
    rest_num: int = 0
    start_offset_info: str = ""
    msg_offset_info: str = ""
    order_count_info: str | None = None

    @property
    def found(self) -> bool:
        return bool(self.records)

    def response_fields(self) -> dict[str, str]:
        ext = {"popTime": str(self.pop_time), "invisibleTime": str(self.invisible_time),
               "reviveQid": str(self.revive_qid), "restNum": str(self.rest_num)}
        if self.start_offset_info:
            ext["startOffsetInfo"] = self.start_offset_info
            ext["msgOffsetInfo"] = self.msg_offset_info
        if self.order_count_info:
            ext["orderCountInfo"] = self.order_count_info
        return ext


@dataclass(frozen=True, slots=True)
class _Filter:
    """What a pop delivers: ``tags`` tests a consume-queue tag code, ``record`` a stored
    message record (SQL92); None passes everything."""

    tags: Callable[[int], bool] | None
    record: Callable[[Any], bool] | None


_NO_FILTER = _Filter(None, None)


@dataclass(slots=True)
class _OrderState:
    """Order pop of one queue in flight: offsets handed out, acked ones, delivery counts."""

    offsets: list[int]
    pop_time: int
    invisible_time: int
    acked: set[int] = field(default_factory=set)
    counts: dict[int, int] = field(default_factory=dict)

    def blocking(self, now_ms: int) -> bool:
        return len(self.acked) < len(self.offsets) and now_ms < self.pop_time + self.invisible_time


@dataclass(slots=True)
class PopContext:
    """What the POP service needs of its broker (narrow on purpose).

    ``store``: the ``MessageStore``; ``topics`` / ``groups`` / ``offsets``: the broker's topic,
    subscription-group and consumer-offset managers; ``put_message(InnerMessage)``: store a
    message (may return a future); ``broker_name``, ``config_dir``, ``store_host``; ``filters``
    compiles SQL92 expressions (``build(topic, group, exp, exp_type, version)``)."""

    store: Any
    topics: Any
    groups: Any
    offsets: Any
    put_message: Callable[[InnerMessage], Any]
    broker_name: str
    config_dir: str
    store_host: str
    pop_from_retry_probability: int = 20
    revive_queue_num: int = 8
    #: the broker's ``ConsumerFilterManager`` (SQL92 subscriptions) and its ``enablePropertyFilter``
    #: setting (read at each pop: ``updateBrokerConfig`` may change it)
    filters: Any = None
    enable_property_filter: Callable[[], bool] = lambda: False


class PopService:
    """POP state of one broker. Not thread-safe: call it from the broker's event loop."""

    def __init__(self, ctx: PopContext) -> None:
        self.ctx = ctx
        self.checkpoints = CheckPointTable(ctx.config_dir)
        self._order: dict[tuple[str, str, int], _OrderState] = {}
        self._revive_qids = itertools.cycle(range(max(1, ctx.revive_queue_num)))
        self._random = random.Random()
        #: called with a topic name whenever a pop of it may now find something (acks of order pops)
        self.on_release: Callable[[str], None] | None = None

    def load(self) -> None:
        self.checkpoints.load()

    def persist(self, force: bool = False) -> None:
        """Write the checkpoints; call before the consumer offsets are persisted."""
        self.checkpoints.persist(force)

    # -- validation -------------------------------------------------------------------------------
    def _topic_config(self, topic: str, queue_id: int, *, for_read: bool = True):
        tc = self.ctx.topics.get(topic)
        if tc is None:
            raise PopError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if for_read and not PermName.is_readable(tc.perm):
            raise PopError(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= tc.read_queue_nums or queue_id < -1:
            raise PopError(ResponseCode.INVALID_PARAMETER,
                           f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                           f"[{tc.read_queue_nums}]")
        return tc

    def _group(self, group: str) -> None:
        sg = self.ctx.groups.find(group)
        if sg is None:
            raise PopError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist")
        if not sg.consume_enable:
            raise PopError(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")

    @staticmethod
    def check_invisible_time(invisible_time: int) -> None:
        if not 0 < invisible_time <= MAX_INVISIBLE_TIME_MS:
            raise PopError(ResponseCode.INVALID_PARAMETER,
                           f"invisibleTime {invisible_time} ms is out of range (0, {MAX_INVISIBLE_TIME_MS}]")

    # -- pop --------------------------------------------------------------------------------------
    def pop(self, group: str, topic: str, queue_id: int = -1, max_msg_nums: int = 32, invisible_time: int = 60000,
            *, init_mode: int = INIT_MODE_MIN, exp_type: str | None = "TAG", exp: str | None = "*",
            order: bool = False, now_ms: int | None = None) -> PopResult:
        """Pop up to ``max_msg_nums`` (1..32) messages of ``topic`` for ``group``.

        Args:
            queue_id: a queue, or -1 for every readable queue (starting at a random one).
            invisible_time: ms the messages stay invisible to the group (1 ms .. 12 h).
            init_mode: where a queue the group never popped starts: 0 its first message, 1 its end.
            exp_type / exp: ``"TAG"`` and a tag expression (``*``, ``A || B``), or ``"SQL92"`` and
                an expression over the message properties (evaluated for each message read from
                the commit log, as for pull; messages of the POP retry topic are not filtered,
                as 5.x). Needs ``enable_property_filter``.
            order: orderly POP: a queue stays blocked while popped messages are neither acked nor expired.
            now_ms: the broker clock (tests).

        Raises:
            PopError: TOPIC_NOT_EXIST, SUBSCRIPTION_GROUP_NOT_EXIST, NO_PERMISSION,
                INVALID_PARAMETER (queue, count, invisible time), SYSTEM_ERROR (SQL92 without
                ``enable_property_filter``), SUBSCRIPTION_PARSE_FAILED (an expression that does
                not compile, an unknown filter type).
        """
        if not 0 < max_msg_nums <= MAX_POP_MESSAGES:
            raise PopError(ResponseCode.INVALID_PARAMETER,
                           f"the max message num {max_msg_nums} is out of range [1, {MAX_POP_MESSAGES}]")
        self.check_invisible_time(invisible_time)
        tc = self._topic_config(topic, queue_id)
        self._group(group)
        flt = self._filter(group, topic, exp_type, exp)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        result = PopResult(now, invisible_time, ORDER_REVIVE_QID if order else next(self._revive_qids))
        starts: list[tuple[int, int, object]] = []
        offsets: list[tuple[int, int, object]] = []
        order_counts: list[str] = []
        qids = [queue_id] if queue_id >= 0 else self._queue_order(tc.read_queue_nums)
        retry_topic = pop_retry_topic(group, topic)
        sources: list[tuple[str, int, list[int]]] = [(topic, RetryFlag.NORMAL, qids)]
        if not order and self.ctx.topics.get(retry_topic) is not None:
            retry_source = (retry_topic, RetryFlag.RETRY_V1, [0])
            if self._random.randrange(100) < self.ctx.pop_from_retry_probability:
                sources.insert(0, retry_source)
            else:
                sources.append(retry_source)
        for read_topic, flag, source_qids in sources:
            for qid in source_qids:
                remaining = max_msg_nums - len(result.records)
                if remaining <= 0:
                    result.rest_num += self._rest(group, read_topic, qid)
                    continue
                if order:
                    self._pop_order_queue(result, group, topic, qid, remaining, flt, starts, offsets,
                                          order_counts)
                else:
                    self._pop_queue(result, group, topic, read_topic, flag, qid, remaining, flt, starts,
                                    offsets, init_mode)
        result.start_offset_info = format_offset_infos(starts)
        result.msg_offset_info = format_offset_infos(offsets)
        if order:
            result.order_count_info = ";".join(order_counts)
        return result

    def _filter(self, group: str, topic: str, exp_type: str | None, exp: str | None) -> _Filter:
        """The message filter of a pop: a tag-code set, or a compiled SQL92 expression
        (5.x ``PopMessageProcessor``: ``ConsumerFilterManager.build``, else SUBSCRIPTION_PARSE_FAILED)."""
        if exp_type in (None, "", "TAG"):
            sub = SubscriptionData.build(topic, exp or "*", 0, "TAG")
            codes = set(sub.code_set) if sub.tags_set else None
            return _Filter(codes.__contains__ if codes else None, None)
        if not self.ctx.enable_property_filter():
            raise PopError(ResponseCode.SYSTEM_ERROR,
                           f"The broker does not support consumer to filter message by {str(exp_type)[:50]}")
        fd = self.ctx.filters.build(topic, group, exp, exp_type, 0) if self.ctx.filters is not None else None
        if fd is None:
            bad_input_log.warning("Parse the consumer's subscription[%s] failed, group: %s", str(exp)[:200], group)
            raise PopError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        return _Filter(None, fd.matches_record)

    def _queue_order(self, n: int) -> list[int]:
        start = self._random.randrange(n) if n else 0
        return [(start + i) % n for i in range(n)]

    def _rest(self, group: str, topic: str, qid: int) -> int:
        committed = self.ctx.offsets.query(group, topic, qid)
        return max(0, self.ctx.store.get_max_offset_in_queue(topic, qid) - max(committed, 0))

    def _start_offset(self, group: str, topic: str, qid: int, init_mode: int, retry: bool) -> int:
        store = self.ctx.store
        committed = self.ctx.offsets.query(group, topic, qid)
        lo = store.get_min_offset_in_queue(topic, qid)
        if committed < 0:
            # 5.x initPopOffsetByCheckMsgInMem: MAX starts at 0 while the queue still starts at 0
            committed = lo if retry or init_mode == INIT_MODE_MIN or lo == 0 else store.get_max_offset_in_queue(topic, qid)
            self.ctx.offsets.commit(group, topic, qid, committed)
        return max(committed, lo)

    def _read(self, group: str, topic: str, qid: int, offset: int, count: int, flt: _Filter):
        store = self.ctx.store
        res = store.get_message(group, topic, qid, offset, count, flt.tags, record_filter=flt.record)
        if res is not None and res.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY):
            offset = res.next_begin_offset
            res = store.get_message(group, topic, qid, offset, count, flt.tags, record_filter=flt.record)
        return offset, res

    def _pop_queue(self, result: PopResult, group: str, topic: str, read_topic: str, flag: int, qid: int, count: int,
                   flt: _Filter, starts: list, offsets: list, init_mode: int) -> None:
        retry = flag != RetryFlag.NORMAL
        offset = self._start_offset(group, read_topic, qid, init_mode, retry)
        offset, res = self._read(group, read_topic, qid, offset, count, _NO_FILTER if retry else flt)
        next_offset = offset
        if res is not None and res.status in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE):
            next_offset = res.next_begin_offset
        if res is not None and res.status is GetMessageStatus.FOUND:
            got = list(res.message_queue_offsets)
            ck = CheckPoint(read_topic, topic, group, qid, offset, got, result.pop_time, result.invisible_time,
                            result.revive_qid, flag)
            self.checkpoints.add(ck)
            starts.append((flag, qid, offset))
            offsets.append((flag, qid, got))
            for raw, qoff in zip(res.message_buffers, got, strict=True):
                handle = ReceiptHandle(offset, result.pop_time, result.invisible_time, result.revive_qid, flag,
                                       self.ctx.broker_name, qid, qoff)
                raw, times = self._present(raw, topic, handle, retry)
                result.records.append(raw)
                result.handles.append(handle)
                result.reconsume_times.append(times)
        if next_offset != self.ctx.offsets.query(group, read_topic, qid):
            self.ctx.offsets.commit(group, read_topic, qid, next_offset)
        result.rest_num += max(0, self.ctx.store.get_max_offset_in_queue(read_topic, qid) - next_offset)

    def _present(self, raw: bytes, topic: str, handle: ReceiptHandle, retry: bool) -> tuple[bytes, int]:
        """The record as the client gets it: a retry-topic copy under its original topic with
        ``POP_CK`` (5.x without ``popResponseReturnActualRetryTopic``); normal records as stored."""
        msg, _ = decode_message(raw, 0, decompress=False)
        if not retry:
            return raw, msg.reconsume_times
        msg.topic = topic
        msg.properties[POP_CK] = str(handle)
        return bytes(encode_message_ext(msg)), msg.reconsume_times

    def _pop_order_queue(self, result: PopResult, group: str, topic: str, qid: int, count: int, flt: _Filter,
                         starts: list, offsets: list, order_counts: list) -> None:
        key = (topic, group, qid)
        state = self._order.get(key)
        if state is not None and state.blocking(result.pop_time):
            result.rest_num += self._rest(group, topic, qid)
            return
        offset = self._start_offset(group, topic, qid, INIT_MODE_MIN, False)
        offset, res = self._read(group, topic, qid, offset, count, flt)
        if res is None or res.status is not GetMessageStatus.FOUND:
            if res is not None and res.status is GetMessageStatus.NO_MATCHED_MESSAGE:
                self.ctx.offsets.commit(group, topic, qid, res.next_begin_offset)
            self._order.pop(key, None)
            result.rest_num += self._rest(group, topic, qid)
            return
        prev_counts = state.counts if state is not None else {}
        prev_acked = state.acked if state is not None else set()
        got, counts = [], {}
        new_state = _OrderState([], result.pop_time, result.invisible_time)
        for raw, qoff in zip(res.message_buffers, res.message_queue_offsets, strict=True):
            if qoff in prev_acked:  # acked in an earlier, partly acked pop: not delivered again
                new_state.acked.add(qoff)
                new_state.offsets.append(qoff)
                continue
            n = prev_counts.get(qoff, -1) + 1
            counts[qoff] = n
            got.append(qoff)
            new_state.offsets.append(qoff)
            handle = ReceiptHandle(offset, result.pop_time, result.invisible_time, ORDER_REVIVE_QID,
                                   RetryFlag.NORMAL, self.ctx.broker_name, qid, qoff)
            msg, _ = decode_message(raw, 0, decompress=False, read_body=False)
            result.records.append(raw)
            result.handles.append(handle)
            result.reconsume_times.append(max(n, msg.reconsume_times))
        new_state.counts = {o: counts.get(o, prev_counts.get(o, 0)) for o in new_state.offsets}
        if not got:
            self._commit_order(group, topic, qid, new_state)
            return
        self._order[key] = new_state
        starts.append((RetryFlag.NORMAL, qid, offset))
        offsets.append((RetryFlag.NORMAL, qid, got))
        order_counts.append(format_order_count_info(RetryFlag.NORMAL, qid, counts, max(counts.values())))
        result.rest_num += max(0, self.ctx.store.get_max_offset_in_queue(topic, qid) - (new_state.offsets[-1] + 1))

    def _commit_order(self, group: str, topic: str, qid: int, state: _OrderState) -> None:
        """Commit the first un-acked offset of an order pop (all acked: past its last offset)."""
        unacked = [o for o in state.offsets if o not in state.acked]
        self.ctx.offsets.commit(group, topic, qid, unacked[0] if unacked else state.offsets[-1] + 1)
        if not unacked:
            self._order.pop((topic, group, qid), None)
            if self.on_release is not None:
                self.on_release(topic)

    # -- ack --------------------------------------------------------------------------------------
    def _check_ack_target(self, topic: str, qid: int, offset: int) -> None:
        tc = self.ctx.topics.get(topic)
        if tc is None:
            raise PopError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not 0 <= qid < tc.read_queue_nums:
            raise PopError(ResponseCode.MESSAGE_ILLEGAL, f"queueId[{qid}] is illegal, topic:[{topic}]")
        lo = self.ctx.store.get_min_offset_in_queue(topic, qid)
        hi = self.ctx.store.get_max_offset_in_queue(topic, qid)
        if not lo <= offset < hi:
            raise PopError(ResponseCode.NO_MESSAGE,
                           f"offset is illegal, key:{topic}@{qid}, commit:{offset}, store:{lo}~{hi}")

    def ack(self, group: str, topic: str, handle: ReceiptHandle | str, offset: int | None = None) -> bool:
        """Acknowledge one popped message.

        Args:
            topic: the topic as the ACK names it: the POP retry topic for a handle with retry
                flag 1/2 (:meth:`ReceiptHandle.topic_for_ack`).
            handle: the message's receipt handle.
            offset: the message's queue offset (default: the handle's).

        Returns:
            True when this acknowledged a message still in flight; False for a handle already
            acknowledged, revived or replaced (answered SUCCESS like 5.x).

        Raises:
            PopError: TOPIC_NOT_EXIST, MESSAGE_ILLEGAL (queue), NO_MESSAGE (offset outside the
                queue), INVALID_PARAMETER (unreadable handle).
        """
        h = self._handle(handle)
        off = h.queue_offset if offset is None else offset
        self._check_ack_target(topic, h.queue_id, off)
        if h.is_order:
            return self._ack_order(group, topic, h.queue_id, off)
        ck = self.checkpoints.get((topic, group, h.queue_id, h.ck_offset, h.pop_time))
        return ck is not None and self.checkpoints.mark_acked(ck, off)

    def _ack_order(self, group: str, topic: str, qid: int, offset: int) -> bool:
        state = self._order.get((topic, group, qid))
        if state is None or offset not in state.offsets or offset in state.acked:
            return False
        state.acked.add(offset)
        self._commit_order(group, topic, qid, state)
        return True

    def batch_ack(self, acks: list[BatchAck]) -> int:
        """BATCH_ACK_MESSAGE: acknowledge every offset of each entry; offsets outside their queue
        are skipped silently (5.x). Returns how many messages in flight were acknowledged."""
        done = 0
        for a in acks:
            topic = pop_retry_topic(a.consumer_group, a.topic, a.retry_flag)
            for off in a.offsets:
                h = ReceiptHandle(a.start_offset, a.pop_time, a.invisible_time, a.revive_qid, a.retry_flag,
                                  self.ctx.broker_name, a.queue_id, off)
                try:
                    done += self.ack(a.consumer_group, topic, h, off)
                except PopError:
                    continue
        return done

    @staticmethod
    def _handle(handle: ReceiptHandle | str) -> ReceiptHandle:
        if isinstance(handle, ReceiptHandle):
            return handle
        try:
            return ReceiptHandle.parse(handle)
        except ValueError as exc:
            raise PopError(ResponseCode.INVALID_PARAMETER, str(exc)) from None

    # -- change invisible time ----------------------------------------------------------------------
    def change_invisible_time(self, group: str, topic: str, handle: ReceiptHandle | str, invisible_time: int,
                              offset: int | None = None, *, now_ms: int | None = None) -> ReceiptHandle:
        """Make a popped message invisible for ``invisible_time`` ms from now (5.x: a new
        checkpoint for this offset, and an ack of the old handle). Returns the new handle: its
        ``ck_offset`` is the message's own offset; for an order handle the pop time is kept and
        the invisible time counted from it.

        Raises:
            PopError: as :meth:`ack`, and INVALID_PARAMETER for an invisible time out of range.
        """
        self.check_invisible_time(invisible_time)
        h = self._handle(handle)
        off = h.queue_offset if offset is None else offset
        self._check_ack_target(topic, h.queue_id, off)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if h.is_order:
            total = now - h.pop_time + invisible_time
            state = self._order.get((topic, group, h.queue_id))
            if state is not None and state.pop_time == h.pop_time:
                state.invisible_time = max(state.invisible_time, total)
            return h.replace(ck_offset=off, invisible_time=total, queue_offset=off)
        old = self.checkpoints.get((topic, group, h.queue_id, h.ck_offset, h.pop_time))
        origin = old.origin_topic if old is not None else topic
        # a new checkpoint in the pop's own millisecond would have the old one's key
        now = max(now, h.pop_time + 1)
        new = ReceiptHandle(off, now, invisible_time, next(self._revive_qids), h.retry_flag, self.ctx.broker_name,
                            h.queue_id, off)
        self.checkpoints.add(CheckPoint(topic, origin, group, h.queue_id, off, [off], now, invisible_time,
                                        new.revive_qid, h.retry_flag))
        if old is not None:
            self.checkpoints.mark_acked(old, off)
        return new

    # -- revive -----------------------------------------------------------------------------------
    def revive(self, now_ms: int | None = None) -> int:
        """Copy every un-acknowledged message of an expired checkpoint into the group's POP retry
        topic (queue 0) with ``reconsumeTimes`` + 1 and ``1ST_POP_TIME``; returns how many.
        A checkpoint whose copy the store refuses stays and is retried next time."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        copied = 0
        for ck in sorted(self.checkpoints.due(now), key=lambda c: c.revive_time):
            ok = True
            for off in ck.unacked():
                if not self._revive_one(ck, off):
                    ok = False
                    break
                ck.acked.add(off)  # copied: never copied twice
                copied += 1
            if ok:
                self.checkpoints.remove(ck.key)
            else:
                self.checkpoints._dirty = True
        return copied

    def _revive_one(self, ck: CheckPoint, offset: int) -> bool:
        res = self.ctx.store.get_message(ck.group, ck.topic, ck.queue_id, offset, 1)
        if res is None:
            return False
        if res.status is not GetMessageStatus.FOUND or res.message_queue_offsets[0] != offset:
            log.warning("POP revive: %s@%d offset %d of group %s is gone, not redelivered", ck.topic, ck.queue_id,
                        offset, ck.group)
            return True
        msg, _ = decode_message(res.message_buffers[0], 0, decompress=False)
        retry_topic = pop_retry_topic(ck.group, ck.origin_topic, ck.retry_flag or RetryFlag.RETRY_V1)
        self.ctx.topics.create_system(retry_topic, 1)
        props = dict(msg.properties)
        if msg.reconsume_times == 0 or FIRST_POP_TIME not in props:
            props[FIRST_POP_TIME] = str(ck.pop_time)
        props.pop(POP_CK, None)
        inner = InnerMessage.requeued(msg, retry_topic, 0, props, store_host=self.ctx.store_host,
                                      reconsume_times=msg.reconsume_times + 1)
        try:
            result = self.ctx.put_message(inner)
        except Exception:  # noqa: BLE001 - kept for the next round
            log.exception("POP revive put failed")
            return False
        if hasattr(result, "is_ok") and not result.is_ok():
            log.warning("POP revive: store refused the copy (%s), retrying later", result.put_message_status)
            return False
        return result is not None

    # -- introspection ----------------------------------------------------------------------------
    def has_message(self, group: str, topic: str, queue_id: int = -1) -> bool:
        """True when a pop of ``topic`` by ``group`` could find something now (NOTIFICATION)."""
        tc = self.ctx.topics.get(topic)
        if tc is None:
            return False
        qids = [queue_id] if queue_id >= 0 else range(tc.read_queue_nums)
        if any(self._rest(group, topic, q) > 0 for q in qids):
            return True
        retry = pop_retry_topic(group, topic)
        return self.ctx.topics.get(retry) is not None and self._rest(group, retry, 0) > 0

    def in_flight(self, group: str) -> int:
        """Messages of ``group`` popped and neither acknowledged nor revived yet."""
        n = sum(len(ck.unacked()) for ck in self.checkpoints.table.values() if ck.group == group)
        return n + sum(len(s.offsets) - len(s.acked) for (_t, g, _q), s in self._order.items() if g == group)
