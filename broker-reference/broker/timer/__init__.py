"""RocketMQ 5.x timer messages on the reference broker (issue 32; docs/rocketmq5.md)."""

from .service import TIMER_TOPIC, TimerService, deliver_time_of

__all__ = ["TIMER_TOPIC", "TimerService", "deliver_time_of"]
