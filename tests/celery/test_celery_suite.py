"""Celery's own integration suite (``t/integration`` of the installed celery's sdist, see
celery_suite.py) against ``rocketmq://`` on a broker of its own, with a private redis-server as
the result backend: a fixed subset here (revocation, expiry, retry, inspect, canvas: the parts
that depend on the broker's delivery and broadcast timing); the whole suite, side by side with
Redis as the broker, is ``make celery-suite``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from celery_suite import (
    junit_name,
    outcomes,
    redis_server,
    redis_server_path,
    run_suite,
    suite_dir,
    worse_than_redis,
)
from rocketmq_broker.embedded import start_dev_cluster

from tests.conftest import env_broker_config

SUBSET = [
    "t/integration/test_tasks.py::test_tasks::test_expired",
    "t/integration/test_tasks.py::test_tasks::test_revoked",
    "t/integration/test_tasks.py::test_tasks::test_revoked_by_headers_simple_canvas",
    "t/integration/test_tasks.py::test_tasks::test_revoke_by_stamped_headers_no_match",
    "t/integration/test_tasks.py::test_tasks::test_wrong_arguments",
    "t/integration/test_tasks.py::test_tasks::test_retry",
    "t/integration/test_tasks.py::test_tasks::test_retry_switches_from_kwargs_to_args",
    "t/integration/test_inspect.py",
    "t/integration/test_canvas.py::test_chain::test_simple_chain",
    "t/integration/test_canvas.py::test_group::test_parent_ids",
    "t/integration/test_canvas.py::test_chord::test_group_chain",
    # a chord whose header fails: the Redis result backend logs "Chord ... raised" with its
    # traceback in the session worker's pool process, then the pool's own "succeeded"/"raised"
    # records must still reach the test process (they did not without tblib, docs/celery.md)
    "t/integration/test_group_chains.py::test_group_chains::test_pending_chord_keeps_header_errback",
    "t/integration/test_tasks.py::test_trace_log_arguments",
]

#: Celery tests that expect the worker to hold an ETA task until it is due: on a RocketMQ 5.x
#: broker the task waits in the broker as a timer message instead (docs/celery.md), so the worker
#: has nothing scheduled and these fail, by design
ETA_HELD_BY_THE_WORKER = {"t.integration.test_inspect.test_Inspect::test_scheduled"}


def test_celery_integration_suite_subset(tmp_path):
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (make test installs it when root with apt-get)")
    try:
        suite_dir()
    except RuntimeError as exc:  # no package index reachable
        pytest.skip(f"Celery's integration suite is not available: {exc}")
    junit = tmp_path / "suite.xml"
    with redis_server() as port, start_dev_cluster(broker_config=env_broker_config() or None) as cluster:
        proc = run_suite(f"rocketmq://{cluster.namesrv_addr}", port, SUBSET, junit, timeout_s=900)
    results = outcomes(junit)
    assert len(results) >= len(SUBSET), proc.stdout[-3000:]
    on_5x = env_broker_config().get("broker_version", "4").startswith("5")
    expected_failures = ETA_HELD_BY_THE_WORKER if on_5x else set()
    bad = {name: outcome for name, outcome in results.items()
           if outcome != "passed" and name not in expected_failures}
    assert not bad, f"{bad}\n{proc.stdout[-6000:]}"
    assert {name: results.get(name) for name in expected_failures} == dict.fromkeys(expected_failures, "failed"), \
        proc.stdout[-6000:]


def test_a_listed_skip_is_named_as_in_the_junit_report(tmp_path):
    """``make celery-suite`` (both brokers) exempts the tests skipped on rocketmq:// with a listed
    reason (celery_suite_plugin.SKIPPED, pytest node ids) from "passes with Redis but not on
    rocketmq://": the node ids must map to the names pytest's JUnit report gives them."""
    (tmp_path / "t" / "integration").mkdir(parents=True)
    (tmp_path / "t" / "integration" / "test_x.py").write_text(
        "import pytest\n"
        "class test_k:\n    def test_m(self): pass\n"
        "def test_f(): pass\n"
        "@pytest.mark.parametrize('p', [1])\ndef test_p(p): pass\n")
    junit = tmp_path / "r.xml"
    # a clean pytest: the whole suite's process has DJANGO_SETTINGS_MODULE set (tests/django_integration),
    # which pytest-django in the child would try to import from tmp_path
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTEST_ADDOPTS")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:django",
                           "--rootdir", str(tmp_path), "-o", "python_classes=test_*", "--junitxml", str(junit),
                           "t/integration/test_x.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    names = {n.split("[", 1)[0] for n in outcomes(junit)}
    assert names == {junit_name("t/integration/test_x.py::test_k::test_m"), junit_name("t/integration/test_x.py::test_f"),
                     junit_name("t/integration/test_x.py::test_p")}


def test_the_suite_process_builds_one_syntax_tree_at_a_time():
    """The runner's plugin serializes ``ast.parse`` (CPython 3.11's per-interpreter AST recursion
    counter, celery_suite_plugin.serialize_ast_parse): a second thread's parse waits for the first."""
    import ast
    import threading

    import celery_suite_plugin

    done = threading.Event()
    with celery_suite_plugin.AST_PARSE_LOCK:        # a parse in progress on this thread
        worker = threading.Thread(target=lambda: (ast.parse("x = 1"), done.set()), daemon=True)
        worker.start()
        assert not done.wait(0.2), "a parse on another thread ran while one was in progress"
        assert isinstance(ast.parse("y = [1, (2, 3)]"), ast.Module)   # reentrant on the same thread
    assert done.wait(10)


def test_only_listed_skips_are_exempt_from_passing_as_on_redis():
    """``make celery-suite`` (both brokers) fails on a test passing with Redis but not on
    rocketmq://, except a skip with a listed reason: this runner's (the AMQP-only test) or
    Celery's own on every broker but Redis (test_connection_recovery's half-open tests)."""
    amqp = junit_name("t/integration/test_canvas.py::test_chain::test_chord_header_id_duplicated_on_rabbitmq_msg_duplication")
    half_open = junit_name("t/integration/test_connection_recovery.py::test_reconnect_cleanup_is_bounded")
    other = junit_name("t/integration/test_tasks.py::test_tasks::test_revoked")
    redis = {amqp: "passed", half_open: "passed", other: "passed", f"{other}[x]": "passed"}
    assert worse_than_redis(redis, {amqp: "skipped", half_open: "skipped", other: "passed", f"{other}[x]": "passed"}) == []
    assert worse_than_redis(redis, {amqp: "skipped", half_open: "failed", other: "skipped", f"{other}[x]": "passed"}) \
        == [half_open, other]
