"""This SDK's Producer with protocol="grpc" against the reference broker's gRPC proxy; what it
sends is read back with the remoting consumer."""

from __future__ import annotations

import concurrent.futures

import pytest
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.exceptions import IllegalArgumentError, MQBrokerError, RemotingError
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.producer.grpc_producer import GrpcProducer
from rocketmq_sdk.protocol.message import SendStatus

from .conftest import unique
from .test_official_client import consume


def test_one_switch_makes_a_grpc_producer(grpc_cluster):
    _, proxy = grpc_cluster
    assert isinstance(Producer("g", endpoints=proxy.addr, protocol="grpc"), GrpcProducer)
    assert isinstance(Producer("g", f"grpc://{proxy.addr}"), GrpcProducer)
    assert type(Producer("g", "127.0.0.1:9876")) is Producer
    with pytest.raises(IllegalArgumentError, match="protocol"):
        Producer("g", "127.0.0.1:9876", protocol="http")
    with pytest.raises(IllegalArgumentError, match="endpoints"):
        Producer("g", protocol="grpc")


def test_sends_reach_remoting_consumers_with_tags_keys_properties_and_order(grpc_cluster):
    cluster, proxy = grpc_cluster
    topic = unique("sg")
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p:
        m = Message(topic, b"one", tags="TagA", keys=["k1", "k2"])
        m.put_user_property("color", "green")
        r = p.send(m)
        assert r.send_status is SendStatus.SEND_OK and r.msg_id == m.uniq_key and r.queue_offset >= 0
        ordered = [p.send(Message(topic, f"o{i}".encode()), lambda mqs, msg, arg: mqs[0], "order-9")
                   for i in range(3)]
        fut = p.send_async(Message(topic, b"async"))
        assert fut.result(10).send_status is SendStatus.SEND_OK
        batch = p.send_batch([Message(topic, b"b1"), Message(topic, b"b2")])
        assert len(batch.msg_id.split(",")) == 2
    got = {m.msg_id: m for m in consume(cluster.namesrv_addr, topic, 7)}
    one = got[r.msg_id]
    assert one.tags == "TagA" and sorted(one.keys) == ["k1", "k2"] and one.get_property("color") == "green"
    fifo = sorted((got[o.msg_id] for o in ordered), key=lambda m: m.queue_offset)
    assert [m.body for m in fifo] == [b"o0", b"o1", b"o2"]
    assert len({m.queue_id for m in fifo}) == 1 and fifo[0].get_property("__SHARDINGKEY") == "order-9"
    assert {m.body for m in got.values()} >= {b"async", b"b1", b"b2"}


def test_refusals_carry_the_5x_codes(grpc_cluster):
    _, proxy = grpc_cluster
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p:
        with pytest.raises(IllegalArgumentError):
            p.send(Message("bad/topic", b"x"))  # checked before anything is sent
        m = Message(unique("t"), b"x")
        m.put_property("__SHARDINGKEY", "g" * 100)  # longer than the 64 of a message group
        with pytest.raises(MQBrokerError) as e:
            p.send(m)
        assert e.value.code == v2.ILLEGAL_MESSAGE_GROUP


def test_async_callback_and_unreachable_proxy(grpc_cluster):
    with Producer(unique("pg"), endpoints="127.0.0.1:1", protocol="grpc", send_msg_timeout=1500,
                  retry_times_when_send_failed=1, retry_times_when_send_async_failed=1) as p:
        with pytest.raises(RemotingError):
            p.send(Message("t", b"x"))
        seen: concurrent.futures.Future = concurrent.futures.Future()
        p.send_async(Message("t", b"x"), lambda r, e: seen.set_result(e))
        assert isinstance(seen.result(10), RemotingError)



def test_sends_to_a_topic_not_created_yet_use_only_the_queues_it_is_created_with():
    """Until the name server knows a new topic, sends go by TBW102's route (8 queues); the broker
    creates the topic with 4 (the send header's defaultTopicQueueNums), so only queues 0-3 may be
    chosen (failed before: queue 6 was refused, 'request queueId[6] is illegal', as the benchmark
    against ``dev --grpc-port`` showed)."""
    from rocketmq_broker.proxy.routes import Route, RouteCache

    cache = RouteCache(api=None)  # type: ignore[arg-type]
    route = Route("new", True, [("broker-a", q, v2.READ_WRITE) for q in range(8)], {"broker-a": "127.0.0.1:1"}, 0.0)
    assert {cache.select(route, None).queue_id for _ in range(32)} == {0, 1, 2, 3}
    assert cache.select(route, "order-1").queue_id < 4


def test_transactions_over_grpc_with_the_remoting_listener(grpc_cluster):
    """Commit, rollback and an open transaction the broker checks (through the proxy's Telemetry
    stream) answered by ``check_local_transaction``."""
    import threading

    from rocketmq_sdk.producer.grpc_transaction import GrpcTransactionProducer
    from rocketmq_sdk.producer.transaction import LocalTransactionState

    cluster, proxy = grpc_cluster
    topic = unique("gt")
    checked = threading.Event()

    class Listener:
        def execute_local_transaction(self, msg, arg):
            return {"c": LocalTransactionState.COMMIT_MESSAGE, "r": LocalTransactionState.ROLLBACK_MESSAGE}.get(
                arg, LocalTransactionState.UNKNOW)

        def check_local_transaction(self, msg):
            assert msg.body == b"open" and msg.topic == topic
            checked.set()
            return LocalTransactionState.COMMIT_MESSAGE

    p = GrpcTransactionProducer(unique("pg"), endpoints=proxy.addr, listener=Listener())
    with p:
        results = [p.send_message_in_transaction(Message(topic, body), arg)
                   for body, arg in ((b"commit", "c"), (b"rollback", "r"), (b"open", "u"))]
        assert [r.local_transaction_state for r in results] == [LocalTransactionState.COMMIT_MESSAGE,
                                                                LocalTransactionState.ROLLBACK_MESSAGE,
                                                                LocalTransactionState.UNKNOW]
        assert all(r.transaction_id for r in results)
        got = consume(cluster.namesrv_addr, topic, 2)
        assert checked.is_set()
    assert sorted(m.body for m in got) == [b"commit", b"open"]


def test_namespace_goes_as_the_resource_namespace(grpc_cluster):
    cluster, proxy = grpc_cluster
    topic = unique("nst")
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc", namespace="ns1") as p:
        sent = p.send(Message(topic, b"in ns1")).msg_id
    got = consume(cluster.namesrv_addr, f"ns1%{topic}", 1)  # the proxy wraps it as remoting clients do
    assert got[0].msg_id == sent and got[0].body == b"in ns1"


def test_a_producer_class_without_a_grpc_variant_refuses_protocol_grpc(grpc_cluster):
    """Failed before: TransactionProducer(..., protocol="grpc") silently made a remoting producer."""
    from rocketmq_sdk.producer.transaction import TransactionProducer

    class Listener:
        def execute_local_transaction(self, msg, arg): ...
        def check_local_transaction(self, msg): ...

    _, proxy = grpc_cluster
    with pytest.raises(IllegalArgumentError, match="GrpcTransactionProducer"):
        TransactionProducer("g", endpoints=proxy.addr, protocol="grpc", listener=Listener())


def test_each_request_message_carries_only_its_own_properties():
    """The producer copies one template per topic (topic, namespace, born host) into each
    request message: nothing of an earlier message (tag, keys, group, user properties) may stay."""
    from rocketmq_sdk.grpc.convert import to_v2

    p = GrpcProducer("pg", endpoints="127.0.0.1:1", namespace="ns1")
    p._topics.add("t")  # no telemetry update (not started)
    rich = Message("t", b"one", tags="TagA", keys=["k1", "k2"])
    rich.put_user_property("color", "green")
    first, _ = p._request([rich], "group-1")
    second, ids = p._request([Message("t", b"two")])
    for req, msg, group in ((first, rich, "group-1"), (second, None, None)):
        m = req.messages[0]
        props = dict(msg.properties) if msg is not None else {"UNIQ_KEY": ids[0], "WAIT": "true"}
        if group:
            props["__SHARDINGKEY"] = group
        want = to_v2("t", m.body, props, namespace="ns1")
        want.system_properties.born_timestamp.CopyFrom(m.system_properties.born_timestamp)
        want.system_properties.born_host = p._host
        assert m == want
    plain = second.messages[0]
    assert not plain.system_properties.tag and not plain.system_properties.keys
    assert not plain.system_properties.message_group and dict(plain.user_properties) == {}
    assert plain.system_properties.message_type == v2.NORMAL and plain.topic.resource_namespace == "ns1"
    assert plain.system_properties.born_timestamp.seconds > 0 and plain.system_properties.born_host == p._host


@pytest.mark.parametrize("props", [{"UNIQ_KEY": "ID1", "WAIT": "true"}, {"UNIQ_KEY": "ID1", "WAIT": "true", "TAGS": "A"},
                                   {"UNIQ_KEY": "ID1", "color": "green"}, {"UNIQ_KEY": "ID1", "DELAY": "2"}])
def test_the_v2_message_of_a_plain_message_and_of_richer_ones(props):
    """to_v2 written out field by field: the plain message (id and WAIT only: the short path of
    fill_v2) and messages that need more than it (a tag, a user property, a delay level)."""
    from rocketmq_sdk.grpc.convert import to_v2

    want = v2.Message(body=b"hello")
    want.topic.name, want.topic.resource_namespace = "t", "ns"
    sp = want.system_properties
    sp.message_id, sp.message_type, sp.body_encoding = "ID1", v2.NORMAL, v2.IDENTITY
    sp.body_digest.type, sp.body_digest.checksum = v2.CRC32, "3610A686"  # zlib.crc32(b"hello")
    if "TAGS" in props:
        sp.tag = "A"
    if "color" in props:
        want.user_properties["color"] = "green"
    if "DELAY" in props:
        sp.message_type = v2.DELAY
        sp.delivery_timestamp.seconds = 1_700_000_005  # level 2 = 5 s
    assert to_v2("t", b"hello", props, namespace="ns", now_ms=1_700_000_000_000) == want
