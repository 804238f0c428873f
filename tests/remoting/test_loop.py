"""EventLoopThread: run/submit/call_soon/timeout/stop/fork."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest
from rocketmq_sdk.exceptions import ClientStateError, RemotingTimeoutError
from rocketmq_sdk.remoting.loop import EventLoopThread

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def elt():
    t = EventLoopThread("test-io")
    yield t
    t.stop()


def test_run_returns_result_on_the_loop_thread(elt):
    async def where():
        return threading.current_thread().name

    assert elt.run(where(), 5) == "test-io"
    assert not elt.in_loop_thread and elt.is_running


def test_run_propagates_the_coroutines_exception(elt):
    async def boom():
        raise KeyError("nope")

    with pytest.raises(KeyError):
        elt.run(boom(), 5)

    async def own_timeout():
        raise TimeoutError("inner")

    with pytest.raises(TimeoutError, match="inner"):
        elt.run(own_timeout(), 5)


def test_run_timeout_cancels_the_coroutine(elt):
    cancelled = threading.Event()

    async def slow():
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(RemotingTimeoutError):
        elt.run(slow(), 0.05)
    assert cancelled.wait(5)


def test_submit_and_call_soon(elt):
    async def add(a, b):
        return a + b

    futures = [elt.submit(add(i, 1)) for i in range(100)]
    assert [f.result(5) for f in futures] == list(range(1, 101))
    done = threading.Event()
    seen = []
    elt.call_soon(lambda x: (seen.append((x, threading.current_thread().name)), done.set()), 7)
    assert done.wait(5) and seen == [(7, "test-io")]


def test_run_from_the_loop_thread_is_refused(elt):
    async def nested():
        async def inner():
            return 1
        with pytest.raises(ClientStateError):
            elt.run(inner(), 1)
        return "ok"

    assert elt.run(nested(), 5) == "ok"


def test_stop_is_idempotent_and_refuses_later_use():
    t = EventLoopThread("stop-io")
    t.stop()
    t.stop()
    assert not t.is_running and not t._thread.is_alive()

    async def never():
        return 1

    with pytest.raises(ClientStateError):
        t.run(never(), 1)
    with pytest.raises(ClientStateError):
        t.submit(never())
    with pytest.raises(ClientStateError):
        t.call_soon(print)


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs fork()")
def test_use_after_fork_in_the_child_raises_client_state_error(elt):
    async def one():
        return 1

    assert elt.run(one(), 5) == 1
    pid = os.fork()
    if pid == 0:  # child: must refuse at once instead of hanging
        code = 1
        try:
            elt.run(one(), 1)
        except ClientStateError:
            code = 0
        except BaseException:
            code = 2
        try:
            elt.stop()  # harmless in the child
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert elt.run(one(), 5) == 1  # the parent keeps working
