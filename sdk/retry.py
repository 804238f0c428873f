"""Retry policy and backoff shared by the producer's send paths and the consumers' pull loops.

The shape follows redis-py's ``Retry``/``Backoff``: a :class:`RetryPolicy` decides *whether* to
try again (how many retries, which errors and which results count as failures) and a
:class:`Backoff` says *how long* to wait first. Both are small, immutable and cheap to consult, so
the fast paths (a send in the caller's thread, an asynchronous send's callback) ask the same
object as the blocking loops, with no per-call allocation.

RocketMQ behaviour they express:

- sends: ``retryTimesWhenSendFailed`` (sync, default 2) / ``retryTimesWhenSendAsyncFailed``
  (async) more attempts, immediately, on a remoting error or one of the broker codes the Java
  producer retries, and on a non-``SEND_OK`` status when ``retryAnotherBrokerWhenNotStoreOK``;
- pulls: unlimited retries, ``pullTimeDelayMillsWhenException`` (3000 ms) after an error, 20 ms
  after a ``FLOW_CONTROL`` answer (:class:`ErrorCodeBackoff`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from .exceptions import MQBrokerError, MQError

__all__ = ["Backoff", "ConstantBackoff", "ErrorCodeBackoff", "ExponentialBackoff", "NoBackoff",
           "RetryPolicy"]

T = TypeVar("T")


class Backoff(Protocol):
    """How long to wait before the next attempt."""

    def compute(self, failures: int, error: BaseException | None = None) -> float:
        """Seconds to wait after ``failures`` (≥ 1) failed attempts, the last one ``error``
        (None for a result judged a failure)."""
        ...


class NoBackoff:
    """Retry at once (the producer's policy: the next attempt goes to another broker)."""

    __slots__ = ()

    def compute(self, failures: int, error: BaseException | None = None) -> float:
        return 0.0

    def __repr__(self) -> str:
        return "NoBackoff()"


class ConstantBackoff:
    """The same wait after every failure.

    Args:
        delay_s: seconds (≥ 0).
    """

    __slots__ = ("delay_s",)

    def __init__(self, delay_s: float) -> None:
        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {delay_s}")
        self.delay_s = float(delay_s)

    def compute(self, failures: int, error: BaseException | None = None) -> float:
        return self.delay_s

    def __repr__(self) -> str:
        return f"ConstantBackoff({self.delay_s})"


class ExponentialBackoff:
    """``base_s * 2 ** (failures - 1)``, at most ``cap_s`` (route lookups: 1, 2, 4 s...).

    Args:
        base_s: the first wait, seconds (> 0).
        cap_s: the longest wait, seconds (≥ ``base_s``).
    """

    __slots__ = ("base_s", "cap_s")

    def __init__(self, base_s: float, cap_s: float) -> None:
        if base_s <= 0 or cap_s < base_s:
            raise ValueError(f"need 0 < base_s <= cap_s, got base_s={base_s}, cap_s={cap_s}")
        self.base_s = float(base_s)
        self.cap_s = float(cap_s)

    def compute(self, failures: int, error: BaseException | None = None) -> float:
        if failures <= 1:
            return self.base_s
        return min(self.cap_s, self.base_s * 2.0 ** min(failures - 1, 62))

    def __repr__(self) -> str:
        return f"ExponentialBackoff({self.base_s}, {self.cap_s})"


class ErrorCodeBackoff:
    """A wait chosen by the broker's response code of the last error, else ``default``.

    Args:
        delays_s: response code → seconds, e.g. ``{ResponseCode.FLOW_CONTROL: 0.02}``.
        default: the backoff for other errors and for results judged failures.
    """

    __slots__ = ("delays_s", "default")

    def __init__(self, delays_s: Mapping[int, float], default: Backoff) -> None:
        self.delays_s = dict(delays_s)
        self.default = default

    def compute(self, failures: int, error: BaseException | None = None) -> float:
        if isinstance(error, MQBrokerError):
            delay = self.delays_s.get(error.code)
            if delay is not None:
                return delay
        return self.default.compute(failures, error)

    def __repr__(self) -> str:
        return f"ErrorCodeBackoff({self.delays_s!r}, {self.default!r})"


NO_BACKOFF = NoBackoff()


def _any_mq_error(error: BaseException) -> bool:
    return isinstance(error, MQError)


class RetryPolicy:
    """Whether to try again, and after how long.

    Args:
        retries: attempts after the first (≥ 0); None retries without limit (the pull loops).
        backoff: the wait before each retry (default none).
        retry_on_error: which exceptions are worth another attempt (default: any ``MQError``);
            others propagate at once.
        retry_on_result: which *results* are failures worth another attempt (default: none),
            e.g. a send status other than ``SEND_OK``. When the retries are used up the last
            result is returned, not raised.
        refresh_route_on_error: which exceptions mean the route that chose the address is
            stale (default: none), so the caller refreshes it before the next attempt: the
            producer's sends, on connection refused/reset or SERVICE_NOT_AVAILABLE (14), as a
            broker name's master moved (DLedger failover) — not a Java setting (Java waits for
            its 30 s route poll).

    The policy holds no per-call state: ``failures`` is passed in, so one instance serves every
    thread and every send in flight.
    """

    __slots__ = ("retries", "backoff", "retry_on_error", "retry_on_result", "refresh_route_on_error")

    def __init__(self, retries: int | None, *, backoff: Backoff = NO_BACKOFF,
                 retry_on_error: Callable[[BaseException], bool] = _any_mq_error,
                 retry_on_result: Callable[[Any], bool] | None = None,
                 refresh_route_on_error: Callable[[BaseException], bool] | None = None) -> None:
        if retries is not None and retries < 0:
            raise ValueError(f"retries must be >= 0 or None, got {retries}")
        self.retries = retries
        self.backoff = backoff
        self.retry_on_error = retry_on_error
        self.retry_on_result = retry_on_result
        self.refresh_route_on_error = refresh_route_on_error

    def with_retries(self, retries: int | None) -> RetryPolicy:
        """The same policy with another retry count."""
        return RetryPolicy(retries, backoff=self.backoff, retry_on_error=self.retry_on_error,
                           retry_on_result=self.retry_on_result, refresh_route_on_error=self.refresh_route_on_error)

    def stale_route(self, error: BaseException) -> bool:
        """Does ``error`` mean the route that chose the failed address is stale?"""
        check = self.refresh_route_on_error
        return check is not None and check(error)

    def retry_error(self, failures: int, error: BaseException) -> bool:
        """After ``failures`` (≥ 1) failed attempts, the last raising ``error``: try again?"""
        return (self.retries is None or failures <= self.retries) and self.retry_on_error(error)

    def retry_result(self, failures: int, result: Any) -> bool:
        """After ``failures`` (≥ 1) attempts, the last returning ``result``: is it a failure
        worth another attempt (and is one left)?"""
        check = self.retry_on_result
        return check is not None and (self.retries is None or failures <= self.retries) and check(result)

    def delay_s(self, failures: int, error: BaseException | None = None) -> float:
        """Seconds to wait before the next attempt (the :class:`Backoff`'s answer)."""
        return self.backoff.compute(failures, error)

    def call(self, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` until it succeeds or the policy says stop (blocking; waits with
        ``time.sleep``). Returns the last result; raises the last error.

        The SDK's own loops (``producer/dispatch.py``, ``consumer/pull_result.py``) ask
        :meth:`retry_error` / :meth:`retry_result` / :meth:`delay_s` directly, as they also do
        fault bookkeeping between attempts and never block their I/O loop; this is the whole loop
        for an application's own calls (e.g. an admin operation during a broker restart)."""
        failures = 0
        while True:
            try:
                result = attempt()
            except Exception as exc:
                failures += 1
                if not self.retry_error(failures, exc):
                    raise
                delay = self.backoff.compute(failures, exc)
            else:
                if self.retry_on_result is None or not self.retry_result(failures + 1, result):
                    return result
                failures += 1
                delay = self.backoff.compute(failures, None)
            if delay > 0:
                time.sleep(delay)

    def __repr__(self) -> str:
        return f"RetryPolicy(retries={self.retries}, backoff={self.backoff!r})"
