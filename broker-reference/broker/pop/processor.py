"""The 5.x POP request codes over :class:`~.service.PopService`, with long polling.

POP_MESSAGE (200050), ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151),
CHANGE_MESSAGE_INVISIBLETIME (200053), NOTIFICATION (200054) and POLLING_INFO (200055), answered
as Apache RocketMQ 5.3.3 answers them (``../shared/docs/rocketmq5-remoting.md`` §5.3-§5.11). A POP
or NOTIFICATION with ``pollTime`` > 0 that finds nothing is held until a message arrives in the
topic or its POP retry topic, an order queue is released, or ``pollTime`` passes (POLLING_TIMEOUT;
NOTIFICATION ``hasMsg=false``); more than ``pop_polling_size`` held requests per topic and group
get POLLING_FULL.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from rocketmq_sdk.protocol.codes import RETRY_GROUP_TOPIC_PREFIX, RequestCode, ResponseCode
from rocketmq_sdk.protocol.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    NotificationRequestHeader,
    PollingInfoRequestHeader,
    PopMessageRequestHeader,
    decode_batch_ack_body,
    pop_retry_topic,
)
from rocketmq_sdk.remoting import Channel, RemotingCommand

from ..requests import ACL_NONE, SlaveRule, handles
from .service import PopError, PopService

log = logging.getLogger("rocketmq_broker.pop")

#: 5.x remark of successful CHANGE_MESSAGE_INVISIBLETIME / NOTIFICATION / POLLING_INFO answers
_NOT_SET = "not set any response code"


@dataclass(eq=False, slots=True)
class _Held:
    ch: Channel
    cmd: RemotingCommand
    topic: str
    group: str
    deadline: float  # loop time
    timer: asyncio.TimerHandle | None = None
    notification: bool = False


class PopProcessor:
    """Registers the POP codes on a remoting server; ``service`` does the work."""

    def __init__(self, service: PopService, *, polling_size: int = 1024, revive_interval_ms: int = 1000,
                 response_version: int | None = None) -> None:
        self.service = service
        self.response_version = response_version  # the server's, for answers to held requests
        self.polling_size = polling_size
        self.revive_interval_ms = revive_interval_ms
        self._held: dict[tuple[str, str], list[_Held]] = {}  # (topic, group) -> held requests
        self.loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        service.on_release = self.wake_topic

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._task = loop.create_task(self._revive_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for entries in list(self._held.values()):
            for e in list(entries):
                self._answer(e, final=True)
        self.service.persist(force=True)

    # -- POP_MESSAGE --------------------------------------------------------------------------------
    @handles(RequestCode.POP_MESSAGE, header=PopMessageRequestHeader, writes=True, acl=ACL_NONE,
             on_slave=SlaveRule.ABSENT, v5_only=True)
    def pop_message(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand | None:
        h = PopMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        group, topic = h.consumer_group or "", h.topic or ""
        poll = max(0, h.poll_time or 0)
        now = int(time.time() * 1000)
        if h.born_time and now - h.born_time - poll > 500:
            # 5.x isTimeoutTooMuch: the request waited longer than the client will
            return cmd.response(ResponseCode.POLLING_TIMEOUT, "the broker received the request too late")
        resp = self._pop_once(cmd, h, now)
        if resp is not None or poll <= 0:
            return resp if resp is not None else self._nothing(cmd, h)
        return self._hold(ch, cmd, topic, group, poll)

    def _pop_once(self, cmd: RemotingCommand, h: PopMessageRequestHeader, now: int | None = None) -> RemotingCommand | None:
        """The answer when the pop found messages or failed; None when nothing was found."""
        try:
            res = self.service.pop(h.consumer_group or "", h.topic or "", -1 if h.queue_id is None else h.queue_id,
                                   32 if h.max_msg_nums is None else h.max_msg_nums,
                                   60000 if h.invisible_time is None else h.invisible_time,
                                   init_mode=h.init_mode or 0, exp_type=h.exp_type, exp=h.exp, order=bool(h.order),
                                   now_ms=now)
        except PopError as exc:
            return cmd.response(exc.code, exc.remark)
        if not res.found:
            return None
        return cmd.response(ResponseCode.SUCCESS, "FOUND", ext_fields=res.response_fields(), body=b"".join(res.records))

    def _nothing(self, cmd: RemotingCommand, h: PopMessageRequestHeader) -> RemotingCommand:
        now = int(time.time() * 1000)
        ext = {"popTime": str(now), "invisibleTime": str(h.invisible_time or 0),
               "reviveQid": "999" if h.order else "0", "restNum": "0"}
        return cmd.response(ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", ext_fields=ext)

    # -- long polling ------------------------------------------------------------------------------
    def _hold(self, ch: Channel, cmd: RemotingCommand, topic: str, group: str, poll_ms: int,
              notification: bool = False) -> RemotingCommand | None:
        key = (topic, group)
        entries = self._held.setdefault(key, [])
        if len(entries) >= self.polling_size:
            if notification:
                return cmd.response(ResponseCode.SUCCESS, _NOT_SET,
                                    ext_fields={"hasMsg": "false", "pollingFull": "true"})
            return cmd.response(ResponseCode.POLLING_FULL, "polling full")
        loop = asyncio.get_running_loop()
        e = _Held(ch, cmd, topic, group, loop.time() + poll_ms / 1000.0, notification=notification)
        e.timer = loop.call_later(poll_ms / 1000.0, self._answer, e, True)
        entries.append(e)
        return None

    def _drop(self, e: _Held) -> bool:
        entries = self._held.get((e.topic, e.group))
        if not entries or e not in entries:
            return False
        entries.remove(e)
        if not entries:
            del self._held[(e.topic, e.group)]
        if e.timer is not None:
            e.timer.cancel()
        return True

    def _answer(self, e: _Held, final: bool = False) -> None:
        """Re-run a held request; answer it when it found something, failed, or ``final``."""
        if (e.topic, e.group) not in self._held or e not in self._held[(e.topic, e.group)]:
            return
        if e.ch.closed:
            self._drop(e)
            return
        if e.notification:
            nh = NotificationRequestHeader.from_ext_fields(e.cmd.ext_fields)
            has = self.service.has_message(e.group, e.topic, -1 if nh.queue_id is None else nh.queue_id)
            resp = (e.cmd.response(ResponseCode.SUCCESS, _NOT_SET, ext_fields={"hasMsg": str(has).lower()})
                    if has or final else None)
        else:
            h = PopMessageRequestHeader.from_ext_fields(e.cmd.ext_fields)
            try:
                resp = self._pop_once(e.cmd, h)
            except Exception:  # noqa: BLE001 - answer rather than leave the client waiting
                log.exception("held POP failed")
                resp = e.cmd.response(ResponseCode.SYSTEM_ERROR, "pop failed")
            if resp is None and final:
                resp = self._nothing(e.cmd, h)
        if resp is None:
            return
        self._drop(e)
        if self.response_version is not None:
            resp.version = self.response_version
        try:
            e.ch.send(resp)
        except Exception:  # noqa: BLE001 - the client went away
            log.debug("could not answer held POP on %s", e.ch.remote_addr)

    def wake_topic(self, topic: str) -> None:
        """A message arrived in ``topic`` (or an order queue of it was released): re-run its held requests."""
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            keys = [k for k in self._held if pop_retry_topic(k[1], k[0]) == topic]
        else:
            keys = [k for k in self._held if k[0] == topic]
        for key in keys:
            for e in list(self._held.get(key, ())):
                self._answer(e)

    def on_arrival(self, topic: str) -> None:
        """Store arrival listener (may run on a store thread)."""
        loop = self.loop
        if loop is None or not self._held:
            return
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self.wake_topic(topic)
        else:
            loop.call_soon_threadsafe(self.wake_topic, topic)

    async def _revive_loop(self) -> None:
        while True:
            await asyncio.sleep(max(self.revive_interval_ms, 10) / 1000.0)
            try:
                self.service.revive()
                for key in list(self._held):  # expired order pops free their queues
                    for e in list(self._held.get(key, ())):
                        self._answer(e)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep reviving
                log.exception("POP revive failed")

    # -- ACK / CHANGE_INVISIBLETIME -----------------------------------------------------------------
    @handles(RequestCode.ACK_MESSAGE, header=AckMessageRequestHeader, writes=True, acl=ACL_NONE,
             on_slave=SlaveRule.ABSENT, v5_only=True)
    def ack_message(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = AckMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        if not h.extra_info or h.offset is None:
            return cmd.response(ResponseCode.INVALID_PARAMETER, "extraInfo and offset are required")
        try:
            self.service.ack(h.consumer_group or "", h.topic or "", h.extra_info, h.offset)
        except PopError as exc:
            return cmd.response(exc.code, exc.remark)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.BATCH_ACK_MESSAGE, header=None, writes=True, acl=ACL_NONE, on_slave=SlaveRule.ABSENT,
             v5_only=True)
    def batch_ack_message(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        if not cmd.body:
            return cmd.response(ResponseCode.NO_MESSAGE, "empty batch ack body")
        try:
            acks = decode_batch_ack_body(cmd.body)
        except ValueError as exc:
            return cmd.response(ResponseCode.INVALID_PARAMETER, str(exc)[:300])
        self.service.batch_ack(acks)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header=ChangeInvisibleTimeRequestHeader, writes=True,
             acl=ACL_NONE, on_slave=SlaveRule.ABSENT, v5_only=True)
    def change_invisible_time(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = ChangeInvisibleTimeRequestHeader.from_ext_fields(cmd.ext_fields)
        if not h.extra_info or h.offset is None or h.invisible_time is None:
            return cmd.response(ResponseCode.INVALID_PARAMETER, "extraInfo, offset and invisibleTime are required")
        try:
            new = self.service.change_invisible_time(h.consumer_group or "", h.topic or "", h.extra_info,
                                                     h.invisible_time, h.offset)
        except PopError as exc:
            return cmd.response(exc.code, exc.remark)
        return cmd.response(ResponseCode.SUCCESS, _NOT_SET,
                            ext_fields={"popTime": str(new.pop_time), "invisibleTime": str(new.invisible_time),
                                        "reviveQid": str(new.revive_qid)})

    # -- NOTIFICATION / POLLING_INFO ------------------------------------------------------------------
    @handles(RequestCode.NOTIFICATION, header=NotificationRequestHeader, writes=False, acl=ACL_NONE,
             on_slave=SlaveRule.ABSENT, v5_only=True)
    def notification(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand | None:
        h = NotificationRequestHeader.from_ext_fields(cmd.ext_fields)
        group, topic = h.consumer_group or "", h.topic or ""
        if self.service.ctx.topics.get(topic) is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if self.service.has_message(group, topic, -1 if h.queue_id is None else h.queue_id) or not h.poll_time:
            has = self.service.has_message(group, topic, -1 if h.queue_id is None else h.queue_id)
            return cmd.response(ResponseCode.SUCCESS, _NOT_SET, ext_fields={"hasMsg": str(has).lower()})
        return self._hold(ch, cmd, topic, group, h.poll_time, notification=True)

    @handles(RequestCode.POLLING_INFO, header=PollingInfoRequestHeader, writes=False, acl=ACL_NONE,
             on_slave=SlaveRule.ABSENT, v5_only=True)
    def polling_info(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = PollingInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        n = len(self._held.get((h.topic or "", h.consumer_group or ""), ()))
        return cmd.response(ResponseCode.SUCCESS, _NOT_SET, ext_fields={"pollingNum": str(n)})

    def held_count(self, topic: str, group: str) -> int:
        return len(self._held.get((topic, group), ()))
