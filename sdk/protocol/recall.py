"""RocketMQ 5.3 RECALL_MESSAGE (370) on the wire: the recall handle and the request header.

One codec for the SDK's :meth:`~rocketmq_sdk.producer.producer.Producer.recall_message` and the
reference broker (``rocketmq_broker.broker.timer.recall``). A SEND answer for a message that went
into the timer wheel carries ``recallHandle``: URL-safe base64 (with ``=`` padding) of
``v1 <topic> <brokerName> <timestampMs> <UNIQ_KEY>`` joined by single spaces, where the time is
the message's ``TIMER_OUT_MS`` + 1 (5.3.3's ``RecallMessageHandle.HandleV1``; captured in
``../shared/captures/rmq5_timer.jsonl`` frame 39). A recall turns the handle into a timer delete
entry (``TIMER_DEL_UNIQKEY``) for the same wheel slot.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from .headers import Header

__all__ = ["RecallHandle", "RecallMessageRequestHeader", "RecallMessageResponseHeader", "INVALID_HANDLE"]

_VERSION_1 = "v1"
#: 5.3.3's message for a handle that does not decode (client and broker alike)
INVALID_HANDLE = "recall handle is invalid"
_MAX_FIELD = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class RecallHandle:
    """A decoded version-1 recall handle.

    Attributes:
        topic: the timer message's topic (its real topic, not the wheel's).
        broker_name: the broker holding it (the recall goes to that broker's master).
        timestamp: ``TIMER_OUT_MS`` + 1 as text (epoch ms; 5.x keeps it a string, so a handle
            with a non-numeric time still decodes and the broker answers "timestamp invalid").
        message_id: the message's ``UNIQ_KEY``.
    """

    topic: str
    broker_name: str
    timestamp: str
    message_id: str

    def encode(self) -> str:
        """The handle as sent in SEND answers and RECALL_MESSAGE requests."""
        raw = " ".join((_VERSION_1, self.topic, self.broker_name, self.timestamp, self.message_id))
        return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")

    @classmethod
    def decode(cls, handle: str | None) -> RecallHandle:
        """Parse a handle as 5.3.3 does (extra fields after the fifth are ignored).

        Raises:
            ValueError: empty, not URL-safe base64 (``=`` padding optional), not UTF-8, not version 1 or fewer than five
                fields, or (stricter than 5.3.3) an empty field, one over 255 characters or with a
                control character (message :data:`INVALID_HANDLE`).
        """
        if not handle:
            raise ValueError(INVALID_HANDLE)
        if "+" in handle or "/" in handle:  # Java's URL decoder refuses the standard alphabet
            raise ValueError(INVALID_HANDLE)
        try:  # padding optional, as Java's decoder
            raw = base64.b64decode((handle + "=" * (-len(handle) % 4)).encode("ascii"), altchars=b"-_",
                                   validate=True).decode("utf-8")
        except (binascii.Error, UnicodeError, ValueError):
            raise ValueError(INVALID_HANDLE) from None
        items = raw.split(" ")
        if items[0] != _VERSION_1 or len(items) < 5:
            raise ValueError(INVALID_HANDLE)
        fields = items[1:5]
        # stricter than 5.3.3: the fields become message properties on the broker, so no control
        # characters (the property separators \x01 \x02 among them) and no runaway lengths
        if any(not f or len(f) > _MAX_FIELD or _CONTROL.search(f) for f in fields):
            raise ValueError(INVALID_HANDLE)
        return cls(*fields)


@dataclass(slots=True)
class RecallMessageRequestHeader(Header):
    """RECALL_MESSAGE (370): ``topic`` must be the handle's; ``bname`` the handle's broker."""

    producer_group: str | None = None
    topic: str | None = None
    recall_handle: str | None = None
    bname: str | None = None


@dataclass(slots=True)
class RecallMessageResponseHeader(Header):
    """Answer to RECALL_MESSAGE: ``msg_id`` is the recalled message's ``UNIQ_KEY``."""

    msg_id: str | None = None
