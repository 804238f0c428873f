"""In-process capture of outgoing messages, like Django's ``mail.outbox``.

With ``ROCKETMQ["CAPTURE"] = True``, or inside ``with capture_messages() as sent:``, the
template records every message in :data:`outbox` (or the ``sent`` list) instead of talking to a
broker, and answers with a ``SEND_OK`` result. Listeners are not run; the recorded
:class:`CapturedMessage` tells topic, tag, keys, properties, body, send mode and hash key.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rocketmq_sdk import Message, MessageQueue, SendResult, SendStatus
from rocketmq_sdk.protocol.msgid import create_uniq_id

__all__ = ["CapturedMessage", "capture_messages", "outbox"]


@dataclass
class CapturedMessage:
    """One recorded send. ``mode``: ``"sync"``, ``"async"``, ``"oneway"``, ``"orderly"``,
    ``"batch"``, ``"request"`` or ``"transaction"``; ``hash_key`` for orderly sends."""

    mode: str
    message: Message
    msg_id: str
    hash_key: Any = None

    @property
    def topic(self) -> str:
        return self.message.topic

    @property
    def tags(self) -> str | None:
        return self.message.tags

    @property
    def keys(self) -> list[str]:
        return self.message.keys

    @property
    def body(self) -> bytes:
        return self.message.body

    @property
    def delay_level(self) -> int:
        return self.message.delay_time_level

    def json(self) -> Any:
        """The body decoded as JSON."""
        return json.loads(self.body)


#: what the template recorded while capturing (``ROCKETMQ["CAPTURE"]``); tests clear it
outbox: list[CapturedMessage] = []
_lock = threading.Lock()
_active: list[list[CapturedMessage]] = []


@contextlib.contextmanager
def capture_messages() -> Iterator[list[CapturedMessage]]:
    """Record instead of sending for the duration of the block (all threads); yields the list
    the messages go to. Nests: the innermost block gets them."""
    sent: list[CapturedMessage] = []
    with _lock:
        _active.append(sent)
    try:
        yield sent
    finally:
        with _lock:
            _active.remove(sent)


def capturing(setting: bool) -> bool:
    """Whether sends are captured now (a ``capture_messages`` block, or the setting)."""
    return bool(_active) or setting


def record(mode: str, msg: Message, hash_key: Any = None) -> SendResult:
    """Record ``msg`` and return the SEND_OK result a broker would have given."""
    msg_id = msg.uniq_key or create_uniq_id()
    captured = CapturedMessage(mode, msg, msg_id, hash_key)
    with _lock:
        (_active[-1] if _active else outbox).append(captured)
    return SendResult(SendStatus.SEND_OK, msg_id, "", MessageQueue(msg.topic, "captured", 0), 0)
