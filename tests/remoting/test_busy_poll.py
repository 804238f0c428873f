"""``BusyPoller`` and ``RemotingServer(busy_poll_us=...)``: after the server answers inline, its loop polls
(every select with timeout 0) for the adaptive window, then sleeps again; a read ends the poll;
the window halves on each poll that sees no read and drops to 0 below an eighth, and comes back
when reads arrive within it; a stopped server polls no more."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.protocol.codes import ResponseCode
from rocketmq_sdk.remoting import RemotingClient, RemotingServer
from rocketmq_sdk.remoting.busy_poll import PROBE_EVERY, BusyPoller
from rocketmq_sdk.remoting.command import RemotingCommand

from tests.conftest import run_async as run
from tests.conftest import wait_until_async as wait_for

pytestmark = pytest.mark.timeout(30)

ECHO = 1300


class FakeLoop:
    def __init__(self) -> None:
        self.ready: list = []

    def call_soon(self, cb) -> None:
        self.ready.append(cb)

    def run_once(self) -> int:
        ready, self.ready = self.ready, []
        for cb in ready:
            cb()
        return len(ready)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _poller(max_us: float = 100.0) -> tuple[BusyPoller, FakeLoop, Clock]:
    loop, clock = FakeLoop(), Clock()
    return BusyPoller(loop, max_us, clock=clock), loop, clock  # type: ignore[arg-type]


def _poll_out(p: BusyPoller, loop: FakeLoop, clock: Clock, step_s: float = 10e-6) -> int:
    """Run the loop until the poll stops; returns the polls run."""
    n = 0
    while p.polling:
        assert loop.run_once() == 1
        n += 1
        clock.t += step_s
        assert n < 10_000
    assert loop.ready == []
    return n


def test_a_write_keeps_the_loop_polling_for_the_window_then_it_sleeps() -> None:
    p, loop, clock = _poller(100)
    p.arm()
    assert p.polling and len(loop.ready) == 1
    polls = _poll_out(p, loop, clock, 10e-6)
    assert polls in (11, 12)  # 0, 10, ..., 100 µs (+1 for float rounding), then it is over
    assert (p.hits, p.misses) == (0, 1)
    assert p.window_s == pytest.approx(50e-6)


def test_misses_halve_the_window_down_to_an_eighth_then_polling_stops() -> None:
    p, loop, clock = _poller(80)
    windows = []
    for _ in range(5):
        clock.t += 1.0  # reads and writes far apart: nothing restores the window
        p.on_read()
        p.arm()
        _poll_out(p, loop, clock, 1e-6)
        windows.append(round(p.window_s * 1e6, 3))
    assert windows == [40, 20, 10, 0, 0]
    assert p.misses == 4
    clock.t += 1.0
    p.arm()
    assert not p.polling and loop.ready == []


def test_a_read_ends_the_poll_as_a_hit_and_the_answer_starts_the_next() -> None:
    p, loop, clock = _poller(100)
    p.arm()
    _poll_out(p, loop, clock)
    assert p.window_s == pytest.approx(50e-6)
    clock.t += 1.0
    p.arm()
    clock.t += 30e-6
    loop.run_once()
    p.on_read()  # a request 30 µs into a 50 µs poll
    assert (p.hits, p.misses) == (1, 1) and p.window_s == pytest.approx(100e-6)
    assert not p.polling
    loop.run_once()  # the queued poll ends quietly: not a miss
    assert p.misses == 1 and loop.ready == []
    p.arm()  # its answer: the next poll, with the full window
    start = clock.t
    _poll_out(p, loop, clock, 1e-6)
    assert clock.t - start == pytest.approx(100e-6, abs=3e-6)
    assert p.misses == 2


def test_a_read_handed_to_another_thread_leaves_the_loop_asleep_until_the_answer() -> None:
    p, loop, clock = _poller(100)
    p.arm()
    clock.t += 20e-6
    loop.run_once()
    p.on_read()  # e.g. a SYNC_FLUSH put: answered later, from the flush thread's completion
    assert loop.run_once() == 1 and loop.ready == [] and not p.polling  # no polling meanwhile
    clock.t += 500e-6
    p.arm()  # the answer
    assert p.polling and len(loop.ready) == 1


def test_an_answer_queued_while_a_poll_runs_does_not_start_a_second_one() -> None:
    p, loop, clock = _poller(100)
    p.arm()
    p.on_read()
    p.arm()  # answered inline before the queued poll ran
    assert len(loop.ready) == 1
    assert _poll_out(p, loop, clock, 10e-6) in (11, 12)


def test_a_read_soon_after_a_sleep_restores_the_window() -> None:
    p, loop, clock = _poller(100)
    for _ in range(4):
        clock.t += 1.0
        p.arm()
        _poll_out(p, loop, clock, 1e-6)
    assert p.window_s == 0
    clock.t += 1.0
    p.arm()  # window 0: no poll
    assert not p.polling and loop.ready == []
    clock.t += 1.0
    p.on_read()  # a gap longer than the window: stays asleep
    p.arm()
    assert not p.polling
    clock.t += 80e-6
    p.on_read()  # 80 µs after the last write: a 100 µs poll would have caught it
    assert p.window_s == pytest.approx(100e-6)
    p.arm()
    assert p.polling


def _collapse(p: BusyPoller, loop: FakeLoop, clock: Clock) -> None:
    while p.window_s:
        clock.t += 1.0
        p.on_read()
        p.arm()
        _poll_out(p, loop, clock, 1e-6)


def test_with_the_window_at_0_one_answer_in_probe_every_gets_a_full_poll() -> None:
    p, loop, clock = _poller(100)
    _collapse(p, loop, clock)
    misses = p.misses
    polled = []
    for i in range(3 * PROBE_EVERY):
        clock.t += 1.0  # gaps too long to restore the window
        p.on_read()
        p.arm()
        if p.polling:
            polled.append(i)
            start = clock.t
            _poll_out(p, loop, clock, 1e-6)
            assert clock.t - start == pytest.approx(100e-6, abs=3e-6)  # the full window
            assert p.window_s == 0  # a missed probe goes straight back to 0: no halving cascade
    assert polled == [PROBE_EVERY - 1, 2 * PROBE_EVERY - 1, 3 * PROBE_EVERY - 1]
    assert p.misses == misses + 3


def test_a_probe_that_catches_a_request_restores_the_window() -> None:
    p, loop, clock = _poller(100)
    _collapse(p, loop, clock)
    for _ in range(PROBE_EVERY):
        clock.t += 1.0
        p.on_read()
        p.arm()
    assert p.polling
    clock.t += 40e-6
    loop.run_once()
    p.on_read()  # the next request, 40 µs into the probe
    assert p.window_s == pytest.approx(100e-6)
    p.arm()
    assert p.polling


def test_close_stops_a_running_poll_and_later_writes_do_not_start_one() -> None:
    p, loop, clock = _poller(100)
    p.arm()
    p.close()
    assert not p.polling
    loop.run_once()
    assert loop.ready == []
    p.arm()
    assert loop.ready == [] and not p.polling


@pytest.mark.parametrize("bad", [0, -1])
def test_a_window_must_be_positive(bad: float) -> None:
    with pytest.raises(IllegalArgumentError, match="busy poll window"):
        BusyPoller(FakeLoop(), bad)  # type: ignore[arg-type]


def test_server_rejects_a_negative_busy_poll() -> None:
    with pytest.raises(IllegalArgumentError, match="busy_poll_us"):
        RemotingServer(busy_poll_us=-5)


def _echo(channel, cmd):  # answered inline, like the broker's sends and pulls that find messages
    return cmd.response(ResponseCode.SUCCESS, body=cmd.body)


def _record_select_timeouts(loop: asyncio.AbstractEventLoop) -> list:
    selector = loop._selector  # type: ignore[attr-defined]
    timeouts: list = []
    real = selector.select

    def select(timeout=None):
        timeouts.append(timeout)
        return real(timeout)

    selector.select = select
    return timeouts


async def _assert_loop_sleeps(timeouts: list) -> None:
    """The selects of a 50 ms ``asyncio.sleep`` are one blocking wait for the timer (and the
    non-blocking one that runs the woken task), not a poll loop."""
    del timeouts[:]
    await asyncio.sleep(0.05)
    assert any(t is None or t >= 0.01 for t in timeouts), timeouts
    assert sum(1 for t in timeouts if t == 0) <= 3, timeouts


async def _serve_and_send(busy_poll_us: float, processor=_echo, requests: int = 1):
    server = RemotingServer(busy_poll_us=busy_poll_us)
    server.register_processor(ECHO, processor)
    port = await server.start()
    client = RemotingClient()
    for _ in range(requests):
        resp = await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO, body=b"ping"), 5000)
        assert resp.code == ResponseCode.SUCCESS and resp.body == b"ping"
    return server, client


def test_server_loop_polls_after_a_request_then_sleeps_again() -> None:
    async def main():
        loop = asyncio.get_running_loop()
        timeouts = _record_select_timeouts(loop)
        server, client = await _serve_and_send(busy_poll_us=50_000)  # 50 ms: wide enough for CI
        try:
            poller = server.busy_poller
            assert poller is not None and poller.polling
            del timeouts[:]
            await wait_for(lambda: not poller.polling, 5.0, "the poll to end")
            assert poller.misses >= 1
            polled = [t for t in timeouts if t == 0]
            assert len(polled) >= 10, timeouts[:20]  # the loop did not sleep during the window
            await _assert_loop_sleeps(timeouts)
        finally:
            await client.close()
            await server.stop()
        assert server.busy_poller is None and not poller.polling
    run(main())


def test_answers_written_later_start_no_poll() -> None:
    """An answer that leaves after the read (a processor waiting on something else, like a
    SYNC_FLUSH put) does not keep the loop polling: other threads need the GIL then."""
    async def later(channel, cmd):
        await asyncio.sleep(0.01)
        return cmd.response(ResponseCode.SUCCESS, body=cmd.body)

    async def main():
        server, client = await _serve_and_send(busy_poll_us=50_000, processor=later, requests=3)
        try:
            poller = server.busy_poller
            assert not poller.polling and (poller.hits, poller.misses) == (0, 0)
        finally:
            await client.close()
            await server.stop()
    run(main())


def test_server_without_busy_poll_sleeps_between_requests() -> None:
    async def main():
        loop = asyncio.get_running_loop()
        timeouts = _record_select_timeouts(loop)
        server, client = await _serve_and_send(busy_poll_us=0)
        try:
            assert server.busy_poller is None
            await _assert_loop_sleeps(timeouts)
        finally:
            await client.close()
            await server.stop()
    run(main())
