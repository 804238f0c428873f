"""Durations of the 5.x consumers (remoting and gRPC ``SimpleConsumer``): seconds or
``timedelta`` in, checked."""

from __future__ import annotations

import datetime

from ..exceptions import IllegalArgumentError
from ..protocol.pop import MAX_POP_MESSAGES

#: longest invisible duration a broker accepts, seconds (12 h, the 5.x proxy's maximum)
MAX_INVISIBLE_DURATION_S = 12 * 3600.0


def as_seconds(value: float | datetime.timedelta, what: str) -> float:
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise IllegalArgumentError(f"{what} must be seconds (int/float) or a timedelta, got {value!r}")
    return float(value)


def invisible_ms(value: float | datetime.timedelta) -> int:
    s = as_seconds(value, "invisible_duration")
    if not 0 < s <= MAX_INVISIBLE_DURATION_S:
        raise IllegalArgumentError(f"invisible_duration must be in (0, {MAX_INVISIBLE_DURATION_S:.0f}] s, got {s}")
    return max(1, int(s * 1000))


def receive_args(group: str, subscribed: bool, max_message_num: int,
                 invisible_duration: float | datetime.timedelta) -> tuple[int, int]:
    """The checked arguments of a SimpleConsumer's ``receive``: ``(max_message_num, invisible ms)``.

    Raises:
        IllegalArgumentError: ``max_message_num`` not 1..32, a duration out of (0, 12 h], or no
            subscription.
    """
    if isinstance(max_message_num, bool) or not isinstance(max_message_num, int) \
            or not 0 < max_message_num <= MAX_POP_MESSAGES:
        raise IllegalArgumentError(f"max_message_num must be 1..{MAX_POP_MESSAGES}, got {max_message_num!r}")
    ms = invisible_ms(invisible_duration)
    if not subscribed:
        raise IllegalArgumentError(f"consumer {group} has no subscription: call subscribe() first")
    return max_message_num, ms
