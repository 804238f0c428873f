"""Every consumer moves through the shared lifecycle (``sdk/lifecycle.py``, Java ``ServiceState``):
a start that fails leaves it startable, shutdown is idempotent, a shut-down consumer refuses to
start again. No broker needed: the failures happen before anything is sent."""

from __future__ import annotations

import pytest
from rocketmq_sdk import LitePullConsumer, PullConsumer, PushConsumer
from rocketmq_sdk.exceptions import ClientStateError
from rocketmq_sdk.lifecycle import ServiceState


def test_push_consumer_start_failures_leave_it_startable():
    c = PushConsumer("lc_push", "127.0.0.1:1")
    with pytest.raises(ClientStateError, match="listener"):
        c.start()
    assert c.state is ServiceState.CREATE_JUST and not c.running
    c.register_message_listener(lambda msgs, ctx: None)
    with pytest.raises(ClientStateError, match="subscribe"):
        c.start()
    assert c.state is ServiceState.CREATE_JUST
    c.shutdown()
    c.shutdown()  # idempotent
    assert c.state is ServiceState.SHUTDOWN_ALREADY and "SHUTDOWN_ALREADY" in repr(c)
    with pytest.raises(ClientStateError, match="cannot start: it is SHUTDOWN_ALREADY"):
        c.start()
    with pytest.raises(ClientStateError, match="before start"):
        c.register_message_listener(lambda msgs, ctx: None)


@pytest.mark.parametrize("cls", [PullConsumer, LitePullConsumer])
def test_active_consumers_need_a_name_server_and_are_not_started_before_start(cls, monkeypatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    monkeypatch.delenv("ROCKETMQ_NAMESRV_DOMAIN", raising=False)
    c = cls("lc_active")
    with pytest.raises(ClientStateError, match="no name server"):
        c.start()
    assert c.state is ServiceState.CREATE_JUST
    with pytest.raises(ClientStateError, match="not started"):
        _ = c.offset_store
    with pytest.raises(ClientStateError, match="not started"):
        _ = c.instance
    c.shutdown()
    assert c.state is ServiceState.SHUTDOWN_ALREADY


def test_lite_pull_poll_needs_a_running_consumer():
    c = LitePullConsumer("lc_lite", "127.0.0.1:1")
    with pytest.raises(ClientStateError, match="is not running"):
        c.poll(0)


def test_a_start_refused_by_the_client_instance_leaves_no_offset_store_behind(monkeypatch):
    from rocketmq_sdk.client.instance import MQClientInstance

    def refuse(self, consumer):
        raise ClientStateError(f"consumer group {consumer.group} is already registered")

    monkeypatch.setattr(MQClientInstance, "register_consumer", refuse)
    c = PullConsumer("lc_refused", "127.0.0.1:1")
    with pytest.raises(ClientStateError, match="already registered"):
        c.start()  # refused after the client instance and the offset store were made
    assert c.state is ServiceState.CREATE_JUST
    with pytest.raises(ClientStateError, match="not started"):
        _ = c.offset_store
    with pytest.raises(ClientStateError, match="not started"):
        _ = c.instance
