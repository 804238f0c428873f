"""Delayed delivery (RocketMQ ``ScheduleMessageService``, docs/protocol.md §5.7).

A message with ``DELAY`` level L > 0 is stored in ``SCHEDULE_TOPIC_XXXX`` queue L-1 with
``REAL_TOPIC``/``REAL_QID`` and a consume-queue tag code equal to its deliver time. One task per
level re-puts due messages to their real topic; progress (``delayOffset.json``) survives
restarts, so delayed messages are delivered on time after a restart too.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rocketmq_broker.aio import wait_event
from rocketmq_broker.store.commit_log import parse_delay_levels
from rocketmq_broker.store.inner_message import InnerMessage
from rocketmq_broker.store.results import GetMessageStatus, PutMessageStatus
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.codes import SCHEDULE_TOPIC
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.message_codec import decode_message, encode_properties
from rocketmq_sdk.protocol.validators import topic_problem

from .config_file import read_json, write_atomically

if TYPE_CHECKING:
    from rocketmq_broker.store.message_store import MessageStore

    from .config import BrokerConfig

log = logging.getLogger("rocketmq_broker.schedule")


class ScheduleService:
    """Delay levels: ``transform`` parks a delayed message in ``SCHEDULE_TOPIC_XXXX`` (queue
    level - 1), one task per level puts it back to its real topic when due.

    Args:
        config: the broker's settings (``messageDelayLevel``, ``config_dir``).
        store: the message store the levels are read from.
        put_message: stores a message (without this transform); may return an awaitable.
    """

    def __init__(self, config: BrokerConfig, store: MessageStore,
                 put_message: Callable[[InnerMessage], Any]) -> None:
        self.store = store
        self._put = put_message
        self.levels = parse_delay_levels(config.store.message_delay_level)  # level -> ms
        self.max_level = max(self.levels) if self.levels else 0
        self.offsets: dict[int, int] = {}
        self.path = os.path.join(config.config_dir, "delayOffset.json")
        self._tasks: list[asyncio.Task] = []
        self._wakeups: dict[int, asyncio.Event] = {}

    def load(self) -> None:
        d = read_json(self.path)
        if d:
            self.offsets = {int(k): int(v) for k, v in (d.get("offsetTable") or {}).items()}

    def persist(self) -> None:
        write_atomically(self.path, fastjson.dumps({"offsetTable": dict(self.offsets)}, standard=False))

    def transform(self, inner: InnerMessage) -> InnerMessage:
        """Redirect a delayed message to the schedule topic (called before the put)."""
        props = inner.get_properties()
        level = int(props.get(MC.DELAY_TIME_LEVEL, "0") or 0)
        if level <= 0 or not self.levels:
            return inner
        level = min(level, self.max_level)
        props[MC.REAL_TOPIC] = inner.topic
        props[MC.REAL_QUEUE_ID] = str(inner.queue_id)
        inner.topic = SCHEDULE_TOPIC
        inner.queue_id = level - 1
        inner.tags_code = int(time.time() * 1000) + self.levels[level]
        inner.properties_string = encode_properties(props)
        return inner

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._tasks:
            return
        for level in sorted(self.levels):
            self._wakeups[level] = asyncio.Event()
            self._tasks.append(loop.create_task(self._run_level(level)))

    def notify(self, queue_id: int) -> None:
        ev = self._wakeups.get(queue_id + 1)
        if ev is not None:
            ev.set()

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        self.persist()

    async def _run_level(self, level: int) -> None:
        qid = level - 1
        store = self.store
        ev = self._wakeups[level]
        while True:
            wait_s = 1.0
            try:
                offset = self.offsets.get(level, 0)
                res = store.get_message("SCHEDULE", SCHEDULE_TOPIC, qid, offset, 32)
                if res is not None and res.status is GetMessageStatus.FOUND:
                    now = int(time.time() * 1000)
                    for raw, qoff in zip(res.message_buffers, res.message_queue_offsets, strict=True):
                        try:
                            msg, _ = decode_message(raw, 0, decompress=False)
                        except Exception as exc:  # noqa: BLE001 - unreadable: skipped, as Java does
                            log.error("schedule level %d: skipping unreadable message at queue offset %d: %s",
                                      level, qoff, exc)
                            self.offsets[level] = qoff + 1
                            continue
                        deliver = msg.store_timestamp + self.levels[level]
                        if deliver > now:
                            wait_s = min(wait_s, (deliver - now) / 1000.0)
                            break
                        if not await self._deliver(msg, level, qoff):
                            break  # the store refuses writes for now (disk full): retry the same message
                        self.offsets[level] = qoff + 1
                    else:
                        wait_s = 0.0
                elif res is not None and res.status is GetMessageStatus.OFFSET_TOO_SMALL:
                    self.offsets[level] = res.next_begin_offset
                    wait_s = 0.0
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep the level running
                log.exception("schedule level %d failed", level)
            if wait_s > 0:
                ev.clear()
                await wait_event(ev, min(wait_s, 1.0))

    async def _deliver(self, msg, level: int, queue_offset: int) -> bool:
        """Re-put a due message to its real topic. Returns False only when the store refuses
        writes for now (SERVICE_NOT_AVAILABLE: disk full, shutting down, no longer the DLedger
        leader; OS_PAGECACHE_BUSY: busy, a DLedger leadership transfer), so the level retries
        the same message later; a message that can never be delivered (illegal real topic or
        queue, refused by the store as illegal, failing put) is logged at ERROR and skipped, as
        Java's ``ScheduleMessageService`` skips it, so one message never blocks its level."""
        try:
            result = self._put_real(msg)
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - skipped below
            result, problem = None, f"{type(exc).__name__}: {exc}"
        else:
            if result is not None and result.is_ok():
                return True
            if result is not None and result.put_message_status in (PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                                                    PutMessageStatus.OS_PAGECACHE_BUSY):
                return False
            problem = result.put_message_status.value if result is not None else "store not running"
        log.error("schedule level %d: skipping undeliverable message %s at queue offset %d (real topic %r): %s",
                  level, msg.offset_msg_id, queue_offset, str(msg.properties.get(MC.REAL_TOPIC))[:200], str(problem)[:300])
        return True

    def _put_real(self, msg):
        props = dict(msg.properties)
        topic = props.get(MC.REAL_TOPIC, msg.topic)
        problem = topic_problem(topic)
        if problem is not None:
            raise ValueError(problem)
        qid = int(props.get(MC.REAL_QUEUE_ID, "0"))
        if not 0 <= qid < 1 << 31:
            raise ValueError(f"illegal real queue id {qid}")
        props.pop(MC.DELAY_TIME_LEVEL, None)
        return self._put(InnerMessage.requeued(msg, topic, qid, props))
