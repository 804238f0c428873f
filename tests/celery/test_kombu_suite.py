"""kombu's own shared integration suite (``t/integration/common.py`` of the installed kombu's
sdist, see kombu_sdist.py) against the RocketMQ transport and the embedded reference broker,
subclassed as kombu's ``t/integration/test_redis.py`` does for Redis."""

from __future__ import annotations

import pytest
from kombu_sdist import load_common

try:
    common = load_common()
except RuntimeError as exc:  # no package index reachable
    pytest.skip(f"kombu's integration suite is not available: {exc}", allow_module_level=True)


class TestRocketMQBasicFunctionality(common.BasicFunctionality):
    pass


class TestRocketMQExchangeTypes(common.BaseExchangeTypes):
    pass


class TestRocketMQMessage(common.BaseMessage):
    pass


class TestRocketMQFailover(common.BaseFailover):
    pass


class TestRocketMQTimeToLive(common.BaseTimeToLive):
    pass


class TestRocketMQPriority(common.BasePriority):
    # as kombu's Redis transport: priority steps, the lower number served first
    PRIORITY_ORDER = "desc"


class TestRocketMQEventLoop(common.BaseEventLoop):
    # the transport joins kombu's hub (implements.asynchronous): acks from the hub's callbacks
    pass
