"""RecallMessage through the proxy (RocketMQ 5.3): the recall handle in SendMessage answers of
delay/timer messages, the official 5.x client's recall, refusals before and by the broker."""

from __future__ import annotations

import time

from rocketmq_broker import embedded
from rocketmq_broker.proxy import GrpcProxy
from rocketmq_sdk.consumer.simple_consumer import SimpleConsumer
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.grpc.connection import GrpcConnection
from rocketmq_sdk.grpc.convert import set_timestamp_ms
from rocketmq_sdk.protocol.recall import RecallHandle

from .conftest import finish, unique


def send_timer(conn: GrpcConnection, topic: str, body: bytes, deliver_ms: int | None) -> v2.SendResultEntry:
    req = v2.SendMessageRequest()
    m = req.messages.add(body=body)
    m.topic.name = topic
    m.system_properties.message_id = f"{int(time.time() * 1e6):032X}"
    m.system_properties.message_type = v2.NORMAL if deliver_ms is None else v2.DELAY
    if deliver_ms is not None:
        set_timestamp_ms(m.system_properties.delivery_timestamp, deliver_ms)
    resp = conn.call("SendMessage", req, 5)
    assert resp.status.code == v2.OK, resp.status
    return resp.entries[0]


def recall(conn: GrpcConnection, topic: str, handle: str) -> v2.RecallMessageResponse:
    return conn.call("RecallMessage", v2.RecallMessageRequest(topic=v2.Resource(name=topic), recall_handle=handle), 5)


def bodies_received(proxy_addr: str, topic: str, until_s: float) -> list[bytes]:
    """Everything a new group receives of ``topic`` until ``until_s`` (monotonic)."""
    consumer = SimpleConsumer(unique("grc"), endpoints=proxy_addr, protocol="grpc", await_duration=1,
                              consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    got: list[bytes] = []
    with consumer:
        while time.monotonic() < until_s:
            for m in consumer.receive(16, 10):
                got.append(m.body)
                consumer.ack(m)
    return got


def test_a_recalled_timer_message_is_never_delivered(grpc_cluster):
    _, proxy = grpc_cluster
    topic = unique("rc")
    conn = GrpcConnection(proxy.addr, unique("client"))
    try:
        due = int(time.time() * 1000) + 3000
        timer = send_timer(conn, topic, b"recall-me", due)
        normal = send_timer(conn, topic, b"keep-me", None)
        assert timer.recall_handle and not normal.recall_handle  # only timer messages can be recalled
        h = RecallHandle.decode(timer.recall_handle)
        assert (h.topic, h.broker_name, h.message_id) == (topic, "broker-a", timer.message_id)
        answer = recall(conn, topic, timer.recall_handle)
        assert answer.status.code == v2.OK and answer.message_id == timer.message_id
        assert recall(conn, topic, timer.recall_handle).status.code == v2.OK  # again: accepted (as 5.3.3)
        got = bodies_received(proxy.addr, topic, time.monotonic() + (due / 1000 - time.time()) + 3)
        assert got == [b"keep-me"]
    finally:
        conn.close()


def test_bad_recalls_are_refused(grpc_cluster):
    _, proxy = grpc_cluster
    topic = unique("rb")
    conn = GrpcConnection(proxy.addr, unique("client"))
    try:
        timer = send_timer(conn, topic, b"x", int(time.time() * 1000) + 1500)
        assert recall(conn, topic, "not a handle!").status.code == v2.BAD_REQUEST  # nothing sent
        elsewhere = RecallHandle(topic, "no-such-broker", str(int(time.time() * 1000) + 60_000), timer.message_id)
        assert recall(conn, topic, elsewhere.encode()).status.code == v2.BAD_REQUEST  # not a broker of the topic
        other = send_timer(conn, unique("rt"), b"y", int(time.time() * 1000) + 60_000)
        assert recall(conn, topic, other.recall_handle).status.code == v2.BAD_REQUEST  # the broker: topic not match
        assert recall(conn, "../x", timer.recall_handle).status.code == v2.ILLEGAL_TOPIC
        h = RecallHandle.decode(timer.recall_handle)
        late = RecallHandle(h.topic, h.broker_name, str(int(time.time() * 1000) - 1000), h.message_id)
        assert recall(conn, topic, late.encode()).status.code == v2.BAD_REQUEST  # due: "timestamp invalid"
    finally:
        conn.close()


def test_recall_disabled_on_the_broker_is_forbidden():
    with embedded.start_dev_cluster(in_process=True, broker_config={"broker_version": "5.3.3"}) as c:
        proxy = GrpcProxy(c.namesrv_addr)
        proxy.start()
        conn = GrpcConnection(proxy.addr, unique("client"))
        try:
            topic = unique("rf")
            timer = send_timer(conn, topic, b"x", int(time.time() * 1000) + 60_000)
            assert recall(conn, topic, timer.recall_handle).status.code == v2.FORBIDDEN
        finally:
            conn.close()
            proxy.stop()


def test_the_official_client_recalls_through_the_proxy(grpc_cluster, official):
    _, proxy = grpc_cluster
    topic = unique("ro")
    started = time.monotonic()
    lines = finish(official("recall.py", proxy.addr, topic, "3"))
    delayed, normal, recalled = lines
    assert delayed["handle"] and recalled["id"] == delayed["id"]
    got = bodies_received(proxy.addr, topic, started + 8)
    assert got == [b"keep-me"]
