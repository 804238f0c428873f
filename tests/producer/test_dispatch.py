"""SendDispatcher (rocketmq_sdk.producer.dispatch) without a network: which queues the attempts
go to, when it retries, and what the latency fault tolerance learns, for the blocking and the
asyncio loop alike."""

from __future__ import annotations

import asyncio
import time

import pytest
from rocketmq_sdk.client.route import TopicPublishInfo
from rocketmq_sdk.config import ProducerConfig
from rocketmq_sdk.exceptions import MQBrokerError, RemotingConnectError
from rocketmq_sdk.producer.dispatch import SendDispatcher
from rocketmq_sdk.protocol.codes import ResponseCode
from rocketmq_sdk.protocol.message import MessageQueue, SendResult, SendStatus

QUEUES = [MessageQueue("T", b, q) for b in ("broker-a", "broker-b") for q in range(2)]


def _result(mq: MessageQueue, status: SendStatus = SendStatus.SEND_OK) -> SendResult:
    return SendResult(status, "id", "off", mq, 0)


class Script:
    """An attempt function: per broker name, the outcomes of its successive attempts."""

    def __init__(self, **outcomes: list) -> None:
        self.outcomes = {name.replace("_", "-"): list(v) for name, v in outcomes.items()}
        self.tried: list[str] = []

    def __call__(self, mq, p, deadline, timeout_ms):
        self.tried.append(mq.broker_name)
        out = self.outcomes[mq.broker_name].pop(0)
        if isinstance(out, BaseException):
            raise out
        return _result(mq, out)


def _dispatcher(**config) -> SendDispatcher:
    return SendDispatcher(ProducerConfig.from_kwargs(namesrv_addr="127.0.0.1:9", **config))


def _run(d: SendDispatcher, script: Script, *, asyncio_loop: bool, attempts: int = 0, avoid: str | None = None,
         info: TopicPublishInfo | None = None):
    if info is None:
        info = TopicPublishInfo("T", QUEUES)  # its round robin starts at a random queue, as Java's
    deadline = time.monotonic() + 3
    if not asyncio_loop:
        return d.send_blocking(info, d.policy, script, None, deadline, 3000)

    async def attempt(mq, p, dl, t):
        return script(mq, p, dl, t)

    return asyncio.run(d.send(info, d.policy, attempt, None, deadline, 3000, attempts, avoid))


@pytest.mark.parametrize("asyncio_loop", [False, True])
def test_a_retryable_error_is_retried_on_the_other_broker(asyncio_loop):
    down = RemotingConnectError("127.0.0.1:1")
    script = Script(broker_a=[down, down, down], broker_b=[SendStatus.SEND_OK] * 3)
    result = _run(_dispatcher(), script, asyncio_loop=asyncio_loop)
    assert result.send_status is SendStatus.SEND_OK and result.message_queue.broker_name == "broker-b"
    assert script.tried[-1] == "broker-b" and len(script.tried) <= 2
    if len(script.tried) == 2:
        assert script.tried[0] == "broker-a"


@pytest.mark.parametrize("asyncio_loop", [False, True])
def test_errors_stop_after_the_retries_and_unlisted_codes_at_once(asyncio_loop):
    busy = MQBrokerError(ResponseCode.SYSTEM_ERROR, "busy")
    script = Script(broker_a=[busy] * 3, broker_b=[busy] * 3)
    with pytest.raises(MQBrokerError):
        _run(_dispatcher(), script, asyncio_loop=asyncio_loop)
    assert len(script.tried) == 3  # retry_times_when_send_failed=2: three attempts in all
    assert script.tried[0] != script.tried[1] != script.tried[2]  # each retry avoids the last broker
    refused = MQBrokerError(ResponseCode.MESSAGE_ILLEGAL, "illegal")
    script = Script(broker_a=[refused], broker_b=[refused])
    with pytest.raises(MQBrokerError):
        _run(_dispatcher(), script, asyncio_loop=asyncio_loop)
    assert len(script.tried) == 1


@pytest.mark.parametrize("enabled", [False, True])
def test_not_stored_ok_results_are_retried_only_when_configured(enabled):
    slow = SendStatus.FLUSH_DISK_TIMEOUT
    script = Script(broker_a=[slow] * 3, broker_b=[slow] * 3)
    result = _run(_dispatcher(retry_another_broker_when_not_store_ok=enabled), script, asyncio_loop=False)
    assert result.send_status is slow  # the last result is returned, not raised
    assert len(script.tried) == (3 if enabled else 1)


def test_the_asyncio_loop_continues_after_the_callback_transports_first_attempt():
    down = RemotingConnectError("127.0.0.1:1")
    script = Script(broker_a=[down] * 3, broker_b=[down] * 3)
    with pytest.raises(RemotingConnectError):
        _run(_dispatcher(), script, asyncio_loop=True, attempts=1, avoid="broker-a")
    assert script.tried == ["broker-b", "broker-a"]  # attempts 2 and 3 of 3, the first avoiding broker-a


def test_failures_teach_the_latency_fault_tolerance():
    d = _dispatcher(send_latency_fault_enable=True)
    down = RemotingConnectError("127.0.0.1:1")
    script = Script(broker_a=[down], broker_b=[SendStatus.SEND_OK] * 20)
    info = TopicPublishInfo("T", QUEUES)  # one route: its round robin goes on from send to send
    for _ in range(4):  # round robin over a0, a1, b0, b1: one of these sends starts on broker-a
        _run(d, script, asyncio_loop=False, info=info)
    assert script.tried.count("broker-a") == 1
    for _ in range(8):
        _run(d, script, asyncio_loop=False, info=info)
    assert script.tried.count("broker-a") == 1  # isolated after its failure: not tried again
    assert not d.fault.table.items()["broker-a"].available
    assert d.fault.table.items()["broker-b"].available
