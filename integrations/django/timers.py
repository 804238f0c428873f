"""Timer messages from the template: RocketMQ 5.x timers, the nearest delay level on 4.x.

A message with a timer (``deliver_time_ms=`` / ``delay_ms=``, the SDK's
:attr:`~rocketmq_sdk.Message.deliver_time_ms` / :attr:`~rocketmq_sdk.Message.delay_ms`) goes as
it is to a topic whose brokers are all 5.x (``Producer.supports_timer_messages``). A 4.x broker
would ignore the timer and deliver at once, so there the timer becomes the broker's delay level
whose delay is the nearest one not shorter than the time asked (never early: 800 ms -> level 1,
1 s; 4 s -> level 2, 5 s; 45 s -> level 5, 1 min), the largest level (18, 2 h) when the time is
further, no delay when it is past; default ``messageDelayLevel`` table. The first such rounding
per topic is logged as a WARNING (logger ``rocketmq_sdk.integrations.django``), later ones at
DEBUG.
"""

from __future__ import annotations

import logging
import threading
import time

from rocketmq_sdk import Message, Producer
from rocketmq_sdk.protocol.delay_levels import DELAY_LEVELS_MS, delay_level_for, timer_delay_ms

__all__ = ["for_broker"]

log = logging.getLogger("rocketmq_sdk.integrations.django")

_warned: set[str] = set()
_warned_lock = threading.Lock()


def for_broker(msg: Message, producer: Producer) -> Message:
    """``msg`` ready for the brokers of its topic: unchanged without a timer or when they honour
    timers, else with the timer replaced by the nearest delay level (see the module docstring).

    Raises:
        what ``Producer.supports_timer_messages`` raises (route lookup).
    """
    delay = timer_delay_ms(msg, int(time.time() * 1000))
    if delay is None or producer.supports_timer_messages(msg.topic):
        return msg
    level = delay_level_for(delay)
    msg.deliver_time_ms = None
    msg.delay_ms = None
    msg.delay_time_level = level
    with _warned_lock:
        first = msg.topic not in _warned
        _warned.add(msg.topic)
    got = f"delay level {level} ({DELAY_LEVELS_MS[level - 1] // 1000} s)" if level else "no delay (time past)"
    log.log(logging.WARNING if first else logging.DEBUG,
            "topic %s: a broker without timer messages (RocketMQ 4.x): timer of %d ms sent as %s%s",
            msg.topic, delay, got, "; later roundings for this topic are logged at DEBUG" if first else "")
    return msg
