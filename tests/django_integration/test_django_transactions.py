"""Part 3: transactional messages bound to the database, and the transactional outbox."""

from __future__ import annotations

import io
import json
import select
import signal
import subprocess
import time
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from rocketmq_sdk import LocalTransactionState, Message, MessageExt
from rocketmq_sdk.integrations.django import rocketmq_template
from rocketmq_sdk.integrations.django.models import OutboxMessage, TransactionRecord
from rocketmq_sdk.integrations.django.outbox import enqueue
from rocketmq_sdk.integrations.django.transactions import (
    DatabaseTransactionListener,
    close,
    transaction_producer,
)

from django_integration.conftest import PY, child_env, create_topic, read_topic, unique, wait_until
from django_integration.testapp.models import Order
from tests.forking import in_child

pytestmark = pytest.mark.django_db(transaction=True)


def _visible(cluster, topic: str, expected: int, timeout_s: float = 20.0) -> list:
    return read_topic(cluster, topic, expected, timeout_s=timeout_s)


def test_commit_writes_the_row_and_delivers_the_message(rocketmq):
    topic = unique("dj_tx")
    create_topic(rocketmq, topic)

    def local(msg, arg):
        Order.objects.create(number=arg, amount=Decimal("10"))

    result = rocketmq_template().send_in_transaction(f"{topic}:paid", {"order": "TX1"}, local, "TX1", keys="TX1")
    assert result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
    assert Order.objects.filter(number="TX1").exists()
    assert TransactionRecord.objects.filter(transaction_id=result.msg_id, topic=topic).exists()
    (m,) = _visible(rocketmq, topic, 1)
    assert json.loads(m.body) == {"order": "TX1"} and m.tags == "paid"


def test_exception_rolls_back_db_and_message_and_is_raised(rocketmq):
    topic = unique("dj_tx_rb")
    create_topic(rocketmq, topic)

    def local(msg, arg):
        Order.objects.create(number="RB1")
        raise ValueError("card declined")

    with pytest.raises(ValueError, match="card declined"):
        rocketmq_template().send_in_transaction(topic, {"order": "RB1"}, local)
    assert not Order.objects.filter(number="RB1").exists()
    assert TransactionRecord.objects.count() == 0
    # a committed marker sent after it is the only message that ever becomes visible
    rocketmq_template().send_in_transaction(topic, {"order": "marker"}, lambda m, a: None)
    assert [json.loads(m.body) for m in _visible(rocketmq, topic, 1)] == [{"order": "marker"}]


def test_refused_inside_an_atomic_block():
    with transaction.atomic(), pytest.raises(RuntimeError, match="must not run inside atomic"):
        rocketmq_template().send_in_transaction("t", b"x", lambda m, a: None)


def test_check_answers_from_the_table():
    listener = DatabaseTransactionListener("g", unknown_timeout_ms=60_000)
    now = int(time.time() * 1000)
    TransactionRecord.objects.create(transaction_id="ID-COMMITTED", producer_group="g", topic="t")

    def ext(uniq: str, born: int) -> MessageExt:
        return MessageExt(topic="t", properties={"UNIQ_KEY": uniq}, born_timestamp=born)

    assert listener.check_local_transaction(ext("ID-COMMITTED", now)) is LocalTransactionState.COMMIT_MESSAGE
    assert listener.check_local_transaction(ext("ID-YOUNG", now)) is LocalTransactionState.UNKNOW
    assert listener.check_local_transaction(ext("ID-OLD", now - 120_000)) is LocalTransactionState.ROLLBACK_MESSAGE


CHILD = r"""
import sys, django
django.setup()
from rocketmq_sdk.integrations.django import rocketmq_template
from rocketmq_sdk.integrations.django.transactions import local_transaction_committed
from django_integration.testapp.models import Order

def committed(sender, message, transaction_id, **kw):
    print("COMMITTED", transaction_id, flush=True)
    sys.stdin.read()          # wait here (before END_TRANSACTION) until the test kills us

local_transaction_committed.connect(committed)
rocketmq_template().send_in_transaction(sys.argv[1], {"order": "K1"},
                                        lambda msg, arg: Order.objects.create(number="K1"), keys="K1")
print("END_TRANSACTION sent", flush=True)
"""


def _read_line(proc: subprocess.Popen, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            return proc.stdout.readline()
        if proc.poll() is not None:
            break
    raise AssertionError(f"child said nothing in {timeout_s} s (exit {proc.poll()}): {proc.stderr.read()}")


def test_process_killed_after_db_commit_before_end_transaction(rocketmq, caplog):
    """The child commits the database transaction and is SIGKILLed before END_TRANSACTION; the
    broker's check, answered by a restarted producer of the group from the table, commits."""
    topic = unique("dj_tx_kill")
    create_topic(rocketmq, topic)
    env = child_env(ROCKETMQ_TEST_DB=connection.settings_dict["NAME"],
                    ROCKETMQ_TEST_NAMESRV=rocketmq.namesrv_addr)
    proc = subprocess.Popen([PY, "-c", CHILD, topic], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = _read_line(proc, 30)
        assert line.startswith("COMMITTED "), line
        tx_id = line.split()[1]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdin.close()
    assert proc.returncode == -signal.SIGKILL
    assert "END_TRANSACTION sent" not in proc.stdout.read()
    # the database committed...
    assert Order.objects.filter(number="K1").exists()
    assert TransactionRecord.objects.filter(transaction_id=tx_id).exists()
    # ...the half message is not visible (no producer of the group is alive to answer a check)...
    assert read_topic(rocketmq, topic, 0) == []
    from rocketmq_sdk.integrations.django.transactions import transaction_producer

    caplog.set_level("INFO", logger="rocketmq_sdk.integrations.django")
    # ...until a producer of the group is back ("the restarted process") and answers the check
    transaction_producer()
    (m,) = _visible(rocketmq, topic, 1, timeout_s=40)
    assert m.msg_id == tx_id and json.loads(m.body) == {"order": "K1"}
    assert any(f"transaction check of {tx_id}" in r.getMessage() and "COMMIT_MESSAGE" in r.getMessage()
               for r in caplog.records)


def test_outbox_commits_with_the_transaction_and_relay_sends_in_order(rocketmq):
    topic = unique("dj_outbox")
    create_topic(rocketmq, topic)
    with transaction.atomic():
        Order.objects.create(number="O1")
        enqueue(f"{topic}:created", {"order": "O1"}, keys="O1")
        enqueue(f"{topic}:created", {"order": "O2"}, keys="O2", headers={"region": "eu"})
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue(topic, {"order": "never"})
        raise RuntimeError("rolled back")
    assert OutboxMessage.objects.filter(sent_at__isnull=True).count() == 2
    out = io.StringIO()
    call_command("rocketmq_outbox_relay", "--once", stdout=out)
    assert "2 message(s) sent" in out.getvalue()
    assert OutboxMessage.objects.filter(sent_at__isnull=True).count() == 0
    got = sorted(_visible(rocketmq, topic, 2), key=lambda m: m.store_timestamp)
    assert [json.loads(m.body)["order"] for m in got] == ["O1", "O2"]
    row_ids = list(OutboxMessage.objects.order_by("id").values_list("id", flat=True))
    assert got[1].keys == ["O2", f"outbox-{row_ids[1]}"] and got[1].get_property("region") == "eu"
    assert got[0].get_property("OUTBOX_ID") == str(row_ids[0])
    call_command("rocketmq_outbox_relay", "--once", stdout=io.StringIO())  # nothing left: no resend
    assert len(_visible(rocketmq, topic, 2)) == 2


def test_outbox_relay_command_loops_until_sigterm(rocketmq):
    """The relay as a real process: rows committed while it runs are sent; SIGTERM stops it."""
    from django_integration.conftest import REPO, wait_until

    topic = unique("dj_outbox_loop")
    create_topic(rocketmq, topic)
    env = child_env(ROCKETMQ_TEST_DB=connection.settings_dict["NAME"], ROCKETMQ_TEST_NAMESRV=rocketmq.namesrv_addr)
    proc = subprocess.Popen([PY, "-m", "django", "rocketmq_outbox_relay", "--interval", "0.2"], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for i in range(3):
            with transaction.atomic():
                enqueue(topic, {"i": i}, keys=f"loop-{i}")
        wait_until(lambda: not OutboxMessage.objects.filter(sent_at__isnull=True).exists(), 30, "the relay")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    assert "3 message(s) sent" in out
    assert sorted(json.loads(m.body)["i"] for m in _visible(rocketmq, topic, 3)) == [0, 1, 2]


def test_custom_check_hook_answers_when_the_table_has_no_record():
    """Issue 25, defect 6 (Spring's RocketMQLocalTransactionListener.checkLocalTransaction): a
    local transaction whose outcome is not a database row (an external payment API) registers
    its own check for its topic; the table still wins, and a hook answering None falls back."""
    from rocketmq_sdk.integrations.django.transactions import rocketmq_transaction_check, transaction_checks

    listener = DatabaseTransactionListener("g", unknown_timeout_ms=60_000)
    now = int(time.time() * 1000)
    paid = {"ID-PAID"}

    @rocketmq_transaction_check(topic="payments")
    def payment_check(msg: MessageExt) -> LocalTransactionState | None:
        return LocalTransactionState.COMMIT_MESSAGE if msg.msg_id in paid else None

    def ext(topic: str, uniq: str, born: int) -> MessageExt:
        return MessageExt(topic=topic, properties={"UNIQ_KEY": uniq}, born_timestamp=born)

    try:
        assert listener.check_local_transaction(ext("payments", "ID-PAID", now)) is LocalTransactionState.COMMIT_MESSAGE
        assert listener.check_local_transaction(ext("payments", "ID-NEW", now)) is LocalTransactionState.UNKNOW
        assert listener.check_local_transaction(ext("orders", "ID-PAID", now)) is LocalTransactionState.UNKNOW
        assert listener.check_local_transaction(
            ext("payments", "ID-NEW", now - 120_000)) is LocalTransactionState.ROLLBACK_MESSAGE
        with pytest.raises(ValueError, match="topic"):
            rocketmq_transaction_check(topic="")
    finally:
        transaction_checks.pop("payments", None)


def test_a_forked_child_makes_its_own_transaction_producer(rocketmq):
    """gunicorn --preload / Celery prefork: the transactional producer made before fork() is
    neither used nor shut down in the child (which makes its own); the parent's keeps sending."""
    topic = unique("dj_tx_fork")
    create_topic(rocketmq, topic)
    parent_producer = transaction_producer()
    parent_producer.send(Message(topic, b"parent"))

    def child() -> list:  # must not touch the parent's producer
        mine = transaction_producer()
        status = mine.send(Message(topic, b"child")).send_status.value
        close()
        return [mine is not parent_producer, status]

    assert in_child(child) == [True, "SEND_OK"]
    assert transaction_producer() is parent_producer
    parent_producer.send(Message(topic, b"parent-again"))
    assert sorted(m.body for m in _visible(rocketmq, topic, 3)) == [b"child", b"parent", b"parent-again"]


def test_a_local_transaction_answering_unknow_is_settled_by_the_check_hook(rocketmq):
    """Spring's RocketMQLocalTransactionListener: a local transaction whose outcome is not known
    yet (an external payment API timed out) returns UNKNOW: its database writes commit without a
    record, the half message stays pending, and the broker's check asks the topic's check hook,
    which commits it once the outcome is known."""
    from rocketmq_sdk.integrations.django.transactions import rocketmq_transaction_check, transaction_checks

    topic = unique("dj_tx_unknown")
    create_topic(rocketmq, topic)
    settled: set[str] = set()
    asked: list[str] = []

    @rocketmq_transaction_check(topic=topic)
    def payment_check(msg: MessageExt) -> LocalTransactionState | None:
        asked.append(msg.msg_id)
        return LocalTransactionState.COMMIT_MESSAGE if msg.msg_id in settled else LocalTransactionState.UNKNOW

    def local(msg, arg):
        Order.objects.create(number="EXT1")  # e.g. a pending payment row
        return LocalTransactionState.UNKNOW

    try:
        result = rocketmq_template().send_in_transaction(topic, {"order": "EXT1"}, local)
        assert result.local_transaction_state is LocalTransactionState.UNKNOW
        assert Order.objects.filter(number="EXT1").exists() and not TransactionRecord.objects.exists()
        wait_until(lambda: result.msg_id in asked, 30, "a transaction check of the pending half message")
        assert read_topic(rocketmq, topic, 0, timeout_s=5) == []  # still pending
        settled.add(result.msg_id)
        (m,) = _visible(rocketmq, topic, 1)
        assert json.loads(m.body) == {"order": "EXT1"}
    finally:
        transaction_checks.pop(topic, None)


def test_a_local_transaction_answering_rollback_rolls_back_without_raising(rocketmq):
    """A local transaction may decide ROLLBACK_MESSAGE itself (Spring's executeLocalTransaction
    returning ROLLBACK): its database writes and the message are rolled back and the result says
    so, no exception."""
    topic = unique("dj_tx_rb2")
    create_topic(rocketmq, topic)

    def local(msg, arg):
        Order.objects.create(number="RB2")
        return LocalTransactionState.ROLLBACK_MESSAGE

    result = rocketmq_template().send_in_transaction(topic, {"order": "RB2"}, local)
    assert result.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
    assert not Order.objects.filter(number="RB2").exists() and not TransactionRecord.objects.exists()
    rocketmq_template().send_in_transaction(topic, {"order": "marker"}, lambda m, a: None)
    assert [json.loads(m.body) for m in _visible(rocketmq, topic, 1)] == [{"order": "marker"}]
