"""Part 1: the template facade against the embedded reference broker."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import uuid
from decimal import Decimal

import pytest
from rocketmq_sdk import MessageExt, SendStatus
from rocketmq_sdk.integrations.django import rocketmq_template
from rocketmq_sdk.integrations.django.converter import ConversionError, MessageConverter, parse_destination

from django_integration.conftest import create_topic, read_topic, unique
from django_integration.testapp.models import Order
from tests.forking import in_child


@dataclasses.dataclass
class Shipment:
    order: str
    weight: Decimal
    when: dt.date


def test_destination_forms():
    assert parse_destination("orders") == ("orders", None)
    assert parse_destination("orders:created") == ("orders", "created")
    for bad in ("", ":tag", "orders:", 42):
        with pytest.raises(ValueError):
            parse_destination(bad)


def test_payload_conversion_without_a_broker():
    conv = MessageConverter()
    assert conv.to_body(b"\x00raw") == b"\x00raw"
    assert conv.to_body("héllo") == "héllo".encode()
    u = uuid.UUID(int=7)
    assert json.loads(conv.to_body({"id": u, "amount": Decimal("1.50")})) == {"id": str(u), "amount": "1.50"}
    assert json.loads(conv.to_body(Shipment("A1", Decimal("2.5"), dt.date(2026, 1, 2)))) == {
        "order": "A1", "weight": "2.5", "when": "2026-01-02"}
    order = Order(id=3, number="N3", status="new", amount=Decimal("9.99"))
    assert json.loads(conv.to_body(order)) == {"id": 3, "number": "N3", "status": "new", "amount": "9.99",
                                               "note": ""}
    with pytest.raises(ConversionError):
        conv.to_body(object())
    msg = conv.to_message("t:tag", {"a": 1}, keys=["k1", "k2"], headers={"region": "eu", "TAGS": "other"})
    assert (msg.topic, msg.tags, msg.keys, msg.user_properties) == ("t", "other", ["k1", "k2"], {"region": "eu"})


def test_incoming_conversion_by_type_hint():
    conv = MessageConverter()
    msg = MessageExt(topic="t", body=b'{"order": "A1", "weight": "2", "when": "2026-01-02"}')
    assert conv.from_message(msg, bytes) == msg.body
    assert conv.from_message(msg, str).startswith('{"order"')
    assert conv.from_message(msg, dict)["order"] == "A1"
    assert conv.from_message(msg, MessageExt) is msg
    assert conv.from_message(msg, Shipment).order == "A1"
    with pytest.raises(ConversionError):
        conv.from_message(msg, list)
    with pytest.raises(ConversionError):
        conv.from_message(MessageExt(topic="t", body=b"not json"), dict)


def test_pydantic_models_both_ways():
    pydantic = pytest.importorskip("pydantic")

    class Item(pydantic.BaseModel):
        sku: str
        qty: int

    conv = MessageConverter()
    body = conv.to_body(Item(sku="S", qty=2))
    assert json.loads(body) == {"sku": "S", "qty": 2}
    assert conv.from_message(MessageExt(topic="t", body=body), Item) == Item(sku="S", qty=2)
    with pytest.raises(ConversionError):
        conv.from_message(MessageExt(topic="t", body=b'{"sku": 1}'), Item)


def test_sync_send_with_tag_keys_and_headers_reaches_the_broker(rocketmq):
    topic = unique("dj_tpl")
    template = rocketmq_template()
    result = template.send(f"{topic}:created", {"n": 1}, keys="order-1", headers={"region": "eu"})
    assert result.send_status is SendStatus.SEND_OK
    (m,) = read_topic(rocketmq, topic, 1)
    assert (m.tags, m.keys, m.get_property("region"), json.loads(m.body)) == ("created", ["order-1"], "eu", {"n": 1})
    assert m.msg_id == result.msg_id


def test_async_asend_oneway_batch_and_delay(rocketmq):
    topic = unique("dj_modes")
    template = rocketmq_template()
    fut = template.send_async(topic, "async", keys="a")
    assert fut.result(10).send_status is SendStatus.SEND_OK
    assert asyncio.run(template.asend(topic, "asend", keys="b")).send_status is SendStatus.SEND_OK
    template.send_oneway(topic, "oneway", keys="c")
    results = template.send_batch(topic, [{"i": i} for i in range(5)], keys=lambda p: f"batch-{p['i']}")
    assert len(results) == 1 and len(results[0].msg_id.split(",")) == 5
    delayed = template.send(topic, "delayed", keys="d", delay_level=1)
    assert delayed.send_status is SendStatus.SEND_OK
    got = read_topic(rocketmq, topic, 9)
    by_key = {m.keys[0]: m for m in got}
    assert sorted(by_key) == ["a", "b", "batch-0", "batch-1", "batch-2", "batch-3", "batch-4", "c", "d"]
    # the delayed one was stored after its delay (1 s on the test broker) elapsed
    assert by_key["d"].store_timestamp - by_key["d"].born_timestamp >= 900


def test_send_orderly_keeps_a_hash_key_on_one_queue(rocketmq):
    topic = unique("dj_orderly")
    create_topic(rocketmq, topic, queues=4)
    template = rocketmq_template()
    for i in range(12):
        template.send_orderly(topic, {"seq": i}, hash_key=f"customer-{i % 3}")
    got = read_topic(rocketmq, topic, 12)
    queues: dict[str, set[int]] = {}
    seqs: dict[str, list[int]] = {}
    for m in sorted(got, key=lambda m: (m.queue_id, m.queue_offset)):
        seq = json.loads(m.body)["seq"]
        queues.setdefault(f"customer-{seq % 3}", set()).add(m.queue_id)
        seqs.setdefault(f"customer-{seq % 3}", []).append(seq)
    assert all(len(q) == 1 for q in queues.values())
    assert all(s == sorted(s) for s in seqs.values())


def test_async_and_oneway_orderly_sends_pick_the_hash_key_queue(rocketmq):
    """Spring's asyncSendOrderly / sendOneWayOrderly: the same queue as send_orderly's for a key."""
    topic = unique("dj_orderly_async")
    create_topic(rocketmq, topic, queues=4)
    template = rocketmq_template()
    sync = template.send_orderly(topic, {"via": "sync"}, hash_key="customer-7")
    fut = template.send_orderly_async(topic, {"via": "async"}, hash_key="customer-7")
    assert fut.result(10).message_queue == sync.message_queue
    template.send_oneway_orderly(topic, {"via": "oneway"}, hash_key="customer-7")
    got = read_topic(rocketmq, topic, 3)
    assert {m.queue_id for m in got} == {sync.message_queue.queue_id}
    assert sorted(json.loads(m.body)["via"] for m in got) == ["async", "oneway", "sync"]


def test_model_instance_payload_is_json(rocketmq, db):
    topic = unique("dj_model")
    order = Order.objects.create(number="M1", amount=Decimal("12.30"))
    rocketmq_template().send(topic, order, keys=f"order-{order.number}")
    (m,) = read_topic(rocketmq, topic, 1)
    assert json.loads(m.body) == {"id": order.pk, "number": "M1", "status": "new", "amount": "12.30", "note": ""}


def test_one_producer_per_process_and_a_new_one_after_fork(rocketmq):
    template = rocketmq_template()
    topic = unique("dj_fork")
    template.send(topic, b"parent")
    parent_producer = template.producer
    assert template.producer is parent_producer  # made once, reused

    def child() -> list:  # must not touch the parent's producer
        fresh = template.producer is not parent_producer
        result = template.send(topic, b"child")
        template.close()
        return [fresh, result.send_status.value]

    assert in_child(child) == [True, "SEND_OK"]
    assert template.producer is parent_producer  # the parent's still works after the fork
    template.send(topic, b"parent-again")
    assert sorted(m.body for m in read_topic(rocketmq, topic, 3)) == [b"child", b"parent", b"parent-again"]
