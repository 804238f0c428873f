"""Transaction state checks (RocketMQ ``TransactionalMessageCheckService`` and
``TransactionalMessageServiceImpl.check``, docs/protocol.md §5.9).

Every ``transactionCheckInterval`` ms a round walks each half queue from the check progress
(consume offset of ``CID_RMQ_SYS_TRANS``) with the op messages read so far:

* a half message with an op message (committed/rolled back) is skipped;
* one whose ``TRANSACTION_CHECK_TIMES`` reached ``transactionCheckMax``, or older than the file
  reserved time, is discarded: moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` and logged;
* a message stored after the round began, or younger than ``transactionTimeOut`` ms (its
  ``CHECK_IMMUNITY_TIME_IN_SECONDS`` when set), ends the round for that queue;
* otherwise it is re-appended to the half queue with the incremented check count and
  CHECK_TRANSACTION_STATE (39) is sent oneway to a live producer of its ``PGROUP`` about the
  re-appended copy; the producer answers with END_TRANSACTION (``fromTransactionCheck``).

Then the progress in the half and op queues is committed (persisted with consumerOffset.json,
so a restarted broker continues where it stopped and still checks pending half messages).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import TYPE_CHECKING

from rocketmq_broker.aio import wait_event
from rocketmq_broker.store.inner_message import InnerMessage, tags_string_to_tags_code
from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol.codes import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    RequestCode,
)
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.headers import CheckTransactionStateRequestHeader
from rocketmq_sdk.protocol.message import MessageExt
from rocketmq_sdk.protocol.message_codec import encode_message_ext, encode_properties
from rocketmq_sdk.remoting import Channel, RemotingCommand

from .bridge import REMOVE_TAG, PullStatus, QueueRead, TransactionalMessageBridge

if TYPE_CHECKING:
    from ..context import BrokerContext

log = logging.getLogger("rocketmq_broker.transaction")

#: Longest time one round spends on one half queue, ms (Java ``MAX_PROCESS_TIME_LIMIT``).
MAX_PROCESS_TIME_LIMIT = 60_000
#: Unreadable half offsets tolerated per queue and round (Java ``MAX_RETRY_COUNT_WHEN_HALF_NULL``).
MAX_RETRY_COUNT_WHEN_HALF_NULL = 1
#: Op messages read at once.
OP_READ_BATCH = 32


def _now_ms() -> int:
    return int(time.time() * 1000)


def _to_int(text: str | None, default: int = -1) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        log.error("not a number: %r", text)
        return -1


class TransactionCheckService:
    """Periodic checks of half messages without an outcome (see the module docstring).

    Settings are read from ``broker.config`` at every round: ``transaction_check_interval``
    (ms between rounds, 60000), ``transaction_time_out`` (ms, 6000), ``transaction_check_max``
    (15). Runs on a master only, as a task of the broker's event loop. As in Java, a check not
    answered before the next round is sent again (about a new copy of the half message), so the
    interval must stay well above the time producers take to answer.

    Attributes:
        rounds / checks_sent / discarded: counters since start (rounds completed, checks
            written to producers, half messages given up).
    """

    def __init__(self, broker: BrokerContext, bridge: TransactionalMessageBridge) -> None:
        self.broker = broker
        self.bridge = bridge
        self.rounds = 0  # check rounds completed
        self.checks_sent = 0  # CHECK_TRANSACTION_STATE requests written
        self.discarded = 0  # half messages given up (check limit or age)
        self._task: asyncio.Task | None = None
        self._wakeup: asyncio.Event | None = None
        self._rr = itertools.count()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.broker.is_master and self._task is None:
            self._wakeup = asyncio.Event()
            self._task = loop.create_task(self._run(), name="transaction-check")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
                pass

    def wakeup(self) -> None:
        """Start the next round now (call on the broker's loop)."""
        if self._wakeup is not None:
            self._wakeup.set()

    async def _run(self) -> None:
        assert self._wakeup is not None
        log.info("transaction check service started")
        while True:
            await wait_event(self._wakeup, self.broker.config.transaction_check_interval / 1000.0)
            self._wakeup.clear()
            c = self.broker.config
            begin = _now_ms()
            try:
                await self.check(c.transaction_time_out, c.transaction_check_max)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the next round retries
                log.exception("transaction check round failed")
            self.rounds += 1
            log.debug("transaction check round took %d ms", _now_ms() - begin)

    # -- one round --------------------------------------------------------------------------
    async def check(self, transaction_timeout: int, check_max: int) -> None:
        """One round over every half queue (Java ``TransactionalMessageServiceImpl.check``).

        Args:
            transaction_timeout: ms a half message is immune from checks after its birth.
            check_max: checks before a half message is discarded.
        """
        tc = self.broker.topics.get(TRANS_HALF_TOPIC)
        if tc is None:
            tc, created = self.broker.topics.create_system(TRANS_HALF_TOPIC, 1)
            if created:
                self.broker.register_to_namesrv_soon()
        for queue_id in range(tc.read_queue_nums):
            await self._check_queue(queue_id, transaction_timeout, check_max)

    async def _check_queue(self, queue_id: int, timeout: int, check_max: int) -> None:
        b = self.bridge
        start = _now_ms()
        half_offset = b.fetch_consume_offset(TRANS_HALF_TOPIC, queue_id)
        op_offset = b.fetch_consume_offset(TRANS_OP_HALF_TOPIC, queue_id)
        if half_offset < 0 or op_offset < 0:
            log.error("half queue %d: illegal offsets half %d op %d; skipped", queue_id, half_offset, op_offset)
            return
        done_op: list[int] = []
        remove: dict[int, int] = {}  # half offset -> op offset
        op_read = self._fill_op_remove_map(remove, queue_id, op_offset, half_offset, done_op)
        if op_read is None:
            return
        null_count = 1
        new_offset = i = half_offset
        while True:
            if _now_ms() - start > MAX_PROCESS_TIME_LIMIT:
                log.info("half queue %d: round time limit reached", queue_id)
                break
            await asyncio.sleep(0)  # one record per loop turn: requests keep flowing
            if i in remove:
                done_op.append(remove.pop(i))
            else:
                got = b.read(TRANS_HALF_TOPIC, queue_id, i, 1)
                msg = got.messages[0] if got is not None and got.messages else None
                if msg is None:
                    if got is None or null_count > MAX_RETRY_COUNT_WHEN_HALF_NULL:
                        break
                    null_count += 1
                    if got.status is PullStatus.NO_NEW_MSG:
                        break
                    log.info("half queue %d: no message at offset %d (%s), going on at %d", queue_id, i,
                             got.status.value, got.next_begin_offset)
                    i = new_offset = got.next_begin_offset
                    continue
                if self._need_discard(msg, check_max) or self._need_skip(msg):
                    await self.resolve_discard(msg)
                    i += 1
                    new_offset = i
                    continue
                if msg.store_timestamp >= start:
                    break  # stored during this round (e.g. a copy re-appended just now)
                age = _now_ms() - msg.born_timestamp
                immunity = timeout
                immunity_text = msg.properties.get(MC.CHECK_IMMUNITY_TIME_IN_SECONDS)
                if immunity_text is not None:
                    immunity = self._immunity_time(immunity_text, timeout)
                    if age < immunity and await self._check_prepare_queue_offset(remove, done_op, msg):
                        i += 1
                        new_offset = i
                        continue
                elif 0 <= age < immunity:
                    break  # too young: the rest of the queue is younger still
                ops = op_read.messages if op_read.status is PullStatus.FOUND else None
                need_check = ((not ops and age > immunity)
                              or (bool(ops) and ops[-1].born_timestamp - start > timeout)
                              or age <= -1)
                if need_check:
                    if not await self._put_back_half_msg(msg):
                        continue
                    self.send_check_message(msg)
                else:
                    # maybe an op message further on settles this half message: read more ops
                    nxt = self._fill_op_remove_map(remove, queue_id, op_read.next_begin_offset, half_offset, done_op)
                    if nxt is None:
                        break
                    op_read = nxt
                    continue
            i += 1
            new_offset = i
        if new_offset != half_offset:
            b.update_consume_offset(TRANS_HALF_TOPIC, queue_id, new_offset)
        new_op_offset = self._calculate_op_offset(done_op, op_offset)
        if new_op_offset != op_offset:
            b.update_consume_offset(TRANS_OP_HALF_TOPIC, queue_id, new_op_offset)

    def _fill_op_remove_map(self, remove: dict[int, int], queue_id: int, op_offset: int, min_half_offset: int,
                            done_op: list[int]) -> QueueRead | None:
        """Read op messages from ``op_offset``: those about half offsets not yet reached go into
        ``remove``, older ones straight into ``done_op`` (Java ``fillOpRemoveMap``)."""
        got = self.bridge.read(TRANS_OP_HALF_TOPIC, queue_id, op_offset, OP_READ_BATCH)
        if got is None:
            return None
        if got.status in (PullStatus.OFFSET_ILLEGAL, PullStatus.NO_MATCHED_MSG):
            log.warning("op queue %d: offset %d is illegal (%s); moving to %d", queue_id, op_offset,
                        got.status.value, got.next_begin_offset)
            self.bridge.update_consume_offset(TRANS_OP_HALF_TOPIC, queue_id, got.next_begin_offset)
            return got
        for op in got.messages:
            half_offset = _to_int(op.body.decode("ascii", "replace"))
            if op.tags != REMOVE_TAG:
                log.error("op message with an illegal tag %r at op offset %d", op.tags, op.queue_offset)
            elif half_offset < min_half_offset:
                done_op.append(op.queue_offset)
            else:
                remove[half_offset] = op.queue_offset
        return got

    @staticmethod
    def _calculate_op_offset(done_op: list[int], old_offset: int) -> int:
        new_offset = old_offset
        for off in sorted(done_op):
            if off != new_offset:
                break
            new_offset += 1
        return new_offset

    @staticmethod
    def _need_discard(msg: MessageExt, check_max: int) -> bool:
        """True when ``msg`` was checked ``check_max`` times; else counts this check in its
        ``TRANSACTION_CHECK_TIMES`` property."""
        text = msg.properties.get(MC.TRANSACTION_CHECK_TIMES)
        times = 1
        if text is not None:
            times = _to_int(text)
            if times >= check_max:
                return True
            times += 1
        msg.properties[MC.TRANSACTION_CHECK_TIMES] = str(times)
        return False

    def _need_skip(self, msg: MessageExt) -> bool:
        """True for a half message older than the CommitLog's file reserved time."""
        if _now_ms() - msg.born_timestamp > self.broker.config.store.file_reserved_time * 3_600_000:
            log.info("half message %s is older than the file reserved time; skipped", msg.offset_msg_id)
            return True
        return False

    @staticmethod
    def _immunity_time(text: str, timeout: int) -> int:
        seconds = _to_int(text)
        return timeout if seconds == -1 else seconds * 1000

    async def _check_prepare_queue_offset(self, remove: dict[int, int], done_op: list[int], msg: MessageExt) -> bool:
        """For a message still immune: True if it can be passed over (settled, or re-appended
        with ``TRAN_PREPARED_QUEUE_OFFSET`` to be looked at later)."""
        text = msg.properties.get(MC.TRANSACTION_PREPARED_QUEUE_OFFSET)
        if text is None:
            return await self._put_immunity_msg_back(msg)
        prepared = _to_int(text)
        if prepared == -1:
            return False
        if prepared in remove:
            done_op.append(remove.pop(prepared))
            return True
        return await self._put_immunity_msg_back(msg)

    async def _put_immunity_msg_back(self, msg: MessageExt) -> bool:
        inner = self.bridge.renew_half_message(msg)
        props = inner.get_properties()
        props.setdefault(MC.TRANSACTION_PREPARED_QUEUE_OFFSET, str(msg.queue_offset))
        inner.properties_string = encode_properties(props)
        result = await self.bridge.put(inner)
        return result is not None and result.is_ok()

    async def _put_back_half_msg(self, msg: MessageExt) -> bool:
        """Re-append ``msg`` (with its new check count) and point ``msg`` at the copy."""
        result = await self.bridge.put(self.bridge.renew_half_message(msg))
        if result is None or not result.is_ok() or result.append_message_result is None:
            log.error("re-appending half message %s failed", msg.offset_msg_id)
            return False
        ar = result.append_message_result
        msg.queue_offset = ar.logics_offset
        msg.commit_log_offset = ar.wrote_offset
        msg.offset_msg_id = ar.msg_id
        # Java: the copy's properties map is shared with the message and marked WAIT=false
        # after the copy's properties string was built, so only the check body carries it.
        msg.properties[MC.WAIT_STORE_MSG_OK] = "false"
        return True

    # -- the check listener -----------------------------------------------------------------
    def _producer_channel(self, group: str) -> Channel | None:
        """A live channel of producer group ``group``, round robin (``getAvailableChannel``)."""
        channels = [ch for ch in self.broker.producers.groups.get(group, {}) if not ch.closed]
        if not channels:
            return None
        return channels[next(self._rr) % len(channels)]

    def send_check_message(self, msg: MessageExt) -> bool:
        """Send CHECK_TRANSACTION_STATE (oneway) about ``msg`` to a producer of its group; the
        body is the message with its real topic and queue id. False when no producer of the
        group is connected or the write failed (the next round checks again)."""
        header = CheckTransactionStateRequestHeader(
            commit_log_offset=msg.commit_log_offset, offset_msg_id=msg.offset_msg_id,
            msg_id=msg.properties.get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            transaction_id=msg.properties.get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            tran_state_table_offset=msg.queue_offset)
        msg.topic = msg.properties.get(MC.REAL_TOPIC, msg.topic)
        msg.queue_id = _to_int(msg.properties.get(MC.REAL_QUEUE_ID), msg.queue_id)
        group = msg.properties.get(MC.PRODUCER_GROUP, "")
        ch = self._producer_channel(group)
        if ch is None:
            log.warning("transaction check of %s not sent: no producer of group %r is connected",
                        header.msg_id, group)
            return False
        cmd = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(),
                                      bytes(encode_message_ext(msg)), oneway=True)
        try:
            ch.send(cmd)
        except MQError as exc:
            log.warning("transaction check of %s to %s (group %s) failed: %s", header.msg_id, ch.remote_addr,
                        group, exc)
            return False
        self.checks_sent += 1
        log.debug("transaction check of %s sent to %s", header.msg_id, ch.remote_addr)
        return True

    async def resolve_discard(self, msg: MessageExt) -> None:
        """Give up on ``msg`` (checked too often or too old): log it and move it to
        ``TRANS_CHECK_MAX_TIME_TOPIC`` queue 0, as the Java broker's default check listener."""
        log.error("half message %s (%s, real topic %s) was checked %s times; discarded to %s",
                  msg.offset_msg_id, msg.properties.get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                  msg.properties.get(MC.REAL_TOPIC), msg.properties.get(MC.TRANSACTION_CHECK_TIMES),
                  TRANS_CHECK_MAX_TIME_TOPIC)
        self.discarded += 1
        if self.broker.topics.create_system(TRANS_CHECK_MAX_TIME_TOPIC, 1)[1]:
            self.broker.register_to_namesrv_soon()
        props = dict(msg.properties)
        inner = InnerMessage(topic=TRANS_CHECK_MAX_TIME_TOPIC, queue_id=0, body=msg.body,
                             properties_string=encode_properties(props), flag=msg.flag,
                             tags_code=tags_string_to_tags_code(props.get(MC.TAGS)), sys_flag=msg.sys_flag,
                             born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host,
                             reconsume_times=msg.reconsume_times, wait_store_msg_ok=False, properties=props)
        result = await self.bridge.put(inner)
        if result is None or not result.is_ok():
            log.error("storing discarded half message %s in %s failed", msg.offset_msg_id, TRANS_CHECK_MAX_TIME_TOPIC)
