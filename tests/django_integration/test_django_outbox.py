"""The transactional outbox relay under contention (issue 25, defect 2): concurrent request
writers on SQLite, database errors, and ``--once``'s exit status."""

from __future__ import annotations

import collections
import io
import signal
import subprocess
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError, close_old_connections, connection, transaction
from rocketmq_sdk.integrations.django.models import OutboxMessage
from rocketmq_sdk.integrations.django.outbox import enqueue, relay_batch

from django_integration.conftest import PY, REPO, child_env, create_topic, read_topic, unique, wait_until
from django_integration.testapp.models import Order

pytestmark = pytest.mark.django_db(transaction=True)


def _write(topic: str, writer: int, count: int, errors: list[BaseException]) -> None:
    """A request handler's transactions: an order and its outbox row, committed together."""
    try:
        for i in range(count):
            with transaction.atomic():
                Order.objects.create(number=f"{topic[-12:]}-{writer}-{i}")
                enqueue(topic, {"writer": writer, "i": i})
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)
    finally:
        close_old_connections()
        connection.close()


def test_relay_survives_concurrent_writers_and_sends_each_row_once(rocketmq):
    topic = unique("dj_outbox_busy")
    create_topic(rocketmq, topic)
    env = child_env(ROCKETMQ_TEST_DB=connection.settings_dict["NAME"], ROCKETMQ_TEST_NAMESRV=rocketmq.namesrv_addr)
    proc = subprocess.Popen([PY, "-m", "django", "rocketmq_outbox_relay", "--interval", "0.02", "--batch-size", "10"],
                            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    errors: list[BaseException] = []
    writers, per_writer = 3, 40
    try:
        threads = [threading.Thread(target=_write, args=(topic, w, per_writer, errors)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        total = writers * per_writer
        wait_until(lambda: proc.poll() is not None or not OutboxMessage.objects.filter(sent_at__isnull=True).exists(),
                   60, "the relay")
        assert proc.poll() is None, proc.communicate()[1][-3000:]  # the relay is still running
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err[-3000:]
    assert f"{total} message(s) sent" in out
    got = read_topic(rocketmq, topic, total, timeout_s=30)
    per_row = collections.Counter(m.get_property("OUTBOX_ID") for m in got)
    assert len(per_row) == total and set(per_row.values()) == {1}, per_row.most_common(3)
    assert OutboxMessage.objects.filter(sent_at__isnull=False, attempts=1).count() == total


def test_relay_rides_out_database_errors_without_resending(rocketmq, monkeypatch):
    """The row update after the send fails (the database is locked) a few times: the relay
    retries it with back-off instead of dying, and the row is sent once and marked once."""
    topic = unique("dj_outbox_locked")
    create_topic(rocketmq, topic)
    with transaction.atomic():
        for i in range(3):
            enqueue(topic, {"i": i})
    from django.db.models.query import QuerySet

    real_update = QuerySet.update
    failures = {"left": 3}

    def flaky_update(self, **kwargs):
        if self.model is OutboxMessage and "sent_at" in kwargs and failures["left"] > 0:
            failures["left"] -= 1
            raise OperationalError("database is locked")
        return real_update(self, **kwargs)

    monkeypatch.setattr(QuerySet, "update", flaky_update)
    result = relay_batch(10)
    assert (result.sent, result.failed, failures["left"]) == (3, 0, 0)
    assert relay_batch(10).sent == 0  # nothing left to send: no re-send
    got = read_topic(rocketmq, topic, 3)
    assert sorted(m.get_property("OUTBOX_ID") for m in got) == sorted(
        str(pk) for pk in OutboxMessage.objects.values_list("pk", flat=True))
    assert list(OutboxMessage.objects.values_list("attempts", flat=True)) == [1, 1, 1]


def test_relay_once_exits_non_zero_when_rows_failed():
    import socket

    from django.test.utils import override_settings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    with override_settings(ROCKETMQ={"NAME_SERVER": dead, "PRODUCER": {"GROUP": "g", "SEND_MSG_TIMEOUT": 1000}}):
        enqueue("t_outbox_down", {"a": 1})
        enqueue("t_outbox_down", {"a": 2})
        out = io.StringIO()
        with pytest.raises(CommandError, match="1 row"):
            call_command("rocketmq_outbox_relay", "--once", stdout=out)
    assert "0 message(s) sent" in out.getvalue()
    first, second = OutboxMessage.objects.order_by("id")
    assert (first.attempts, second.attempts) == (1, 0)  # stopped at the first failure: order kept
    assert first.last_error and first.sent_at is None
