"""Interop with the official C++ client (``rocketmq==0.4.4``) through the reference broker.

(a) C++ producer -> reference broker -> C++ push consumer;
(b) our SDK ``Producer`` -> C++ push consumer;
(c) C++ producer -> our SDK ``PushConsumer``;
plus C++-only paths the reference broker must serve: retry, pull, orderly, broadcasting, delay.

Each test makes its topic exist first (one send: auto-creation through TBW102, then the name
server route is polled), starts the consumer, proves it is pulling with hidden probe messages,
and only then produces the messages under test. Bodies are NUL-free where the C++ client
consumes (it reads bodies as C strings).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .conftest import wait_for_route
from .cpp_client import CppConsumer, cpp_produce, cpp_pull
from .sdk_client import PROBE, Collector, sdk_api, start_sdk_consumer

pytest.importorskip("rocketmq.client", reason="the official C++ client (rocketmq==0.4.4) is not installed")
pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

USER_PROPS = {"color": "blue", "unicode": "héllo-✓"}
BIG_BODY = ("0123456789abcdef" * 512).encode()  # 8 KiB: over the C++ client's 4 KiB compression threshold


def messages_under_test() -> list[dict]:
    return [
        {"body": "plain body", "tags": "TagA", "keys": ["order-1", "order-2"], "properties": USER_PROPS},
        {"body": "ünïcode bödy ✓", "tags": "TagB", "keys": ["uni-1"], "properties": {"n": "2"}},
        {"body": BIG_BODY, "tags": "TagA", "keys": ["big-1"], "properties": {"size": str(len(BIG_BODY))}},
        {"body": "filtered out", "tags": "TagC", "keys": ["tagc-1"]},
    ]


EXPECTED = [m for m in messages_under_test() if m["tags"] != "TagC"]


def _body(spec: dict) -> bytes:
    return spec["body"] if isinstance(spec["body"], bytes) else spec["body"].encode()


def cpp_create_topic(namesrv: str, topic: str) -> None:
    """Auto-create ``topic`` with one (hidden) probe send, then wait for its route."""
    [outcome] = cpp_produce(namesrv, topic, [{"body": "create", "tags": "TagA", "keys": f"{PROBE}create"}])
    assert outcome.ok, outcome
    wait_for_route(namesrv, topic)


def cpp_probe(namesrv: str, topic: str) -> Callable[[str], None]:
    def send(key: str) -> None:
        cpp_produce(namesrv, topic, [{"body": "probe", "tags": "TagA", "keys": key}])
    return send


def assert_matches_specs(received: dict[str, object], get: Callable[[object], tuple]) -> None:
    """``received`` maps first key -> message; ``get(msg) -> (tags, keys list, body, properties)``."""
    assert sorted(received) == sorted(spec["keys"][0] for spec in EXPECTED)
    for spec in EXPECTED:
        tags, keys, body, properties = get(received[spec["keys"][0]])
        assert tags == spec["tags"]
        assert keys == spec["keys"]
        assert body == _body(spec)
        for name, value in spec.get("properties", {}).items():
            assert properties.get(name) == value, (name, properties)


# --- (a) C++ -> reference broker -> C++ ------------------------------------------------------
def test_cpp_producer_to_cpp_push_consumer(reference_broker, unique):
    namesrv, topic = reference_broker.namesrv_addr, f"InteropCpp_{unique}"
    cpp_create_topic(namesrv, topic)
    with CppConsumer(namesrv, topic, group=f"interop_cpp_{unique}", expression="TagA || TagB",
                     property_keys=[*USER_PROPS, "n", "size"]) as consumer:
        consumer.wait_live(cpp_probe(namesrv, topic), timeout_s=30)
        outcomes = cpp_produce(namesrv, topic, messages_under_test(), group=f"interop_cpp_prod_{unique}")
        assert all(o.ok and o.status == "OK" for o in outcomes), outcomes
        got = consumer.wait_for(len(EXPECTED), timeout_s=20)
        assert_matches_specs({m.key_list[0]: m for m in got},
                             lambda m: (m.tags, m.key_list, m.body, m.properties))
        assert {m.msg_id for m in got} == {o.msg_id for o in outcomes if o.index != 3}
        assert all(m.topic == topic and m.reconsume_times == 0 for m in got)
        assert not [m for m in consumer.deliveries if m.tags == "TagC"]
        assert len(consumer.deliveries) == len(EXPECTED)  # exactly once each


# --- (b) SDK producer -> C++ push consumer ---------------------------------------------------
def test_sdk_producer_to_cpp_push_consumer(reference_broker, unique):
    api = sdk_api()
    namesrv, topic = reference_broker.namesrv_addr, f"InteropSdkToCpp_{unique}"
    producer = api.Producer(f"interop_sdk_prod_{unique}", namesrv_addr=namesrv)
    producer.start()
    try:
        def sdk_probe(key: str) -> None:
            producer.send(api.Message(topic, b"probe", tags="TagA", keys=[key]))

        sdk_probe(f"{PROBE}create")
        wait_for_route(namesrv, topic)
        with CppConsumer(namesrv, topic, group=f"interop_cpp_{unique}", expression="TagA || TagB",
                         property_keys=[*USER_PROPS, "n", "size"]) as consumer:
            consumer.wait_live(sdk_probe, timeout_s=30)
            results = [producer.send(api.Message(topic, _body(spec), tags=spec["tags"], keys=spec["keys"],
                                                 properties=spec.get("properties")))
                       for spec in messages_under_test()]
            got = consumer.wait_for(len(EXPECTED), timeout_s=20)
    finally:
        producer.shutdown()
    assert_matches_specs({m.key_list[0]: m for m in got}, lambda m: (m.tags, m.key_list, m.body, m.properties))
    assert all(r.send_status.name == "SEND_OK" for r in results)
    assert {m.msg_id for m in got} == {r.msg_id for r in results[:3]}
    assert all(m.properties.get("UNIQ_KEY") == m.msg_id for m in got)
    assert len(consumer.deliveries) == len(EXPECTED)


# --- (c) C++ producer -> SDK push consumer ---------------------------------------------------
def test_cpp_producer_to_sdk_push_consumer(reference_broker, unique):
    api = sdk_api()
    namesrv, topic = reference_broker.namesrv_addr, f"InteropCppToSdk_{unique}"
    cpp_create_topic(namesrv, topic)
    collector = Collector(api)
    consumer = start_sdk_consumer(api, namesrv, topic, f"interop_sdk_{unique}", "TagA || TagB", collector,
                                  cpp_probe(namesrv, topic))
    try:
        outcomes = cpp_produce(namesrv, topic, messages_under_test())
        assert all(o.ok for o in outcomes), outcomes
        collector.wait_real(len(EXPECTED), 20)
    finally:
        consumer.shutdown()
    got = collector.real()
    assert_matches_specs({m.keys[0]: m for m in got}, lambda m: (m.tags, list(m.keys), m.body, m.properties))
    assert {m.msg_id for m in got} == {o.msg_id for o in outcomes if o.index != 3}
    assert len(got) == len(EXPECTED)


def test_cpp_binary_body_reaches_sdk_consumer_intact(reference_broker, unique):
    """The C++ send path carries NUL bytes (SetByteMessageBody); only its consumer cuts them."""
    api = sdk_api()
    namesrv, topic = reference_broker.namesrv_addr, f"InteropCppBin_{unique}"
    cpp_create_topic(namesrv, topic)
    collector = Collector(api)
    consumer = start_sdk_consumer(api, namesrv, topic, f"interop_sdk_bin_{unique}", "*", collector,
                                  cpp_probe(namesrv, topic))
    body = bytes(range(256)) * 4
    try:
        [outcome] = cpp_produce(namesrv, topic, [{"body": body, "tags": "TagBin", "keys": "bin-1"}])
        assert outcome.ok, outcome
        collector.wait_real(1, 20)
    finally:
        consumer.shutdown()
    [msg] = collector.real()
    assert msg.body == body and msg.tags == "TagBin"


# --- extras: the C++ retry path and the C++ pull consumer ------------------------------------
def test_cpp_reconsume_later_is_redelivered_from_the_retry_topic(reference_broker, unique):
    namesrv, topic = reference_broker.namesrv_addr, f"InteropCppRetry_{unique}"
    group = f"interop_cpp_retry_{unique}"
    cpp_create_topic(namesrv, topic)
    with CppConsumer(namesrv, topic, group=group, fail_keys={"retry-me": 1}) as consumer:
        consumer.wait_live(cpp_probe(namesrv, topic), timeout_s=30)
        cpp_produce(namesrv, topic, [{"body": "again", "tags": "TagA", "keys": "retry-me"}])
        # delay level 3 (10 s) for the first retry, then the C++ rebalance picks up %RETRY%<group>
        [redelivered] = consumer.wait_for(1, timeout_s=45)
    first = [m for m in consumer.deliveries if m.status == "RECONSUME_LATER"]
    assert len(first) == 1 and first[0].reconsume_times == 0
    assert redelivered.keys == "retry-me" and redelivered.body == b"again"
    assert redelivered.reconsume_times == 1 and redelivered.msg_id == first[0].msg_id
    assert redelivered.topic == topic  # the C++ client restores the real topic from RETRY_TOPIC


def test_cpp_pull_consumer_reads_what_cpp_produced(reference_broker, unique):
    namesrv, topic = reference_broker.namesrv_addr, f"InteropCppPull_{unique}"
    outcomes = cpp_produce(namesrv, topic, [dict(spec, arg=i) for i, spec in enumerate(messages_under_test())],
                           mode="orderly")
    assert all(o.ok for o in outcomes), outcomes
    wait_for_route(namesrv, topic)
    pulled = cpp_pull(namesrv, topic, group=f"interop_cpp_pull_{unique}")
    assert sorted(m.key_list[0] for m in pulled.messages) == sorted(s["keys"][0] for s in messages_under_test())
    by_key = {m.key_list[0]: m for m in pulled.messages}
    queue_count = len(pulled.queues)
    for i, spec in enumerate(messages_under_test()):
        assert by_key[spec["keys"][0]].queue_id == i % queue_count
        assert by_key[spec["keys"][0]].body == _body(spec)


def test_cpp_orderly_consumer_keeps_per_queue_order(reference_broker, unique):
    namesrv, topic = reference_broker.namesrv_addr, f"InteropCppOrder_{unique}"
    cpp_create_topic(namesrv, topic)
    with CppConsumer(namesrv, topic, group=f"interop_cpp_order_{unique}", orderly=True) as consumer:
        consumer.wait_live(cpp_probe(namesrv, topic), timeout_s=15)
        specs = [{"body": f"step-{i}", "tags": "TagA", "keys": f"order-{i % 2}-{i}", "arg": i % 2} for i in range(10)]
        outcomes = cpp_produce(namesrv, topic, specs, mode="orderly")
        assert all(o.ok for o in outcomes), outcomes
        got = consumer.wait_for(10, timeout_s=20)
    for lane in (0, 1):
        lane_msgs = [m for m in got if m.keys.startswith(f"order-{lane}-")]
        assert [m.body for m in lane_msgs] == [f"step-{i}".encode() for i in range(lane, 10, 2)]
        assert len({m.queue_id for m in lane_msgs}) == 1


def test_cpp_broadcasting_consumers_each_receive_everything(reference_broker, unique):
    namesrv, topic = reference_broker.namesrv_addr, f"InteropCppBcast_{unique}"
    group = f"interop_cpp_bcast_{unique}"
    cpp_create_topic(namesrv, topic)
    with CppConsumer(namesrv, topic, group=group, model="BROADCASTING") as first, \
            CppConsumer(namesrv, topic, group=group, model="BROADCASTING") as second:
        first.wait_live(cpp_probe(namesrv, topic), timeout_s=30)
        second.wait_live(cpp_probe(namesrv, topic), timeout_s=30)
        cpp_produce(namesrv, topic, [{"body": f"b{i}", "tags": "TagA", "keys": f"bcast-{i}"} for i in range(4)])
        for consumer in (first, second):
            got = consumer.wait_for(4, timeout_s=20)
            assert sorted(m.keys for m in got) == [f"bcast-{i}" for i in range(4)]


def test_cpp_delayed_message_is_held_for_its_delay_level(reference_broker, unique):
    namesrv, topic = reference_broker.namesrv_addr, f"InteropCppDelay_{unique}"
    cpp_create_topic(namesrv, topic)
    with CppConsumer(namesrv, topic, group=f"interop_cpp_delay_{unique}") as consumer:
        consumer.wait_live(cpp_probe(namesrv, topic), timeout_s=30)
        [outcome] = cpp_produce(namesrv, topic, [{"body": "later", "tags": "TagA", "keys": "delay-1",
                                                  "delay_level": 1}])  # level 1 = 1 s
        assert outcome.ok, outcome
        [msg] = consumer.wait_for(1, timeout_s=20)
    assert msg.body == b"later" and msg.topic == topic
    assert msg.received_ms - msg.born_timestamp >= 900
