"""Celery ETA / countdown tasks as RocketMQ 5.x timer messages.

A Celery task sent with ``eta=`` or ``countdown=`` carries its due time in the ``eta`` header of
task protocol 2 (ISO 8601; ``countdown`` is turned into an aware ``eta`` by the sender). On a
broker that honours timer messages (RocketMQ 5.x, ``TIMER_DELIVER_MS``) the transport sends such
a task as a timer message due at that time: it waits in the broker, and the worker receives it when
it is due (never before; a 5.x broker delivers within one ``timerPrecisionMs``, 1 s by default).
Elsewhere the task is sent at once and the worker keeps it until due, as on every kombu transport.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rocketmq_sdk.protocol.codes import MessageConst

__all__ = ["MAX_TIMER_AHEAD_MS", "task_eta_ms"]

#: the farthest a timer message may be due (5.x's default ``timerMaxDelaySec``, 3 days)
MAX_TIMER_AHEAD_MS = MessageConst.TIMER_MAX_DELAY_MS


def task_eta_ms(payload: dict[str, Any]) -> int | None:
    """The epoch ms a Celery task message (protocol 2) is due, None for anything else: no
    ``eta`` header, a plain kombu message, or an ETA without a time zone (the worker reads a
    naive ETA in *its* time zone, which the sender does not know, so such a task is left to the
    worker as before)."""
    headers = payload.get("headers")
    if not isinstance(headers, dict) or "task" not in headers:
        return None
    eta = headers.get("eta")
    if not isinstance(eta, str) or not eta:
        return None
    try:
        when = dt.datetime.fromisoformat(eta)
    except ValueError:
        return None
    if when.tzinfo is None or when.utcoffset() is None:
        return None
    return int(when.timestamp() * 1000)
