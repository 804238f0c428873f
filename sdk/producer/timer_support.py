"""Whether the brokers a topic's messages go to honour timer messages (RocketMQ 5.x).

A 5.x broker delivers a message carrying ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` /
``TIMER_DELAY_MS`` at that time; a 4.x broker ignores the properties and delivers at once. The
broker's version is the ``version`` of its heartbeat answers (``BrokerHeartbeats``: 409 = 4.9.8,
479 = 5.3.3). Integrations (Django's template, Celery's ETA tasks) ask before choosing between a
timer and their 4.x fallback.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from ..client.broker_heartbeat import BrokerHeartbeats

__all__ = ["cached_timer_support", "timer_support"]


def cached_timer_support(heartbeats: BrokerHeartbeats, master_addrs: Iterable[str | None]) -> bool | None:
    """True when every address answered as a 5.x broker, False when one answered as an older
    broker or has no master address, None while one was not heard from yet."""
    unknown = False
    for addr in master_addrs:
        if addr is None:
            return False
        v5 = heartbeats.is_v5(addr)
        if v5 is False:
            return False
        unknown = unknown or v5 is None
    return None if unknown else True


async def timer_support(heartbeats: BrokerHeartbeats, master_addrs: Callable[[], Iterable[str | None]],
                        heartbeat: Callable[[], Awaitable[None]]) -> bool:
    """:func:`cached_timer_support`, sending a heartbeat first when a master was not heard from
    yet; a master still unknown after it (its heartbeat failed) counts as not supporting timers."""
    known = cached_timer_support(heartbeats, master_addrs())
    if known is None:
        await heartbeat()
        known = cached_timer_support(heartbeats, master_addrs())
    return bool(known)
