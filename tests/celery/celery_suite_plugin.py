"""pytest plugin (``-p celery_suite_plugin``) of the run of Celery's own ``t/integration``
(celery_suite.py): registers the ``rocketmq://`` kombu alias in the process that runs the
suite and its in-process test worker, and skips the tests listed in :data:`SKIPPED` on
``rocketmq://`` with their reason (docs/celery.md lists them)."""

from __future__ import annotations

import ast
import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import rocketmq_sdk.integrations.celery  # noqa: F401  - registers rocketmq://

#: tests of Celery's suite that need something a virtual kombu transport cannot give:
#: ``{node id: reason}``, skipped on ``rocketmq://`` only (on Redis as the broker Celery marks
#: the same test xfail itself, by the URL scheme)
SKIPPED = {
    "t/integration/test_canvas.py::test_chain::test_chord_header_id_duplicated_on_rabbitmq_msg_duplication":
        "needs an AMQP broker: the test's before_task_publish handler republishes with the signal's "
        "own keyword arguments (signal=<Signal>) as message properties, which py-amqp drops and a "
        "virtual kombu transport (Redis, rocketmq://) must store as JSON (TypeError: Object of type "
        "Signal is not JSON serializable), so the duplicate it tests never exists; Celery marks it "
        "xfail for redis:// by URL scheme",
}

#: tests Celery itself skips on every broker but Redis (its own ``skipif`` on the broker URL):
#: ``{node id: Celery's reason}``. Not skipped by this plugin; ``make celery-suite`` (both brokers)
#: does not count them as "passes with Redis, not on rocketmq://"
REDIS_BROKER_ONLY = {
    "t/integration/test_connection_recovery.py::test_reconnect_cleanup_is_bounded":
        "half-open cleanup path needs a plaintext TCP redis broker (a proxy that silences Redis' socket)",
    "t/integration/test_connection_recovery.py::test_cold_shutdown_teardown_is_bounded":
        "half-open cleanup path needs a plaintext TCP redis broker (a proxy that silences Redis' socket)",
}

#: held while ``ast.parse`` builds its tree (see :func:`serialize_ast_parse`)
AST_PARSE_LOCK = threading.RLock()


def serialize_ast_parse() -> None:
    """One ``ast.parse`` at a time in this process. CPython 3.11 counts the AST constructor's
    recursion depth per interpreter, not per thread, and checks it when a tree is built: two
    threads building trees at once (the worker's threads formatting a logged traceback, whose
    3.11 caret anchors call ``ast.parse``, while pytest formats a failure or an xfail) end one of
    them with ``SystemError: AST constructor recursion depth mismatch``. In pytest's main thread
    that is an INTERNALERROR that ends the whole run (seen on 3.11.7 at
    ``test_security.py::test_security_task_done``, an xfail; CPython gh-106905, pytest #10763).
    Reentrant: a tree built from a finalizer on the same thread nests, it does not interleave."""
    parse: Callable[..., Any] = ast.parse
    if getattr(parse, "serialized", False):
        return

    @functools.wraps(parse)
    def serialized(*args: Any, **kwargs: Any) -> Any:
        with AST_PARSE_LOCK:
            return parse(*args, **kwargs)

    serialized.serialized = True  # type: ignore[attr-defined]
    ast.parse = serialized


serialize_ast_parse()


#: tests that assert the whole Redis server has no ``celery-task-meta-*`` channel subscribed
#: (``PUBSUB CHANNELS``, server-wide): in a whole run, the results of earlier tests (apps of
#: the test process, never fetched) still hold thousands of such subscriptions, so they failed on
#: any broker; run first, before anything of the suite has subscribed
RUN_FIRST = {
    "t/integration/test_redis_backend.py::test_pubsub_subscribe_churn_while_draining",
    "t/integration/test_redis_backend.py::test_pubsub_reentrant_cancel_from_finalizer",
}


#: Celery's own per-test limits (``@pytest.mark.timeout``) that its CI backs with reruns
#: (``flaky(reruns=2)``; this run has none) and that the test's own task sleeps nearly fill:
#: ``{node id: (limit in s, why)}`` (docs/celery.md)
RELAXED_LIMITS = {
    "t/integration/test_tasks.py::test_tasks::test_revoked_by_headers_complex_canvas": (
        120, "20 s in Celery (test and fixtures) for 22 canvases of 2 s tasks on the session "
             "worker's single process: the body alone took 23.0 s on rocketmq:// and 22.6 s on "
             "Redis as the broker at load 16-20 on 2 cores, every subtest passing; with the "
             "teardown's wait for the canvases' leftover tasks 47 s"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.nodeid not in RUN_FIRST)   # stable: the rest keeps its order
    for item in items:
        relaxed = RELAXED_LIMITS.get(item.nodeid)
        if relaxed:
            item.own_markers[:] = [m for m in item.own_markers if m.name != "timeout"]
            item.add_marker(pytest.mark.timeout(relaxed[0]))
    if not os.environ.get("TEST_BROKER", "").startswith("rocketmq://"):
        return
    if os.environ.get("CELERY_SUITE_RUN_SKIPPED") == "1":   # recheck the reasons: run them anyway
        return
    for item in items:
        reason = SKIPPED.get(item.nodeid.split("[", 1)[0])
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"on rocketmq:// (tests/celery/celery_suite_plugin.py): {reason}"))


@pytest.fixture(autouse=True)
def _restore_task_join_will_block() -> Iterator[None]:
    """Each test leaves Celery's process-wide "a result.get() here would block a worker" flag
    (``celery._state``) as it found it. Building a worker sets it (``app.Worker(...)``: the pool
    step's ``create`` runs in the constructor), and ``test_worker.py``'s Django fix-up tests build
    workers in the test process; the session worker clears it only when it starts, so in a whole
    run (the session worker started long before) every later ``result.get()`` in the test process
    raised "Never call result.get() within a task!" (``test_pidbox_reset_after_repeated_control_errors``)."""
    from celery._state import _set_task_join_will_block, task_join_will_block

    before = task_join_will_block()
    yield
    _set_task_join_will_block(before)
