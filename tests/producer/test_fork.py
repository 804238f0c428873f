"""Fork safety: a producer started before fork() raises a clear ClientStateError in the child
(never hangs) and keeps working in the parent; a new producer in the child works."""

from __future__ import annotations

import os
import time

import pytest
from rocketmq_sdk import Message, Producer, SendStatus

from .conftest import unique

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _wait_child(pid: int, timeout_s: float = 20.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the child process hung")


def _child(namesrv: str, topic: str, producer: Producer) -> int:
    from rocketmq_sdk.exceptions import ClientStateError

    code = 0
    for call in (lambda: producer.send(Message(topic, b"x")),
                 lambda: producer.send_async(Message(topic, b"x")),
                 lambda: producer.send_oneway(Message(topic, b"x"))):
        try:
            call()
            code |= 1
        except ClientStateError as exc:
            if "fork()" not in str(exc):
                code |= 2
    producer.shutdown()  # returns at once in the child
    with Producer(unique("pg_child"), namesrv) as fresh:
        if fresh.send(Message(topic, b"from child")).send_status is not SendStatus.SEND_OK:
            code |= 4
    return code


def test_producer_used_after_fork_raises_a_clear_error(cluster):
    topic = unique("TopicFork")
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        p.send(Message(topic, b"before fork"))
        pid = os.fork()
        if pid == 0:  # child
            code = 99
            try:
                code = _child(cluster.namesrv_addr, topic, p)
            finally:
                os._exit(code)
        assert _wait_child(pid) == 0
        assert p.send(Message(topic, b"parent still works")).send_status is SendStatus.SEND_OK
