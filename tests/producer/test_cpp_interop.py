"""What our producer sends in every mode (sync, send_async, asend, oneway, batch, ordered,
delayed, compressed) is received by the official C++ push consumer (``rocketmq==0.4.4``) with
body, tags, keys and properties intact. One consumer session for all modes keeps it fast."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq_sdk import Message, Producer, SelectMessageQueueByHash, SendStatus

from tests.interop.conftest import wait_for_route
from tests.interop.cpp_client import CppConsumer

from .conftest import unique

pytest.importorskip("rocketmq.client", reason="the official C++ client (rocketmq==0.4.4) is not installed")
pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

PROPS = {"color": "blue", "unicode": "héllo-✓"}
BIG = ("0123456789abcdef" * 512).encode()  # 8 KiB: compressed by our producer (≥ 4 KiB)


def spec(mode: str, i: int = 0, body: bytes | None = None, **extra) -> Message:
    msg = Message("", body or f"{mode}-body-{i} ✓".encode(), tags=f"Tag{mode}", keys=[f"{mode}-{i}", f"k2-{mode}"],
                  properties={**PROPS, "mode": mode, "i": str(i)})
    for k, v in extra.items():
        setattr(msg, k, v)
    return msg


def test_every_send_mode_reaches_the_cpp_push_consumer_intact(cluster):
    namesrv, topic = cluster.namesrv_addr, unique("ProdToCpp")
    with Producer(unique("pg_interop"), namesrv) as p:
        def send(m: Message):
            m.topic = topic
            return p.send(m)

        def probe(key: str) -> None:
            p.send(Message(topic, b"probe", tags="TagProbe", keys=[key]))

        probe(f"{CppConsumer.PROBE_KEY_PREFIX}create")
        wait_for_route(namesrv, topic)
        expected: dict[str, Message] = {}
        with CppConsumer(namesrv, topic, group=unique("cpp_interop"),
                         property_keys=[*PROPS, "mode", "i"]) as consumer:
            consumer.wait_live(probe, timeout_s=30)
            sync = spec("sync")
            assert send(sync).send_status is SendStatus.SEND_OK
            a = spec("async")
            a.topic = topic
            assert p.send_async(a).result(10).send_status is SendStatus.SEND_OK
            aio = spec("asyncio")
            aio.topic = topic
            asyncio.run(p.asend(aio))
            one = spec("oneway")
            one.topic = topic
            p.send_oneway(one)
            batch = [spec("batch", i) for i in range(3)]
            for m in batch:
                m.topic = topic
            assert len(p.send_batch(batch).msg_id.split(",")) == 3
            ordered = [spec("ordered", i) for i in range(4)]
            ordered_queues = set()
            for m in ordered:
                m.topic = topic
                ordered_queues.add(p.send(m, SelectMessageQueueByHash(), "order-42").message_queue.queue_id)
            assert len(ordered_queues) == 1
            delayed = spec("delayed", delay_time_level=1)  # 1 s
            send(delayed)
            big = spec("compressed", body=BIG)
            send(big)
            for m in [sync, a, aio, one, *batch, *ordered, delayed, big]:
                expected[m.keys[0]] = m
            got = consumer.wait_for(len(expected), timeout_s=30)
    by_key = {m.key_list[0]: m for m in got}
    assert sorted(by_key) == sorted(expected)
    for key, sent in expected.items():
        m = by_key[key]
        assert m.topic == topic and m.tags == sent.tags and m.key_list == sent.keys
        assert m.body == sent.body, key
        for name, value in sent.properties.items():
            if name in (*PROPS, "mode", "i"):
                assert m.properties.get(name) == value, (key, name)
    assert len(consumer.deliveries) == len(expected)  # each exactly once
    lane = sorted((m for m in got if m.key_list[0].startswith("ordered-")), key=lambda m: m.queue_offset)
    assert [m.key_list[0] for m in lane] == [f"ordered-{i}" for i in range(4)]
    assert {m.queue_id for m in lane} == ordered_queues
    d = by_key["delayed-0"]
    assert d.store_timestamp - d.born_timestamp >= 900  # really delayed by level 1 (1 s)
