"""Timer messages (RocketMQ 5.x ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``).

A send with one of the timer properties (../shared/docs/rocketmq5-remoting.md §6) is validated as
5.3.3 validates it (a number; a delay of at most ``timer_max_delay_sec``, else MESSAGE_ILLEGAL with
5.x's remark), its deliver time is rounded down to ``timer_precision_ms`` (one step less when it
is already on a step) into ``TIMER_OUT_MS``, and it is stored in ``rmq_sys_wheel_timer`` queue 0
with ``REAL_TOPIC`` / ``REAL_QID``; a deliver time already past is stored at once in its topic.
The wheel delivers a message ``timer_precision_ms`` after its ``TIMER_OUT_MS`` - never before
the time asked for, at most one step after it - into its real topic and queue, with
``TIMER_ENQUEUE_MS`` / ``TIMER_DEQUEUE_MS`` added.

Cancelling (5.x ``TIMER_DEL_UNIQKEY``): a delete entry is a message with
``TIMER_DEL_UNIQKEY=<topic>+<UNIQ_KEY>`` and a deliver time in the future (else MESSAGE_ILLEGAL,
as 5.3.3); it goes into the wheel like a timer message and cancels the message of that topic and
``UNIQ_KEY`` whose ``TIMER_OUT_MS`` is the same (the same wheel slot, as 5.x: a delete for another
time cancels nothing), stored before or after it. Neither is delivered. RECALL_MESSAGE (:mod:`.recall`) writes such an
entry from a recall handle.

Durability: the timer messages are in the CommitLog; ``config/timerCheckpoint.json`` records the
lowest timer-queue offset not delivered yet and the offsets delivered above it, written after
each delivery round. After a restart (a crash included) the wheel is rebuilt from that offset, so
no timer message is lost; one delivered just before a crash may be delivered again.
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from rocketmq_broker.aio import wait_event
from rocketmq_broker.store.inner_message import InnerMessage
from rocketmq_broker.store.results import GetMessageStatus, PutMessageStatus
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.codes import RETRY_GROUP_TOPIC_PREFIX, MessageSysFlag
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.message_codec import decode_message, encode_properties
from rocketmq_sdk.protocol.recall import RecallHandle
from rocketmq_sdk.protocol.validators import topic_problem

from ..config_file import read_json, write_atomically

__all__ = ["TIMER_TOPIC", "TimerService", "delete_key", "deliver_time_of"]

log = logging.getLogger("rocketmq_broker.timer")

#: the wheel's topic (5.x ``TimerMessageStore.TIMER_TOPIC``)
TIMER_TOPIC = "rmq_sys_wheel_timer"
#: the properties that make a send a timer message (or a timer's delete entry)
_TIMER_KEYS = frozenset((*MC.TIMER_PROPERTIES, MC.TIMER_DEL_UNIQKEY))
#: 5.3.3's remark for a refused timer message
ILLEGAL_REMARK = ("timer message illegal, the delay time should not be bigger than the max delay {max_ms}ms; or if "
                  "set del msg, the delay time should be bigger than the current time")


def delete_key(topic: str, uniq_key: str) -> str:
    """The ``TIMER_DEL_UNIQKEY`` value cancelling the timer message ``uniq_key`` of ``topic``
    (5.x ``TimerMessageStore.buildDeleteKey``)."""
    return f"{topic}+{uniq_key}"


def deliver_time_of(props: dict[str, str], now_ms: int, max_delay_ms: int) -> int | None:
    """The deliver time (epoch ms) a message's timer properties ask for, None when it has none.
    Precedence as 5.x: ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``, ``TIMER_DELIVER_MS``.

    Raises:
        ValueError: not a number, or a delay beyond ``max_delay_ms``.
    """
    for name in MC.TIMER_PROPERTIES:
        raw = props.get(name)
        if raw is None:
            continue
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{name}={raw[:50]!r} is not a number") from None
        deliver = now_ms + value * 1000 if name == MC.TIMER_DELAY_SEC else now_ms + value if name == MC.TIMER_DELAY_MS \
            else value
        if deliver - now_ms > max_delay_ms:
            raise ValueError(f"{name}={value}: beyond the max delay {max_delay_ms} ms")
        return deliver
    return None


class TimerService:
    """The timer wheel of one broker (call it on the broker's loop).

    Args:
        store: the ``MessageStore``.
        put_message: store an ``InnerMessage`` without any transform (may return a future).
        config_dir: where ``timerCheckpoint.json`` lives.
        precision_ms / max_delay_sec: ``timerPrecisionMs`` / ``timerMaxDelaySec``.
        clock: epoch ms (tests).
    """

    def __init__(self, store: Any, put_message: Callable[[InnerMessage], Any], config_dir: str,
                 precision_ms: int = 1000, max_delay_sec: int = 259200,
                 clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.store = store
        self.put_message = put_message
        self.path = os.path.join(config_dir, "timerCheckpoint.json")
        self.precision_ms = max(1, precision_ms)
        self.max_delay_ms = max_delay_sec * 1000
        self.clock = clock
        self._heap: list[tuple[int, int]] = []  # (deliver at, timer-queue offset)
        self._delivered: set[int] = set()
        #: (TIMER_DEL_UNIQKEY, TIMER_OUT_MS) of the delete entries loaded and not fired yet
        self._cancels: set[tuple[str, int]] = set()
        self._low = 0  # lowest timer-queue offset not delivered
        self._scan = 0  # next timer-queue offset to load into the heap
        self._dirty = False
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self.delivered_count = 0
        #: timer messages a delete entry (or a recall) kept from being delivered
        self.cancelled_count = 0

    # -- sending side -----------------------------------------------------------------------------
    def check(self, props: dict[str, str]) -> str | None:
        """Validate a send's timer properties (the send answers MESSAGE_ILLEGAL with the
        returned remark); a message with a delay level keeps the level and loses its timer
        properties, as on 5.x. None: accepted."""
        if props.keys().isdisjoint(_TIMER_KEYS):
            return None
        if props.get(MC.DELAY_TIME_LEVEL, "0") not in ("", "0"):
            for p in (*MC.TIMER_PROPERTIES, MC.TIMER_DEL_UNIQKEY):
                props.pop(p, None)
            return None
        now = self.clock()
        try:
            deliver = deliver_time_of(props, now, self.max_delay_ms)
        except ValueError:
            return ILLEGAL_REMARK.format(max_ms=self.max_delay_ms)
        if MC.TIMER_DEL_UNIQKEY in props and (deliver is None or deliver <= now):
            return ILLEGAL_REMARK.format(max_ms=self.max_delay_ms)  # a delete entry must be ahead
        return None

    def recall_handle(self, inner: InnerMessage, broker_name: str) -> str | None:
        """The ``recallHandle`` of a send answer: for a message :meth:`transform` put into the
        wheel (not from a retry topic), as 5.3.3 (``TIMER_OUT_MS`` + 1); None otherwise."""
        if inner.topic != TIMER_TOPIC:
            return None
        props = inner.get_properties()
        real = props.get(MC.REAL_TOPIC)
        out = props.get(MC.TIMER_OUT_MS)
        uniq = props.get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if real is None or out is None or uniq is None or real.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return None
        return RecallHandle(real, broker_name, str(int(out) + 1), uniq).encode()

    def transform(self, inner: InnerMessage) -> InnerMessage:
        """Redirect a timer message whose time is ahead into the wheel's topic (after :meth:`check`).
        A half message is not timed; its commit is (as 5.x: the time counts from the commit)."""
        if inner.transaction_type == MessageSysFlag.TRANSACTION_PREPARED_TYPE:
            return inner
        props = inner.get_properties()
        if not any(p in props for p in MC.TIMER_PROPERTIES):
            return inner
        now = self.clock()
        deliver = deliver_time_of(props, now, self.max_delay_ms)
        if deliver is None or deliver <= now:
            return inner  # already due: stored in its topic, timer property kept (5.x)
        out = deliver - deliver % self.precision_ms
        if out == deliver:
            out -= self.precision_ms
        props[MC.REAL_TOPIC] = inner.topic
        props[MC.REAL_QUEUE_ID] = str(inner.queue_id)
        props[MC.TIMER_OUT_MS] = str(out)
        inner.topic = TIMER_TOPIC
        inner.queue_id = 0
        inner.tags_code = out
        inner.properties_string = encode_properties(props)
        inner.properties = props
        return inner

    # -- the wheel -------------------------------------------------------------------------------
    def load(self) -> None:
        """Read the checkpoint; the wheel is rebuilt from it at :meth:`start`."""
        d = read_json(self.path) or {}
        self._low = self._scan = int(d.get("lowOffset", 0))
        self._delivered = {int(o) for o in d.get("delivered", ()) if int(o) >= self._low}

    def persist(self, force: bool = False) -> None:
        if not (self._dirty or force):
            return
        self._dirty = False
        write_atomically(self.path, fastjson.dumps({"lowOffset": self._low, "delivered": sorted(self._delivered)}))

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._wake = asyncio.Event()
        self._task = loop.create_task(self._run())

    def notify(self) -> None:
        """A message arrived in the wheel's topic (on the loop)."""
        if self._wake is not None:
            self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
            self._task = None
        self.persist(force=True)

    @property
    def pending(self) -> int:
        """Timer messages loaded and not delivered yet."""
        return len(self._heap)

    def _load_new(self) -> None:
        """Put the timer-queue entries from the scan offset on into the heap."""
        store = self.store
        while True:
            res = store.get_message("TIMER", TIMER_TOPIC, 0, self._scan, 32)
            if res is None:
                return
            if res.status is GetMessageStatus.OFFSET_TOO_SMALL:
                self._scan = self._low = res.next_begin_offset
                continue
            if res.status is not GetMessageStatus.FOUND:
                return
            for raw, qoff in zip(res.message_buffers, res.message_queue_offsets, strict=True):
                if qoff in self._delivered:
                    continue
                try:
                    msg, _ = decode_message(raw, 0, decompress=False, read_body=False)
                    out = int(msg.properties[MC.TIMER_OUT_MS])
                except (KeyError, ValueError) as exc:
                    log.error("timer message at offset %d unreadable, skipped: %s", qoff, exc)
                    self._delivered.add(qoff)
                    continue
                key = msg.properties.get(MC.TIMER_DEL_UNIQKEY)
                if key is not None:
                    self._cancels.add((key, out))
                heapq.heappush(self._heap, (out + self.precision_ms, qoff))
            self._scan = res.next_begin_offset

    async def deliver_due(self) -> int:
        """Deliver every loaded timer message whose time has come; returns how many."""
        self._load_new()
        now = self.clock()
        done = 0
        complete = True
        while self._heap and self._heap[0][0] <= now:
            at, qoff = self._heap[0]
            ok = await self._deliver(qoff)
            if not ok:
                complete = False
                break  # the store refuses writes for now: retry later
            heapq.heappop(self._heap)
            self._delivered.add(qoff)
            done += 1
        if complete and self._cancels:  # the slots up to now are done: their delete keys too
            self._cancels = {(k, out) for k, out in self._cancels if out + self.precision_ms > now}
        if done:
            self.delivered_count += done
            low = min((o for _at, o in self._heap), default=self._scan)
            self._low = low
            self._delivered = {o for o in self._delivered if o >= low}
            self._dirty = True
            self.persist()
        return done

    async def _deliver(self, qoff: int) -> bool:
        res = self.store.get_message("TIMER", TIMER_TOPIC, 0, qoff, 1)
        if res is None:
            return False
        if res.status is not GetMessageStatus.FOUND or res.message_queue_offsets[0] != qoff:
            log.error("timer message at offset %d is gone from the store; not delivered", qoff)
            return True
        msg, _ = decode_message(res.message_buffers[0], 0, decompress=False)
        props = dict(msg.properties)
        topic = props.get(MC.REAL_TOPIC, "")
        if self._cancelled(qoff, props, topic):
            return True
        problem = topic_problem(topic)
        try:
            qid = int(props.get(MC.REAL_QUEUE_ID, "0"))
        except ValueError:
            problem = problem or "bad REAL_QID"
            qid = 0
        if problem is not None:
            log.error("timer message at offset %d has an illegal real topic/queue (%s); skipped", qoff, problem)
            return True
        props[MC.TIMER_ENQUEUE_MS] = str(msg.store_timestamp)
        props[MC.TIMER_DEQUEUE_MS] = str(self.clock())
        inner = InnerMessage.requeued(msg, topic, qid, props)
        try:
            result = self.put_message(inner)
            if inspect.isawaitable(result):
                result = await result
        except Exception:  # noqa: BLE001 - retried at the next round
            log.exception("delivering timer message at offset %d failed", qoff)
            return False
        if result is None or (result.put_message_status is PutMessageStatus.SERVICE_NOT_AVAILABLE):
            return False
        if not result.is_ok():
            log.error("timer message at offset %d refused by the store (%s); skipped", qoff,
                      result.put_message_status.value)
        return True

    def _cancelled(self, qoff: int, props: dict[str, str], topic: str) -> bool:
        """True for a delete entry and for a timer message a delete entry of its slot cancels
        (stored before or after it, as 5.x's ``avoidDeleteLose``); neither is delivered. The
        delete keys of a slot are dropped when the slot is done (:meth:`deliver_due`)."""
        try:
            out = int(props.get(MC.TIMER_OUT_MS, ""))
        except ValueError:
            return False  # _deliver's checks log it
        if MC.TIMER_DEL_UNIQKEY in props:
            return True
        uniq = props.get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq is not None and (delete_key(topic, uniq), out) in self._cancels:
            log.info("timer message %s of topic %s (offset %d) cancelled, not delivered", uniq, topic, qoff)
            self.cancelled_count += 1
            return True
        return False

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            try:
                await self.deliver_due()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep the wheel turning
                log.exception("timer wheel round failed")
            wait = 1.0
            if self._heap:
                wait = min(wait, max(0.0, (self._heap[0][0] - self.clock()) / 1000.0))
            self._wake.clear()
            if wait > 0:
                await wait_event(self._wake, wait)
