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
