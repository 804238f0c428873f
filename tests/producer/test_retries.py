"""Retry policies on a scripted fake with two broker names: sync and async retry counts,
retry_another_broker_when_not_store_ok, non-retryable codes."""

from __future__ import annotations

import pytest
from rocketmq_sdk import Message, MQBrokerError, Producer, SendStatus
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import SendMessageRequestHeader

from tests.sdk.fakes import ScriptedCluster

SEND = RequestCode.SEND_MESSAGE_V2


def brokers_tried(fake) -> list[str]:
    return [SendMessageRequestHeader.from_v2(r.ext_fields).bname for r in fake.requests_of(SEND)]


def test_async_retries_follow_their_own_setting_and_avoid_the_failed_broker():
    with ScriptedCluster(brokers=("bad", "good"), fail_send={"bad": ResponseCode.SYSTEM_ERROR}) as fake:
        with Producer("pg_r1", fake.addr, retry_times_when_send_async_failed=1, retry_times_when_send_failed=0) as p:
            results = [p.send_async(Message("TopicR", b"x")).result(5) for _ in range(6)]
        assert {r.message_queue.broker_name for r in results} == {"good"}
        tried = brokers_tried(fake)
        assert tried.count("good") == 6 and len(tried) <= 12
        # each failed attempt on "bad" is followed by a retry on "good"
        assert all(b == "good" for a, b in zip(tried, tried[1:], strict=False) if a == "bad")


def test_sync_without_retries_fails_on_the_first_error():
    with ScriptedCluster(brokers=("bad",), fail_send={"bad": ResponseCode.SYSTEM_ERROR}) as fake:
        with Producer("pg_r2", fake.addr, retry_times_when_send_failed=0) as p, pytest.raises(MQBrokerError) as e:
            p.send(Message("TopicR", b"x"))
        assert e.value.code == ResponseCode.SYSTEM_ERROR and len(fake.requests_of(SEND)) == 1


def test_sync_retries_three_attempts_in_all_by_default():
    with ScriptedCluster(brokers=("bad",), fail_send={"bad": ResponseCode.SYSTEM_ERROR}) as fake:
        with Producer("pg_r3", fake.addr) as p, pytest.raises(MQBrokerError):
            p.send(Message("TopicR", b"x"))
        assert len(fake.requests_of(SEND)) == 3


def test_a_non_retryable_code_is_not_retried():
    with ScriptedCluster(brokers=("bad",), fail_send={"bad": ResponseCode.MESSAGE_ILLEGAL}) as fake:
        with Producer("pg_r4", fake.addr) as p, pytest.raises(MQBrokerError):
            p.send(Message("TopicR", b"x"))
        assert len(fake.requests_of(SEND)) == 1


@pytest.mark.parametrize("enabled", [False, True])
def test_retry_another_broker_when_not_store_ok(enabled):
    with ScriptedCluster(brokers=("slow", "good"), fail_send={"slow": ResponseCode.FLUSH_DISK_TIMEOUT}) as fake:
        with Producer("pg_r5", fake.addr, retry_another_broker_when_not_store_ok=enabled) as p:
            results = [p.send(Message("TopicR", b"x")) for _ in range(6)]
    statuses = {r.send_status for r in results}
    if enabled:
        assert statuses == {SendStatus.SEND_OK}
    else:
        assert SendStatus.FLUSH_DISK_TIMEOUT in statuses  # returned as is, like Java's default
