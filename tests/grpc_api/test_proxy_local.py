"""The proxy's local mode (``dev --grpc-port``): served on the loop of the broker it is embedded in,
sends to that broker skip the remoting connection (``rocketmq_broker.proxy.local``) and still
pass the broker's request hooks and processors."""

from __future__ import annotations

import pytest
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.exceptions import MQBrokerError
from rocketmq_sdk.grpc import v2

from .conftest import finish, unique
from .test_official_client import consume


def test_local_sends_skip_the_connection_and_arrive_intact(local_proxy):
    cluster, _, proxy = local_proxy
    topic = unique("loc")
    before = proxy.local_requests
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p:
        m = Message(topic, b"one", tags="TagL", keys=["k1"])
        m.put_user_property("color", "blue")
        first = p.send(m)
        ordered = [p.send(Message(topic, f"o{i}".encode()), lambda mqs, msg, arg: mqs[0], "key-1") for i in range(3)]
        batch = p.send_batch([Message(topic, b"b1"), Message(topic, b"b2")])
    assert proxy.local_requests - before == 6  # one SEND_MESSAGE_V2 per message, none over TCP
    got = {m.msg_id: m for m in consume(cluster.namesrv_addr, topic, 6)}
    one = got[first.msg_id]
    assert one.body == b"one" and one.tags == "TagL" and one.keys == ["k1"] and one.get_property("color") == "blue"
    assert one.born_host == proxy.addr  # the broker saw the proxy as the sender
    fifo = sorted((got[o.msg_id] for o in ordered), key=lambda m: m.queue_offset)
    assert [m.body for m in fifo] == [b"o0", b"o1", b"o2"] and len({m.queue_id for m in fifo}) == 1
    assert {got[i].body for i in batch.msg_id.split(",")} == {b"b1", b"b2"}


def test_local_sends_pass_the_broker_checks(local_proxy):
    """A topic the broker refuses writes to (perm 4: read only) is refused over the local path as
    over a connection: NO_PERMISSION becomes FORBIDDEN."""
    cluster, broker, proxy = local_proxy
    topic = unique("ro")
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc", retry_times_when_send_failed=0) as p:
        p.send(Message(topic, b"created"))
        p.send(Message(topic, b"route cached"))  # the proxy's route (5 s) still says writable
        broker.topics.table[topic].perm = 4
        before = proxy.local_requests
        with pytest.raises(MQBrokerError) as e:
            p.send(Message(topic, b"refused"))
    assert e.value.code == v2.FORBIDDEN and proxy.local_requests - before == 1


def test_official_client_sends_through_the_local_path(local_proxy, official):
    cluster, _, proxy = local_proxy
    topic = unique("t5l")
    before = proxy.local_requests
    sent = finish(official("produce.py", proxy.addr, topic))
    assert proxy.local_requests - before == len(sent) == 5
    got = {m.msg_id: m for m in consume(cluster.namesrv_addr, topic, 5)}
    assert set(got) == {s["id"] for s in sent}
    assert got[sent[0]["id"]].get_property("color") == "red"


def test_receive_ack_and_invisible_time_through_the_local_path(local_proxy):
    from rocketmq_sdk.consumer.simple_consumer import SimpleConsumer

    from .test_sdk_simple_consumer import receive_all

    cluster, _, proxy = local_proxy
    topic, group = unique("lr"), unique("glr")
    with Producer(unique("pg"), cluster.namesrv_addr) as p:  # remoting in, gRPC out
        ids = {p.send(Message(topic, f"m{i}".encode())).msg_id for i in range(3)}
    consumer = SimpleConsumer(group, endpoints=proxy.addr, protocol="grpc", await_duration=1)
    consumer.subscribe(topic)
    with consumer:
        got = receive_all(consumer, 3, invisible_s=30)
        assert {m.msg_id for m in got} == ids
        before = proxy.local_requests
        consumer.change_invisible_duration(got[0], 1)  # back in about 1 s
        for m in got[1:]:
            consumer.ack(m)
        assert proxy.local_requests - before == 3  # CHANGE_MESSAGE_INVISIBLETIME + 2 ACK_MESSAGE
        again = receive_all(consumer, 1, invisible_s=30)  # held POPs answered on the local channel
        assert [m.msg_id for m in again] == [got[0].msg_id]
        consumer.ack(again[0])
    assert proxy.local_requests - before >= 5  # and the POPs, and the last ACK


def test_official_simple_consumer_through_the_local_path(local_proxy, official):
    cluster, _, proxy = local_proxy
    topic, group = unique("lo5"), unique("glo5")
    with Producer(unique("pg"), cluster.namesrv_addr) as producer:
        ids = {producer.send(Message(topic, body)).msg_id for body in (b"plain", b"redeliver")}
    before = proxy.local_requests
    lines = finish(official("simple_consume.py", proxy.addr, topic, group, "2"))
    assert {line["id"] for line in lines} == ids
    assert [line["attempt"] for line in lines if line["body"] == "redeliver"] == [1, 2]
    assert proxy.local_requests - before >= 3  # POPs and the two ACKs


def test_official_transactions_through_the_local_path(local_proxy, official):
    """The official client's transaction scenario (commit, rollback, the broker's check answered
    over Telemetry) with the half messages and END_TRANSACTION on the local path, while the
    broker's check still reaches the proxy over its heartbeat connection."""
    from . import test_official_client

    cluster, _, proxy = local_proxy
    before = proxy.local_requests
    test_official_client.test_transactions_commit_rollback_and_server_check((cluster, proxy), official)
    assert proxy.local_requests - before >= 6  # 3 half messages, commit, rollback, the check's commit


def test_local_responses_reach_the_proxy_as_a_connection_would_deliver_them():
    """The dispatch hands a response to the local channel without a frame; one whose header
    fields are not all strings (a processor's ints, bools) still arrives with the strings a
    connection's decoded frame would carry."""
    import asyncio

    from rocketmq_broker.proxy.local import LocalChannel
    from rocketmq_sdk.remoting import RemotingCommand
    from rocketmq_sdk.remoting.channel import RequestDispatcher

    async def run() -> tuple:
        ch = LocalChannel("127.0.0.1:1", "127.0.0.1:2", asyncio.get_running_loop())
        dispatcher = RequestDispatcher()
        plain = RemotingCommand.request(310, {"b": "t"})
        typed = RemotingCommand.request(310, {"b": "t"})
        dispatcher.register_processor(310, lambda c, cmd: cmd.response(
            0, None, {"queueId": "1"} if cmd is plain else {"queueId": 1, "traceOn": False}))  # type: ignore[dict-item]
        got = []
        for cmd in (plain, typed):
            fut = ch.expect(cmd.opaque)
            dispatcher._on_request(ch, cmd)  # type: ignore[arg-type]
            got.append(fut.result())
        return plain, typed, got

    plain, typed, (a, b) = asyncio.run(run())
    assert a.opaque == plain.opaque and a.ext_fields == {"queueId": "1"} and a.code == 0
    assert b.opaque == typed.opaque and b.ext_fields == {"queueId": "1", "traceOn": "false"}


def test_the_send_header_the_broker_receives_from_the_proxy(local_proxy):
    """SEND_MESSAGE_V2 as the proxy writes it (the single-letter header of Java's
    SendMessageRequestHeaderV2, as this SDK's remoting producers write it), seen by a request
    hook of the broker."""
    import time

    from rocketmq_sdk.protocol.codes import MessageConst as MC
    from rocketmq_sdk.protocol.codes import RequestCode
    from rocketmq_sdk.protocol.message_codec import decode_properties

    _, broker, proxy = local_proxy
    topic = unique("hdr")
    seen: list[dict] = []

    def hook(channel, cmd):
        if cmd.code == RequestCode.SEND_MESSAGE_V2 and cmd.ext_fields.get("b") == topic:
            seen.append(dict(cmd.ext_fields))

    hooks = broker.server._request_hooks
    hooks.insert(0, hook)
    try:
        with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p:
            m = Message(topic, b"h", tags="TagH", keys=["k1", "k2"])
            m.put_user_property("color", "blue")
            before = int(time.time() * 1000)
            sent = p.send(m)
    finally:
        hooks.remove(hook)
    assert len(seen) == 1
    ext = seen[0]
    props = decode_properties(ext.pop("i"))
    born = int(ext.pop("g"))
    assert before - 60_000 <= born <= int(time.time() * 1000)
    assert ext.pop("e") in {"0", "1", "2", "3"}  # one of the 4 queues the topic is created with
    assert ext == {"a": "GRPC_PROXY_PRODUCER", "b": topic, "c": "TBW102", "d": "4",
                   "f": "0", "h": "0", "j": "0", "k": "false", "m": "false", "n": broker.config.broker_name}
    assert props[MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == sent.msg_id and props[MC.TAGS] == "TagH"
    assert props[MC.KEYS] == "k1 k2" and props["color"] == "blue" and props[MC.WAIT_STORE_MSG_OK] == "true"
