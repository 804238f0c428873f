"""Part 6: ``manage.py rocketmq_consume`` as a real child process."""

from __future__ import annotations

import io
import select
import signal
import subprocess
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from django_integration.conftest import PY, REPO, child_env, unique, wait_until
from django_integration.testapp.models import Handled, Order

pytestmark = pytest.mark.django_db(transaction=True)


def test_check_prints_the_resolved_subscriptions():
    out = io.StringIO()
    call_command("rocketmq_consume", "--check", stdout=out)
    text = out.getvalue()
    assert "django_integration.testapp.listeners.audit_order: topic=dj_orders group=dj_order_audit " \
           "TAG(created || updated) CONCURRENTLY CLUSTERING" in text
    assert text.rstrip().endswith("1 listener(s)")
    with pytest.raises(CommandError, match="no listener named nope"):
        call_command("rocketmq_consume", "--check", "--listener", "nope", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no listener of group nope"):
        call_command("rocketmq_consume", "--check", "--group", "nope", stdout=io.StringIO())


def _start(env: dict) -> subprocess.Popen:
    proc = subprocess.Popen([PY, "-m", "django", "rocketmq_consume", "--group", "dj_order_audit"], env=env,
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            line = proc.stdout.readline()
            if "listener(s) running" in line:
                return proc
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"rocketmq_consume did not start: {proc.communicate(timeout=10)}")


def _stop(proc: subprocess.Popen, sig: int) -> tuple[float, str, str]:
    started = time.monotonic()
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return time.monotonic() - started, out, err


def _audited(numbers: list[str]) -> list[str]:
    return list(Handled.objects.filter(listener="audit", key__in=numbers).values_list("key", flat=True))


def test_consume_command_runs_listeners_and_stops_on_signals_keeping_offsets(rocketmq):
    env = child_env(ROCKETMQ_TEST_DB=connection.settings_dict["NAME"], ROCKETMQ_TEST_NAMESRV=rocketmq.namesrv_addr)
    first = [unique("C") for _ in range(3)]
    for n in first:  # published after commit (autocommit) by the test app's model publisher
        Order.objects.create(number=n)
    proc = _start(env)
    try:
        wait_until(lambda: sorted(_audited(first)) == sorted(first), 40, "the child to audit 3 orders")
    finally:
        took, out, err = _stop(proc, signal.SIGTERM)
    assert proc.returncode == 0, err
    assert took < 15 and "rocketmq_consume: stopped" in out
    assert "listener started: django_integration.testapp.listeners.audit_order" in err  # Django's LOGGING
    # offsets were persisted on the way out: a restarted consumer does not redo the first three
    second = [unique("C") for _ in range(2)]
    proc = _start(env)
    try:
        for n in second:
            Order.objects.create(number=n)
        wait_until(lambda: sorted(_audited(second)) == sorted(second), 40, "the restarted child")
    finally:
        took, out, _ = _stop(proc, signal.SIGINT)
    assert proc.returncode == 0 and took < 15
    assert sorted(_audited(first)) == sorted(first)  # each exactly once


def test_database_errors_of_the_prune_do_not_kill_the_command(rocketmq, monkeypatch):
    """Issue 25, defect 3: the startup prune of the consumed-message table hits "database is
    locked" (a backlog being consumed): the command logs it, keeps its listeners running and
    prunes again later; SIGTERM still stops it cleanly."""
    import os
    import threading

    from django.db import OperationalError
    from rocketmq_sdk.integrations.django.management.commands import rocketmq_consume

    attempts: list[float] = []

    def locked(*_a, **_k):
        attempts.append(time.monotonic())
        raise OperationalError("database is locked")

    monkeypatch.setattr(rocketmq_consume, "prune_consumed_messages", locked)
    done = threading.Event()

    def stop_when_retried() -> None:
        deadline = time.monotonic() + 60
        while len(attempts) < 3 and time.monotonic() < deadline and not done.is_set():
            done.wait(0.02)
        if not done.is_set():  # the command is still running: stop it as a supervisor would
            os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=stop_when_retried, daemon=True)
    killer.start()
    out = io.StringIO()
    try:
        call_command("rocketmq_consume", "--group", "dj_order_audit", "--prune-interval", "0.05", stdout=out)
    finally:
        done.set()
        killer.join(10)
    assert len(attempts) >= 3
    assert out.getvalue().rstrip().endswith("rocketmq_consume: stopped")


def test_idempotent_handlers_on_sqlite_do_not_contend_for_the_write_lock(rocketmq, monkeypatch, caplog):
    """Issue 25, defect 3: on SQLite (one writer at a time) the idempotent listener's
    transactions of one process run one at a time, so 8 consume threads with a backlog never
    fail with "database is locked", even with a 1 ms lock timeout; every message is handled once."""
    from django.db import connections
    from rocketmq_sdk.integrations.django import rocketmq_listener, rocketmq_template
    from rocketmq_sdk.integrations.django.listeners import registry
    from rocketmq_sdk.integrations.django.testing import running_listeners

    from django_integration.conftest import create_topic

    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: other databases take concurrent writers")
    caplog.set_level("WARNING", logger="rocketmq_sdk.integrations.django")
    topic, group = unique("dj_sqlite_threads"), unique("g_sqlite_threads")
    create_topic(rocketmq, topic, queues=4)
    template = rocketmq_template()
    for i in range(60):
        template.send(topic, {"i": i})
    seen: set[int] = set()

    def handle(payload: dict) -> None:
        Handled.objects.filter(listener=group).count()
        Handled.objects.create(listener=group, key=str(payload["i"]))
        seen.add(payload["i"])

    name = unique("sqlite_threads")
    rocketmq_listener(topic=topic, consumer_group=group, idempotent=True, consume_thread_number=8, name=name)(handle)
    # the listener threads' new connections wait at most 1 ms for SQLite's lock
    monkeypatch.setitem(connections.settings["default"]["OPTIONS"], "timeout", 0.001)
    try:
        with running_listeners([name]):
            wait_until(lambda: len(seen) == 60, 60, "60 messages")  # no reads here: they would hold the lock
    finally:
        registry.pop(name, None)
        monkeypatch.undo()
    failures = [r.getMessage() for r in caplog.records if "failed on message" in r.getMessage()]
    assert failures == []
    assert sorted(int(k) for k in Handled.objects.filter(listener=group).values_list("key", flat=True)) == list(
        range(60))
