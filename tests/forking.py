"""Running a test step in an ``os.fork()`` child (fork-safety tests): the child's JSON answer, a
deadline, and the child's traceback when it fails."""

from __future__ import annotations

import json
import os
import select
import signal
import traceback
from collections.abc import Callable
from typing import Any

import pytest

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")


def in_child(fn: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    """``fn()`` run in a forked child; its JSON-serialisable answer. The child ends with
    ``os._exit`` (no atexit, no pytest teardown); one that raises fails the test with its
    traceback, one that does not answer within ``timeout_s`` is killed."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            try:
                answer = {"answer": fn()}
            except BaseException:  # noqa: BLE001 - reported to the parent
                answer = {"error": traceback.format_exc()}
            os.write(w, json.dumps(answer).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        ready = select.select([fh], [], [], timeout_s)[0]
        text = fh.read() if ready else ""
    if not ready:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if not ready:
        pytest.fail(f"the forked child did not answer in {timeout_s} s")
    report = json.loads(text)
    assert "error" not in report, f"the forked child failed:\n{report['error']}"
    assert os.waitstatus_to_exitcode(status) == 0
    return report["answer"]
