"""Part 4: listeners, autodiscovery, type-hint conversion, retries, DLQ, orderly, SQL92, replies."""

from __future__ import annotations

import dataclasses
import json
import os
import threading

import pytest
from django.db import connection
from rocketmq_sdk import MessageExt
from rocketmq_sdk.integrations.django import (
    RocketMQListener,
    RocketMQReplyListener,
    rocketmq_listener,
    rocketmq_template,
)
from rocketmq_sdk.integrations.django.listeners import registry
from rocketmq_sdk.integrations.django.testing import running_listeners

from django_integration.conftest import create_topic, read_topic, unique, wait_until
from django_integration.testapp.models import Handled

pytestmark = pytest.mark.django_db(transaction=True)


@dataclasses.dataclass
class Parcel:
    sku: str
    qty: int


@pytest.fixture
def listener():
    """Register listeners for one test (unique names), removed afterwards."""
    names: list[str] = []

    def register(target=None, **options):
        options.setdefault("name", unique("listener"))
        names.append(options["name"])
        return rocketmq_listener(**options)(target) if target is not None else rocketmq_listener(**options)

    yield register
    for n in names:
        registry.pop(n, None)


def test_listeners_module_is_autodiscovered():
    spec = registry["django_integration.testapp.listeners.audit_order"]
    assert (spec.topic, spec.consumer_group, spec.selector_expression) == ("dj_orders", "dj_order_audit",
                                                                           "created || updated")
    assert spec.signature() == (dict, False)


def test_bad_listener_declarations_raise_at_once():
    with pytest.raises(ValueError, match="selector_type"):
        rocketmq_listener(topic="t", consumer_group="g", selector_type="REGEX")
    with pytest.raises(ValueError, match="consume_mode"):
        rocketmq_listener(topic="t", consumer_group="g", consume_mode="FAST")
    with pytest.raises(ValueError, match="enable_msg_trace"):
        rocketmq_listener(topic="t", consumer_group="g", enable_msg_trace="yes")
    with pytest.raises(ValueError, match="customized_trace_topic 'my traces'.*illegal characters"):
        rocketmq_listener(topic="t", consumer_group="g", customized_trace_topic="my traces")
    with pytest.raises(TypeError, match="RocketMQListener"):
        rocketmq_listener(topic="t", consumer_group="g")(type("Plain", (), {}))


def test_type_hints_drive_conversion_and_db_is_usable(rocketmq, listener):
    topic = unique("dj_hints")
    create_topic(rocketmq, topic)
    seen: dict[str, object] = {}
    done = threading.Event()

    def record(kind, value, msg=None):
        seen[kind] = (value, msg)
        Handled.objects.create(listener=kind, key=str(type(value).__name__))
        if len(seen) == 4:
            done.set()

    listener(lambda p: None, topic=unique("unused"), consumer_group=unique("unused_g"))  # not started

    def as_dict(payload: dict, msg: MessageExt) -> None:
        record("dict", payload, msg)

    def as_parcel(payload: Parcel) -> None:
        record("parcel", payload)

    def as_text(payload: str) -> None:
        record("str", payload)

    class Raw(RocketMQListener):
        def on_message(self, payload: bytes) -> None:
            record("bytes", payload)

    names = [listener(as_dict, topic=topic, consumer_group=unique("g_dict")).rocketmq_listener.name,
             listener(as_parcel, topic=topic, consumer_group=unique("g_parcel")).rocketmq_listener.name,
             listener(as_text, topic=topic, consumer_group=unique("g_text")).rocketmq_listener.name,
             listener(Raw, topic=topic, consumer_group=unique("g_raw")).rocketmq_listener.name]
    with running_listeners(names):
        rocketmq_template().send(topic, {"sku": "S1", "qty": 2}, keys="p1")
        assert done.wait(30), f"only {sorted(seen)} handled"
    payload, msg = seen["dict"]
    assert payload == {"sku": "S1", "qty": 2} and isinstance(msg, MessageExt) and msg.keys == ["p1"]
    assert seen["parcel"][0] == Parcel("S1", 2)
    assert json.loads(seen["str"][0]) == {"sku": "S1", "qty": 2}
    assert json.loads(seen["bytes"][0]) == {"sku": "S1", "qty": 2}
    assert Handled.objects.count() == 4  # the handlers wrote through Django's ORM from consume threads
    assert connection.vendor == ("postgresql" if os.environ.get("ROCKETMQ_TEST_DATABASE") == "postgresql" else "sqlite")


def test_exception_means_reconsume_later_then_success(rocketmq, listener):
    topic = unique("dj_retry")
    create_topic(rocketmq, topic)
    calls: list[int] = []

    def flaky(payload: dict, msg: MessageExt) -> None:
        calls.append(msg.reconsume_times)
        if len(calls) < 3:
            raise RuntimeError("not yet")

    name = listener(flaky, topic=topic, consumer_group=unique("g_retry")).rocketmq_listener.name
    with running_listeners([name]):
        rocketmq_template().send(topic, {"x": 1})
        wait_until(lambda: len(calls) >= 3, 40, "three deliveries")
    assert calls[:3] == [0, 1, 2]  # redelivered through the retry topic, reconsume count rising


def test_unconvertible_payload_goes_to_the_dlq_after_max_reconsume_times(rocketmq, listener, caplog):
    topic = unique("dj_dlq")
    group = unique("g_dlq")
    create_topic(rocketmq, topic)
    calls: list[Parcel] = []

    def strict(payload: Parcel) -> None:
        calls.append(payload)

    name = listener(strict, topic=topic, consumer_group=group, max_reconsume_times=1).rocketmq_listener.name
    with running_listeners([name]):
        result = rocketmq_template().send(topic, b"definitely not json")
        dlq = read_topic(rocketmq, f"%DLQ%{group}", 1, timeout_s=40)
    assert calls == []
    assert dlq[0].body == b"definitely not json" and dlq[0].msg_id == result.msg_id
    errors = [r.getMessage() for r in caplog.records if "cannot be converted" in r.getMessage()]
    assert len(errors) == 2 and all(result.msg_id in e for e in errors)  # first delivery + 1 retry, no hot loop


def test_orderly_listener_consumes_each_key_in_order(rocketmq, listener):
    topic = unique("dj_orderly_l")
    create_topic(rocketmq, topic, queues=4)
    got: list[tuple[str, int]] = []
    lock = threading.Lock()

    def ordered(payload: dict) -> None:
        with lock:
            got.append((payload["key"], payload["seq"]))

    name = listener(ordered, topic=topic, consumer_group=unique("g_ord"), consume_mode="ORDERLY").rocketmq_listener.name
    template = rocketmq_template()
    for seq in range(20):
        key = f"k{seq % 4}"
        template.send_orderly(topic, {"key": key, "seq": seq}, hash_key=key)
    with running_listeners([name]):
        wait_until(lambda: len(got) >= 20, 30, "20 ordered messages")
    for key in ("k0", "k1", "k2", "k3"):
        seqs = [s for k, s in got if k == key]
        assert seqs == sorted(seqs) and len(seqs) == 5


def test_sql92_selector(rocketmq, listener):
    topic = unique("dj_sql")
    create_topic(rocketmq, topic)
    got: list[str] = []

    def eu_only(payload: str) -> None:
        got.append(payload)

    name = listener(eu_only, topic=topic, consumer_group=unique("g_sql"), selector_type="SQL92",
                    selector_expression="region = 'eu' AND amount > 10").rocketmq_listener.name
    template = rocketmq_template()
    with running_listeners([name]):
        template.send(topic, "us-big", headers={"region": "us", "amount": 50})
        template.send(topic, "eu-small", headers={"region": "eu", "amount": 5})
        template.send(topic, "eu-big", headers={"region": "eu", "amount": 50})
        wait_until(lambda: got, 30, "the matching message")
        template.send(topic, "eu-big-2", headers={"region": "eu", "amount": 11})
        wait_until(lambda: len(got) >= 2, 30, "the second matching message")
    assert got == ["eu-big", "eu-big-2"]


def test_reply_listener_and_send_and_receive(rocketmq, listener):
    topic = unique("dj_rpc")
    create_topic(rocketmq, topic)

    class Pricer(RocketMQReplyListener):
        def on_message(self, request: Parcel) -> dict:
            return {"sku": request.sku, "total": request.qty * 2.5}

    name = listener(Pricer, topic=topic, consumer_group=unique("g_rpc")).rocketmq_listener.name
    with running_listeners([name]):
        reply = rocketmq_template().send_and_receive(topic, Parcel("S9", 4), reply_type=dict, timeout_ms=15000)
    assert reply == {"sku": "S9", "total": 10.0}


def test_old_connections_are_closed_around_each_batch(rocketmq, listener):
    """A consume thread's connection is closed after the batch when CONN_MAX_AGE is 0 (as
    after a request), so threads do not pile up open connections."""
    from django.db import connections

    topic = unique("dj_conn")
    create_topic(rocketmq, topic)
    holders: list = []

    def touch(payload: dict) -> None:
        Handled.objects.create(listener="conn", key="k")
        holders.append(connections["default"])

    name = listener(touch, topic=topic, consumer_group=unique("g_conn")).rocketmq_listener.name
    with running_listeners([name]):
        rocketmq_template().send(topic, {"a": 1})
        wait_until(lambda: holders, 30, "the handler")
        wait_until(lambda: holders[0].connection is None, 10, "the connection to be closed after the batch")
    assert read_topic(rocketmq, topic, 1)


def test_namespace_applies_to_template_and_listeners(rocketmq, listener):
    """``NAMESPACE``: the producer sends to ``ns%topic`` (the SDK), the listener's consumer group
    and subscription get the same prefix (the integration), so they meet."""
    from django.conf import settings
    from django.test.utils import override_settings

    topic = unique("dj_ns")
    got: list[str] = []

    def handle(payload: str) -> None:
        got.append(payload)

    name = listener(handle, topic=topic, consumer_group=unique("g_ns")).rocketmq_listener.name
    with override_settings(ROCKETMQ={**settings.ROCKETMQ, "NAMESPACE": "tenant1"}):
        create_topic(rocketmq, f"tenant1%{topic}")
        with running_listeners([name]) as (container,):
            assert container.topic == f"tenant1%{topic}"
            assert container.group == f"tenant1%{registry[name].consumer_group}"
            rocketmq_template().send(topic, "namespaced")
            wait_until(lambda: got, 30, "the namespaced message")
    assert got == ["namespaced"]
    assert read_topic(rocketmq, f"tenant1%{topic}", 1)[0].body == b"namespaced"


def test_broadcasting_listener_reaches_every_instance(rocketmq, listener, tmp_path):
    from rocketmq_sdk.integrations.django.listeners import ListenerContainer

    topic = unique("dj_bcast")
    create_topic(rocketmq, topic)
    got: list[str] = []
    lock = threading.Lock()

    def handle(payload: str) -> None:
        with lock:
            got.append(payload)

    spec = listener(handle, topic=topic, consumer_group=unique("g_bcast"), message_model="BROADCASTING",
                    consume_thread_number=2, local_offset_store_dir=str(tmp_path)).rocketmq_listener
    instances = [ListenerContainer(spec), ListenerContainer(spec)]
    for i, c in enumerate(instances):
        c.consumer.config.instance_name = f"bcast{i}"  # broadcasting keeps DEFAULT: two names, two instances
        c.start()
    try:
        assert instances[0].consumer.config.consume_thread_max == 2
        rocketmq_template().send(topic, "to everyone")
        wait_until(lambda: len(got) >= 2, 30, "both instances")
    finally:
        for c in instances:
            c.shutdown()
    assert got == ["to everyone", "to everyone"]


def test_broadcasting_listener_started_before_its_topic_exists_gets_the_first_messages(rocketmq, listener, tmp_path):
    """Issue 25, defect 4: getting-started's order (listener first, topic created by the first
    send) loses nothing with the default CONSUME_FROM_LAST_OFFSET."""
    topic = unique("dj_bcast_late")
    got: list[str] = []

    def handle(payload: str) -> None:
        got.append(payload)

    spec = listener(handle, topic=topic, consumer_group=unique("g_bcast_late"), message_model="BROADCASTING",
                    consume_from_where="CONSUME_FROM_LAST_OFFSET",
                    local_offset_store_dir=str(tmp_path)).rocketmq_listener
    with running_listeners([spec.name]):
        create_topic(rocketmq, topic)
        for i in range(3):
            rocketmq_template().send(topic, f"first-{i}")
        wait_until(lambda: len(got) >= 3, 30, "the first messages")
    assert sorted(got) == ["first-0", "first-1", "first-2"]


def test_enable_msg_trace_writes_pub_and_sub_records(rocketmq, listener):
    """Issue 25, defect 6: ROCKETMQ["ENABLE_MSG_TRACE"] (Spring's enableMsgTrace) makes the
    template's producer and the listeners write Apache RocketMQ message traces."""
    from django.test.utils import override_settings
    from rocketmq_sdk.admin import AdminClient
    from rocketmq_sdk.trace import TraceType, query_trace

    topic, trace_topic = unique("dj_traced"), unique("DjTrace")
    create_topic(rocketmq, topic)
    create_topic(rocketmq, trace_topic, queues=1)
    got: list[str] = []

    def handle(payload: str) -> None:
        got.append(payload)

    spec = listener(handle, topic=topic, consumer_group=unique("g_traced")).rocketmq_listener
    from django.conf import settings

    traced = {**settings.ROCKETMQ, "NAME_SERVER": rocketmq.namesrv_addr, "ENABLE_MSG_TRACE": True,
              "CUSTOMIZED_TRACE_TOPIC": trace_topic}
    with override_settings(ROCKETMQ=traced):
        rocketmq_template().close()
        try:
            with running_listeners([spec.name]):
                result = rocketmq_template().send(topic, "traced")
                wait_until(lambda: got == ["traced"], 30, "the traced message")

                def kinds() -> set:
                    try:
                        with AdminClient(rocketmq.namesrv_addr) as admin:
                            return {r.type for r in query_trace(admin, result.msg_id, trace_topic)}
                    except Exception:  # no trace message yet
                        return set()

                wait_until(lambda: {TraceType.Pub, TraceType.SubBefore, TraceType.SubAfter} <= kinds(), 30,
                           "Pub, SubBefore and SubAfter records")
        finally:
            rocketmq_template().close()


def test_enable_msg_trace_per_listener(rocketmq, listener):
    """rocketmq-spring's ``@RocketMQMessageListener(enableMsgTrace=, customizedTraceTopic=)``:
    one listener writes traces (to its own trace topic) while ``ENABLE_MSG_TRACE`` is off, and a
    listener with ``enable_msg_trace=False`` writes none while it is on."""
    from django.conf import settings
    from django.test.utils import override_settings
    from rocketmq_sdk.admin import AdminClient
    from rocketmq_sdk.trace import TraceType, query_trace

    topic, trace_topic = unique("dj_traced1"), unique("DjTrace1")
    create_topic(rocketmq, topic)
    create_topic(rocketmq, trace_topic, queues=1)
    got: list[str] = []
    group = unique("g_traced1")

    def handle(payload: str) -> None:
        got.append(payload)

    traced = listener(handle, name=unique("traced"), topic=topic, consumer_group=group,
                      enable_msg_trace=True, customized_trace_topic=trace_topic).rocketmq_listener
    untraced = listener(lambda payload: None, name=unique("untraced"), topic=topic,
                        consumer_group=unique("g_untraced1"), enable_msg_trace=False).rocketmq_listener
    with running_listeners([traced.name]) as (container,):
        assert container.consumer.msg_trace is not None
        result = rocketmq_template().send(topic, "traced")
        wait_until(lambda: got == ["traced"], 30, "the traced message")

        def records() -> list:
            try:
                with AdminClient(rocketmq.namesrv_addr) as admin:
                    return query_trace(admin, result.msg_id, trace_topic)
            except Exception:  # no trace message yet
                return []

        wait_until(lambda: {TraceType.SubBefore, TraceType.SubAfter} <= {r.type for r in records()}, 30,
                   "SubBefore and SubAfter records of the traced listener")
        kinds = [r.type for r in records()]
        assert TraceType.Pub not in kinds  # the template's producer is not traced
        assert {r.group_name for r in records() if r.type is TraceType.SubBefore} == {group}
    with override_settings(ROCKETMQ={**settings.ROCKETMQ, "NAME_SERVER": rocketmq.namesrv_addr,
                                     "ENABLE_MSG_TRACE": True}):
        with running_listeners([untraced.name]) as (container,):
            assert container.consumer.msg_trace is None
