"""This SDK's SimpleConsumer with protocol="grpc" against the reference broker's gRPC proxy."""

from __future__ import annotations

import time

import pytest
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.consumer.grpc_simple_consumer import GrpcSimpleConsumer
from rocketmq_sdk.consumer.simple_consumer import SimpleConsumer
from rocketmq_sdk.exceptions import MQBrokerError
from rocketmq_sdk.grpc import v2

from .conftest import finish, unique


def receive_all(consumer, want: int, invisible_s: float = 10.0, timeout_s: float = 30.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got.extend(consumer.receive(16, invisible_s))
    assert len(got) >= want, f"received {len(got)} of {want}"
    return got


def test_receive_ack_redelivery_and_change_invisible_duration(grpc_cluster):
    cluster, proxy = grpc_cluster
    topic, group = unique("sc"), unique("gc")
    with Producer(unique("pg"), cluster.namesrv_addr) as p:  # remoting in, gRPC out
        m = Message(topic, b"first", tags="TagS", keys=["x"])
        m.put_user_property("size", "L")
        first_id = p.send(m).msg_id
        p.send(Message(topic, b"second", tags="TagS"))
    consumer = SimpleConsumer(group, endpoints=proxy.addr, protocol="grpc", await_duration=1)
    assert isinstance(consumer, GrpcSimpleConsumer)
    consumer.subscribe(topic, "TagS")
    with consumer:
        got = {m.body: m for m in receive_all(consumer, 2, invisible_s=2)}
        first = got[b"first"]
        assert first.msg_id == first_id and first.tags == "TagS" and first.keys == ["x"]
        assert first.get_property("size") == "L" and first.reconsume_times == 0
        consumer.ack(first)
        # "second" is not acked: invisible for 2 s, then delivered again (reconsume_times 1)
        again = receive_all(consumer, 1, invisible_s=2)
        assert [m.body for m in again] == [b"second"] and again[0].reconsume_times == 1
        consumer.change_invisible_duration(again[0], 30)  # new handle; acking it works
        consumer.ack(again[0])
        assert consumer.receive(16, 2) == []
        first.properties["POP_CK"] = "0 0 0 0 0 no-such-broker 0 0 0"  # a handle naming no broker of the topic
        with pytest.raises(MQBrokerError) as e:
            consumer.ack(first)
        assert e.value.code == v2.INVALID_RECEIPT_HANDLE
        first.properties["POP_CK"] = "garbage"
        with pytest.raises(MQBrokerError) as e:
            consumer.ack(first)
        assert e.value.code == v2.INVALID_RECEIPT_HANDLE


def test_messages_of_the_official_client_reach_the_sdk_over_grpc(grpc_cluster, official):
    _, proxy = grpc_cluster
    topic, group = unique("oc"), unique("gc")
    consumer = SimpleConsumer(group, endpoints=proxy.addr, protocol="grpc", await_duration=1)
    consumer.subscribe(topic)
    with consumer:
        sent = finish(official("produce.py", proxy.addr, topic))
        got = {m.msg_id: m for m in receive_all(consumer, 5)}
        for m in got.values():
            consumer.ack(m)
    assert set(got) == {s["id"] for s in sent}
    normal = got[sent[0]["id"]]
    assert normal.tags == "TagN" and sorted(normal.keys) == ["k1", "k2"] and normal.get_property("color") == "red"
    assert {got[s["id"]].get_property("__SHARDINGKEY") for s in sent[1:4]} == {"order-42"}


def test_dev_command_serves_grpc_beside_remoting(server_process, tmp_path):
    """``python -m rocketmq_broker dev --grpc-port 0``: a GRPC line, and a round trip through it."""
    import sys

    dev = server_process([sys.executable, "-m", "rocketmq_broker", "dev", "--store", str(tmp_path / "st"),
                          "--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0"])
    addr = dev.lines["GRPC"]
    topic, group = unique("dv"), unique("gd")
    with Producer(unique("pg"), f"grpc://{addr}") as p:
        sent = p.send(Message(topic, b"via dev")).msg_id
    consumer = SimpleConsumer(group, f"grpc://{addr}", await_duration=1)
    consumer.subscribe(topic)
    consumer.start()
    try:
        got = receive_all(consumer, 1)
        consumer.ack(got[0])
    finally:
        consumer.shutdown()
    assert got[0].msg_id == sent and got[0].body == b"via dev"
    assert dev.stop() == 0


def test_a_subclass_refuses_protocol_grpc_instead_of_speaking_remoting():
    from rocketmq_sdk.exceptions import IllegalArgumentError

    class Mine(SimpleConsumer):
        pass

    with pytest.raises(IllegalArgumentError, match="remoting only"):
        Mine("g", endpoints="127.0.0.1:8081", protocol="grpc")
    with pytest.raises(IllegalArgumentError, match="protocol"):
        SimpleConsumer("g", "127.0.0.1:9876", protocol="http")


def test_the_proxy_sends_a_message_past_its_last_attempt_to_the_dlq_on_receive(grpc_cluster):
    """As Apache's proxy (PopMessageResultFilter): a message popped with reconsume times >= the
    group's max attempts (retryMaxTimes + 1) goes to %DLQ% and is acknowledged instead of being
    delivered again, so a 5.x client that only ever changes its invisibility still ends."""
    from rocketmq_sdk import LitePullConsumer
    from rocketmq_sdk.admin import AdminClient

    cluster, proxy = grpc_cluster
    topic, group = unique("pd"), unique("gpd")
    with AdminClient(cluster.namesrv_addr) as admin:
        admin.update_subscription_group(group, broker_addr=cluster.broker_addr, retry_max_times=1)  # 2 attempts
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p:
        sent = p.send(Message(topic, b"never-acked")).msg_id
    consumer = SimpleConsumer(group, endpoints=proxy.addr, protocol="grpc", await_duration=1,
                              consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    attempts: list[int] = []
    dlq = LitePullConsumer(unique("cg"), cluster.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    dlq.subscribe(f"%DLQ%{group}", "*")
    dead: list = []
    with consumer, dlq:
        deadline = time.monotonic() + 40
        while not dead and time.monotonic() < deadline:  # never acked: back after 1 s, until the DLQ has it
            attempts.extend(m.reconsume_times for m in consumer.receive(16, 1))
            dead = dlq.poll(200)
    assert attempts == [0, 1]
    assert [m.msg_id for m in dead] == [sent]


def test_namespaces_as_the_official_client_sends_them(grpc_cluster, official):
    """The official client's messages in namespace ``ns`` reach this SDK's SimpleConsumer in the
    same namespace (x-mq-namespace and every resource_namespace), under the application's topic
    name; the brokers hold them as ``ns%topic``; a consumer without the namespace sees another
    topic."""
    cluster, proxy = grpc_cluster
    topic, group, ns = unique("nso"), unique("gns"), unique("ns")
    sent = finish(official("produce.py", proxy.addr, topic, ns))
    consumer = SimpleConsumer(group, endpoints=proxy.addr, protocol="grpc", await_duration=1, namespace=ns)
    consumer.subscribe(topic)
    with consumer:
        md = dict(consumer._connection().metadata())
        assert md["x-mq-namespace"] == ns
        got = {m.msg_id: m for m in receive_all(consumer, 5)}
        for m in got.values():
            consumer.ack(m)
    assert set(got) == {s["id"] for s in sent}
    assert {m.topic for m in got.values()} == {topic}
    assert got[sent[0]["id"]].tags == "TagN" and got[sent[0]["id"]].get_property("color") == "red"
    from rocketmq_sdk.admin import AdminClient
    with AdminClient(cluster.namesrv_addr) as admin:
        assert admin.topic_route(f"{ns}%{topic}").queue_datas  # stored under ns%topic
    plain = SimpleConsumer(group, endpoints=proxy.addr, protocol="grpc", await_duration=1)
    plain.subscribe(topic)
    with plain, pytest.raises(MQBrokerError) as e:
        plain.receive(16, 5)
    assert e.value.code == v2.TOPIC_NOT_FOUND
