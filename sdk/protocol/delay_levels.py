"""The broker's delay levels (4.x's ``messageDelayLevel``) and how a timer maps onto them.

A 4.x broker delays a message only by one of its levels (``DELAY`` property, 1..18); RocketMQ
5.x's timer messages (``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``) take any
time. Where a timer has to go to a 4.x broker (the gRPC proxy, the Django template's fallback)
it becomes the level :func:`delay_level_for` picks.
"""

from __future__ import annotations

from .codes import MessageConst as MC
from .message import Message

__all__ = ["DELAY_LEVELS_MS", "delay_level_for", "timer_delay_ms"]

#: the broker's default ``messageDelayLevel`` in ms (level 1 = 1 s ... level 18 = 2 h)
DELAY_LEVELS_MS = (1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000,
                   480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000)


def delay_level_for(delay_ms: int, levels_ms: tuple[int, ...] = DELAY_LEVELS_MS) -> int:
    """The delay level for a delivery ``delay_ms`` from now: the smallest level whose delay is at
    least ``delay_ms`` (never early), the largest level beyond it, 0 (no delay) for ``<= 0``."""
    if delay_ms <= 0:
        return 0
    for level, ms in enumerate(levels_ms, 1):
        if ms >= delay_ms:
            return level
    return len(levels_ms)


def timer_delay_ms(msg: Message, now_ms: int) -> int | None:
    """How long after ``now_ms`` (epoch ms) the timer of ``msg`` is due: its ``delay_ms``, or
    ``deliver_time_ms - now_ms`` (negative when past); None for a message without a timer."""
    if msg.properties.get(MC.TIMER_DELIVER_MS):
        return int(msg.properties[MC.TIMER_DELIVER_MS]) - now_ms
    return msg.delay_ms
