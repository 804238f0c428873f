"""RetryPolicy / Backoff (rocketmq_sdk.retry) and the shared Lifecycle (rocketmq_sdk.lifecycle)."""

from __future__ import annotations

import pytest
from rocketmq_sdk.exceptions import ClientStateError, MQBrokerError, RemotingConnectError
from rocketmq_sdk.lifecycle import Lifecycle, ServiceState
from rocketmq_sdk.protocol.codes import ResponseCode
from rocketmq_sdk.retry import (
    ConstantBackoff,
    ErrorCodeBackoff,
    ExponentialBackoff,
    NoBackoff,
    RetryPolicy,
)


class Script:
    """An attempt function that raises or returns the scripted outcomes in order."""

    def __init__(self, *outcomes: object) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    def __call__(self) -> object:
        self.calls += 1
        out = self.outcomes.pop(0)
        if isinstance(out, BaseException):
            raise out
        return out


def test_errors_are_retried_retries_times_then_the_last_is_raised():
    fail = RemotingConnectError("127.0.0.1:1")
    attempt = Script(fail, fail, fail, "never")
    with pytest.raises(RemotingConnectError):
        RetryPolicy(2).call(attempt)
    assert attempt.calls == 3


def test_success_after_failures_returns_the_result():
    attempt = Script(RemotingConnectError("a"), "ok")
    assert RetryPolicy(2).call(attempt) == "ok"
    assert attempt.calls == 2


def test_an_error_the_policy_does_not_retry_propagates_at_once():
    attempt = Script(KeyError("bug"), "never")
    with pytest.raises(KeyError):
        RetryPolicy(5).call(attempt)
    assert attempt.calls == 1
    only_503 = RetryPolicy(5, retry_on_error=lambda e: isinstance(e, MQBrokerError) and e.code == 503)
    attempt = Script(MQBrokerError(1, "x"), "never")
    with pytest.raises(MQBrokerError):
        only_503.call(attempt)
    assert attempt.calls == 1


def test_bad_results_are_retried_and_the_last_one_returned():
    policy = RetryPolicy(2, retry_on_result=lambda r: r != "SEND_OK")
    attempt = Script("FLUSH_DISK_TIMEOUT", "SLAVE_NOT_AVAILABLE", "FLUSH_DISK_TIMEOUT", "never")
    assert policy.call(attempt) == "FLUSH_DISK_TIMEOUT"
    assert attempt.calls == 3
    assert RetryPolicy(0, retry_on_result=lambda r: True).call(Script("x")) == "x"


def test_decisions_count_failures_and_retries_none_is_unlimited():
    policy = RetryPolicy(1)
    err = RemotingConnectError("a")
    assert policy.retry_error(1, err) and not policy.retry_error(2, err)
    assert RetryPolicy(None).retry_error(10_000, err)
    assert not policy.retry_result(1, "anything")  # no result check configured
    assert policy.with_retries(3).retry_error(3, err)
    with pytest.raises(ValueError):
        RetryPolicy(-1)


def test_backoffs():
    assert NoBackoff().compute(5) == 0.0
    assert ConstantBackoff(3.0).compute(1) == 3.0
    exp = ExponentialBackoff(1.0, 8.0)
    assert [exp.compute(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert exp.compute(10_000) == 8.0
    pull = ErrorCodeBackoff({ResponseCode.FLOW_CONTROL: 0.02}, ConstantBackoff(3.0))
    assert pull.compute(1, MQBrokerError(ResponseCode.FLOW_CONTROL)) == 0.02
    assert pull.compute(1, MQBrokerError(ResponseCode.SYSTEM_ERROR)) == 3.0
    assert pull.compute(1, RemotingConnectError("a")) == 3.0
    with pytest.raises(ValueError):
        ExponentialBackoff(0, 1)
    with pytest.raises(ValueError):
        ConstantBackoff(-1)


def test_call_waits_the_backoff_between_attempts(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr("rocketmq_sdk.retry.time.sleep", slept.append)
    policy = RetryPolicy(3, backoff=ExponentialBackoff(0.5, 10))
    err = RemotingConnectError("a")
    assert policy.call(Script(err, err, err, "ok")) == "ok"
    assert slept == [0.5, 1.0, 2.0]


def test_lifecycle_transitions():
    lc = Lifecycle("producer g")
    assert lc.state is ServiceState.CREATE_JUST and not lc.running
    with pytest.raises(ClientStateError, match="producer g is not running"):
        lc.check_running()
    with pytest.raises(RuntimeError):
        with lc.starting():
            raise RuntimeError("name server down")
    assert lc.state is ServiceState.CREATE_JUST  # a failed start may be retried
    with lc.starting():
        lc.set_running()
        assert lc.running
    assert lc.running
    with pytest.raises(ClientStateError, match="cannot start: it is RUNNING"):
        with lc.starting():
            pass
    assert lc.begin_shutdown() and lc.state is ServiceState.SHUTTING_DOWN
    lc.shutdown_done()
    assert lc.state is ServiceState.SHUTDOWN_ALREADY
    assert not lc.begin_shutdown()
    fresh = Lifecycle("consumer c")
    assert not fresh.begin_shutdown() and fresh.state is ServiceState.SHUTDOWN_ALREADY
