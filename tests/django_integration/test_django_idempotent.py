"""Part 5: idempotent consumption under forced redeliveries."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from rocketmq_sdk import Message
from rocketmq_sdk.integrations.django import rocketmq_listener, rocketmq_template
from rocketmq_sdk.integrations.django.listeners import prune_consumed_messages, registry
from rocketmq_sdk.integrations.django.models import ConsumedMessage
from rocketmq_sdk.integrations.django.testing import running_listeners

from django_integration.conftest import create_topic, unique, wait_until
from django_integration.testapp.models import Handled

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def names():
    registered: list[str] = []
    yield registered
    for n in registered:
        registry.pop(n, None)


def _register(names: list[str], fn, **options) -> str:
    options.setdefault("name", unique("idem"))
    rocketmq_listener(**options)(fn)
    names.append(options["name"])
    return options["name"]


def _handled(listener: str) -> list[str]:
    return list(Handled.objects.filter(listener=listener).order_by("id").values_list("key", flat=True))


def _failing_once(group: str, failing: str, runs: list[str]):
    """A handler recording each run (``runs``) and a Handled row, raising the first two times it
    gets key ``failing`` (after its write, which must roll back): a batch's fast pass and its
    careful pass both fail, so the message is sent back."""
    failures = {failing: 2}

    def handle(payload: dict) -> None:
        runs.append(payload["k"])
        Handled.objects.create(listener=group, key=payload["k"])
        if failures.get(payload["k"], 0) > 0:
            failures[payload["k"]] -= 1
            raise RuntimeError(f"{failing} fails once")

    return handle


def test_reconsume_later_after_commit_skips_the_committed_message(rocketmq, names):
    """A batch of two: the first message's handler commits, the second fails, so the whole batch
    comes back (RECONSUME_LATER); the first is acknowledged without running again."""
    topic, group = unique("dj_idem_batch"), unique("g_idem_batch")
    create_topic(rocketmq, topic, queues=1)
    runs: list[str] = []
    handle = _failing_once(group, "B", runs)

    template = rocketmq_template()
    # both messages in the queue before the consumer starts, so they come in one batch
    template.send_batch(topic, [{"k": "A"}, {"k": "B"}], keys=lambda p: p["k"])
    name = _register(names, handle, topic=topic, consumer_group=group, idempotent=True,
                     consume_message_batch_max_size=2)
    with running_listeners([name]):
        wait_until(lambda: sorted(_handled(group)) == ["A", "B"] and runs.count("B") == 3, 40, "the redelivery")
        wait_until(lambda: ConsumedMessage.objects.filter(consumer_group=group).count() == 2, 10, "two rows")
    # first delivery: the fast pass (A, B raised: all rolled back), the careful pass (A committed,
    # B raised: its writes and row rolled back, only B sent back); the redelivery runs B alone
    assert runs == ["A", "B", "A", "B", "B"]
    assert sorted(_handled(group)) == ["A", "B"]  # B's failed attempt left nothing behind


def _duplicates(caplog, group: str) -> int:
    return sum(1 for r in caplog.records if "acknowledged without running" in r.getMessage() and group in r.getMessage())


def test_duplicates_offset_reset_and_consumer_restart(rocketmq, names, caplog):
    """Producer-side duplicates (same key twice), an offset reset to the start while consuming
    (everything redelivered, as after a lost offset commit) and a consumer restart: the handler
    runs once per key."""
    caplog.set_level("INFO", logger="rocketmq_sdk.integrations.django")
    topic, group = unique("dj_idem_dup"), unique("g_idem_dup")
    create_topic(rocketmq, topic)

    def handle(payload: dict) -> None:
        Handled.objects.create(listener=group, key=payload["k"])

    template = rocketmq_template()
    for k in ("k1", "k2", "k3"):
        template.send(topic, {"k": k}, keys=k)
    template.send(topic, {"k": "k2"}, keys="k2")  # a duplicate, e.g. a producer retry
    # a user-chosen business key: messages with the same first key are one event
    name = _register(names, handle, topic=topic, consumer_group=group, idempotent=True, idempotency_key="key")
    with running_listeners([name]):
        wait_until(lambda: ConsumedMessage.objects.filter(consumer_group=group).count() == 3, 30, "3 keys")
        wait_until(lambda: _duplicates(caplog, group) == 1, 30, "the duplicate k2")
        from rocketmq_sdk import MQBrokerError
        from rocketmq_sdk.admin import AdminClient

        def reset() -> bool:  # mqadmin resetOffsetByTime -s 0, once every queue has a committed offset
            try:
                with AdminClient(rocketmq.namesrv_addr) as admin:
                    admin.reset_offset_by_time(group, topic, 0)
                return True
            except MQBrokerError:
                return False

        wait_until(reset, 20, "the offset reset")
        wait_until(lambda: _duplicates(caplog, group) == 1 + 4, 30, "the 4 redeliveries after the reset")
    assert sorted(_handled(group)) == ["k1", "k2", "k3"]

    def handle_after_restart(payload: dict) -> None:
        Handled.objects.create(listener=group, key=payload["k"] + "-after-restart")

    registry.pop(name)
    restarted = _register(names, handle_after_restart, topic=topic, consumer_group=group, idempotent=True,
                          idempotency_key="key")
    template.send(topic, {"k": "k4"}, keys="k4")
    with running_listeners([restarted]):
        wait_until(lambda: ConsumedMessage.objects.filter(consumer_group=group).count() == 4, 30, "k4")
    assert sorted(_handled(group)) == ["k1", "k2", "k3", "k4-after-restart"]
    assert _duplicates(caplog, group) == 5  # the restart resumed from the persisted offsets


def test_rebalance_between_two_consumers_runs_each_key_once(rocketmq, names):
    topic, group = unique("dj_idem_rb"), unique("g_idem_rb")
    create_topic(rocketmq, topic, queues=4)

    def handle(payload: dict) -> None:
        Handled.objects.create(listener=group, key=payload["k"])

    a = _register(names, handle, topic=topic, consumer_group=group, idempotent=True, idempotency_key="key")
    template = rocketmq_template()
    with running_listeners([a]):
        for i in range(20):
            template.send(topic, {"k": f"m{i}"}, keys=f"m{i}")
        # a second instance of the group joins: queues move while messages are in flight
        from rocketmq_sdk.integrations.django.listeners import ListenerContainer

        second = ListenerContainer(registry[a])  # its own client id (pid#nanotime)
        second.start()
        try:
            for i in range(20, 40):
                template.send(topic, {"k": f"m{i}"}, keys=f"m{i}")
            # duplicates of half of them
            for i in range(0, 40, 2):
                template.send(topic, {"k": f"m{i}"}, keys=f"m{i}")
            wait_until(lambda: ConsumedMessage.objects.filter(consumer_group=group).count() == 40, 40, "40 keys")
        finally:
            second.shutdown()
    keys = _handled(group)
    assert sorted(keys) == sorted(f"m{i}" for i in range(40))


def test_prune_by_age():
    old = ConsumedMessage.objects.create(consumer_group="g", message_key="old", topic="t", msg_id="1")
    ConsumedMessage.objects.create(consumer_group="g", message_key="new", topic="t", msg_id="2")
    ConsumedMessage.objects.filter(pk=old.pk).update(consumed_at=timezone.now() - dt.timedelta(hours=100))
    assert prune_consumed_messages() == 1  # default retention: 72 hours
    assert list(ConsumedMessage.objects.values_list("message_key", flat=True)) == ["new"]
    assert prune_consumed_messages(older_than_hours=0) == 1


def test_idempotency_key_choices():
    from rocketmq_sdk import MessageExt
    from rocketmq_sdk.integrations.django.listeners import ListenerSpec

    msg = MessageExt(topic="t", properties={"UNIQ_KEY": "ID1", "KEYS": "order-1 other"})
    # the default identifies one event: never the business key order-1 its other events share
    assert ListenerSpec("n", print, "t", "g").message_key(msg) == "ID1"
    stamped = MessageExt(topic="t", properties={"UNIQ_KEY": "ID2", "KEYS": "order-1", "EVENT_ID": "ev9"})
    assert ListenerSpec("n", print, "t", "g").message_key(stamped) == "ev9"
    assert ListenerSpec("n", print, "t", "g", idempotency_key="key").message_key(msg) == "order-1"
    assert ListenerSpec("n", print, "t", "g", idempotency_key="msg_id").message_key(stamped) == "ID2"
    assert ListenerSpec("n", print, "t", "g", idempotency_key=lambda m: m.topic).message_key(msg) == "t"
    assert ListenerSpec("n", print, "t", "g", idempotency_key="key").message_key(
        MessageExt(topic="t", properties={"UNIQ_KEY": "X"})) == "X"
    with pytest.raises(ValueError, match="'event', 'msg_id', 'key'"):
        rocketmq_listener(topic="t", consumer_group="g", idempotency_key="first_key")
    assert Message  # the SDK message type used by senders


def test_default_key_runs_every_event_of_one_entity_once(rocketmq, names, caplog):
    """Issue 25, defect 1: model events and outbox rows of one order share the business key
    ``order-<number>``; every event still runs (the default key is the event, not the entity),
    and only a real re-send of one event (the relay died before marking its row) is a duplicate,
    logged at WARNING with its key and message id."""
    from django.db import transaction
    from rocketmq_sdk.integrations.django.models import OutboxMessage
    from rocketmq_sdk.integrations.django.outbox import enqueue, relay

    from django_integration.testapp.models import Order

    caplog.set_level("INFO", logger="rocketmq_sdk.integrations.django")
    group, number = unique("g_idem_events"), unique("N")
    outbox_topic = unique("dj_idem_outbox")
    create_topic(rocketmq, outbox_topic)
    create_topic(rocketmq, "dj_orders")

    def handle(event: dict) -> None:
        if event.get("number", event.get("data", {}).get("number")) == number:
            Handled.objects.create(listener=group, key=event["event"])

    def handle_outbox(event: dict) -> None:
        Handled.objects.create(listener=group, key=event["event"])

    order = Order.objects.create(number=number)  # publish_model_events(Order, "dj_orders", keys="order-{number}")
    order.status = "paid"
    order.save()
    order.delete()
    with transaction.atomic():
        enqueue(f"{outbox_topic}:paid", {"event": "outbox-paid", "number": number}, keys=f"order-{number}")
        enqueue(f"{outbox_topic}:shipped", {"event": "outbox-shipped", "number": number}, keys=f"order-{number}")
    assert relay() == 2
    # the relay died after sending the first row and before marking it: it is sent again
    first = OutboxMessage.objects.order_by("id").first()
    OutboxMessage.objects.filter(pk=first.pk).update(sent_at=None)
    assert relay() == 1
    a = _register(names, handle, topic="dj_orders", consumer_group=group, idempotent=True)
    b = _register(names, handle_outbox, topic=outbox_topic, consumer_group=group + "_outbox", idempotent=True)
    with running_listeners([a, b]):
        wait_until(lambda: len(_handled(group)) >= 5 and _duplicates(caplog, group) >= 1, 40, "5 events, 1 duplicate")
    assert sorted(_handled(group)) == ["created", "deleted", "outbox-paid", "outbox-shipped", "updated"]
    warnings = [r.getMessage() for r in caplog.records
                if r.levelname == "WARNING" and "acknowledged without running" in r.getMessage()]
    assert any(f"order-{number}" not in w and group in w for w in warnings)  # the key is the event id
    dup = [w for w in warnings if group + "_outbox" in w]
    assert len(dup) == 1 and first.properties["EVENT_ID"] in dup[0]


def test_a_batch_commits_once_stops_at_a_failure_and_runs_each_event_once(rocketmq, names):
    """Idempotent batches (one transaction each): a duplicate inside the batch is acknowledged,
    a failing handler sends back only itself and what follows (ack_index), and every event's
    effect happens once."""
    topic, group = unique("dj_idem_batch3"), unique("g_idem_batch3")
    create_topic(rocketmq, topic, queues=1)
    runs: list[str] = []
    handle = _failing_once(group, "B", runs)

    template = rocketmq_template()
    template.send_batch(topic, [{"k": "A"}, {"k": "B"}, {"k": "C"}])
    template.send(topic, {"k": "A"}, headers={"EVENT_ID": "same"})
    template.send(topic, {"k": "A"}, headers={"EVENT_ID": "same"})  # a duplicate in the same batch
    name = _register(names, handle, topic=topic, consumer_group=group, idempotent=True)
    with running_listeners([name]) as (container,):
        assert container.consumer.config.consume_message_batch_max_size == 32  # the idempotent default
        wait_until(lambda: sorted(_handled(group)) == ["A", "A", "B", "C"], 40, "A, B (retried), C and one A")
    # B: fast pass, careful pass (both failed), redelivery; C ran once: it came back with B,
    # unrun; A: both passes (the fast one rolled back) and one of the two "same" events
    assert runs.count("B") == 3 and runs.count("C") == 1 and runs.count("A") == 3


def test_a_database_error_outside_the_handlers_sends_the_batch_back(monkeypatch, caplog):
    """The consumed-message query itself fails (the database is down): the listener answers
    RECONSUME_LATER for the batch instead of raising into the SDK, and logs the failure with
    its traceback (it logged "NoneType: None": exc_info=True outside the except block)."""
    import logging

    from django.db import OperationalError
    from rocketmq_sdk import ConsumeConcurrentlyStatus, MessageExt
    from rocketmq_sdk.consumer.listener import ConsumeConcurrentlyContext
    from rocketmq_sdk.integrations.django import idempotency
    from rocketmq_sdk.integrations.django.listeners import ListenerContainer, ListenerSpec

    def down(*_a, **_k):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(idempotency, "_run_batch", down)
    container = ListenerContainer.__new__(ListenerContainer)
    container.spec = ListenerSpec("down", lambda payload: None, "t", "g", idempotent=True)
    container.group, container.payload_type, container.wants_message = "g", dict, False
    msg = MessageExt(topic="t", body=b"{}", properties={"UNIQ_KEY": "U1"})
    ctx = ConsumeConcurrentlyContext.__new__(ConsumeConcurrentlyContext)
    with caplog.at_level(logging.WARNING, logger="rocketmq_sdk.integrations.django"):
        assert container._consume([msg], ctx) is ConsumeConcurrentlyStatus.RECONSUME_LATER
    (record,) = [r for r in caplog.records if "failed on message" in r.getMessage()]
    assert record.exc_info and isinstance(record.exc_info[1], OperationalError)
    assert "in down" in caplog.text  # the traceback, not "NoneType: None"


def test_an_idempotent_batch_waits_for_another_process_writing_on_sqlite():
    """Issue 25 defect 3, on Django's default SQLite settings (no ``transaction_mode``): another
    process (a web request, the relay) holds SQLite's write lock while a batch runs. The batch's
    transaction must wait for the lock (the connection's ``timeout``), not fail at once with
    "database is locked" because it read the consumed-message table before writing (a deferred
    transaction that read cannot wait for the write lock)."""
    import sqlite3
    import threading
    import time

    from django.db import connection
    from rocketmq_sdk import MessageExt
    from rocketmq_sdk.integrations.django.idempotency import handle_batch_once

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's locking only")
    other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # the other process's write transaction, under way
    other.execute(f"INSERT INTO {Handled._meta.db_table} (listener, key) VALUES ('other', 'x')")
    released: list[float] = []

    def commit_later() -> None:
        other.execute("COMMIT")
        released.append(time.monotonic())

    timer = threading.Timer(0.5, commit_later)
    timer.start()
    try:
        msgs = [MessageExt(topic="t", body=b"{}", properties={"UNIQ_KEY": f"U{i}"}) for i in range(3)]
        outcome = handle_batch_once(listener="l", group="g-wait", using="default", msgs=msgs,
                                    keys=[m.msg_id for m in msgs],
                                    run=lambda m: Handled.objects.create(listener="g-wait", key=m.msg_id))
        finished = time.monotonic()
    finally:
        timer.join(10)
        other.close()
    assert outcome.error is None and outcome.done == 3
    assert released and finished >= released[0]  # it waited for the other writer
    assert sorted(_handled("g-wait")) == ["U0", "U1", "U2"]

