"""Bad input to the gRPC proxy gets gRPC / 5.x status errors and never reaches the store; a
proxy restart is survived by this SDK's gRPC clients."""

from __future__ import annotations

import os

import grpc
import pytest
from rocketmq_broker.proxy import GrpcProxy
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.grpc.service import RPCS

from tests.conftest import wait_until

from .conftest import unique


def raw_call(addr: str, rpc: str, payload: bytes, metadata=(("x-mq-client-id", "fault-test"),)) -> bytes:
    with grpc.insecure_channel(addr) as ch:
        call = ch.unary_unary(RPCS[rpc].path, request_serializer=None, response_deserializer=None)
        return call(payload, timeout=10, metadata=metadata)


def send_request(topic: str, body: bytes = b"x", **sp) -> v2.SendMessageRequest:
    req = v2.SendMessageRequest()
    m = req.messages.add(body=body)
    m.topic.name = topic
    m.system_properties.message_id = "C0A8000100002A9F0000000000000001"
    m.system_properties.message_type = v2.NORMAL
    for k, v in sp.items():
        setattr(m.system_properties, k, v)
    return req


def status_of(addr: str, rpc: str, req) -> v2.Status:
    return RPCS[rpc].response.FromString(raw_call(addr, rpc, req.SerializeToString())).status


def test_unreadable_requests_end_with_invalid_argument(grpc_cluster):
    _, proxy = grpc_cluster
    for rpc in ("SendMessage", "QueryRoute", "AckMessage", "EndTransaction"):
        with pytest.raises(grpc.RpcError) as e:
            raw_call(proxy.addr, rpc, b"\xff\xff\xff\x0f garbage")
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, rpc


def test_oversized_request_is_refused_by_grpc(grpc_cluster):
    _, proxy = grpc_cluster
    with pytest.raises(grpc.RpcError) as e:
        raw_call(proxy.addr, "SendMessage", send_request("big", b"x" * (5 * 1024 * 1024)).SerializeToString())
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_illegal_names_and_fields_get_5x_codes_and_never_reach_the_store(grpc_cluster):
    cluster, proxy = grpc_cluster
    hostile = "x/../../escape"
    assert status_of(proxy.addr, "SendMessage", send_request(hostile)).code == v2.ILLEGAL_TOPIC
    assert status_of(proxy.addr, "SendMessage", send_request("a" * 200)).code == v2.ILLEGAL_TOPIC
    assert status_of(proxy.addr, "QueryRoute", v2.QueryRouteRequest(topic=v2.Resource(name="a\x00b"))).code \
        == v2.ILLEGAL_TOPIC
    ok_topic = unique("f")
    assert status_of(proxy.addr, "SendMessage", send_request(ok_topic, b"")).code == v2.MESSAGE_BODY_EMPTY
    assert status_of(proxy.addr, "SendMessage", send_request(ok_topic, b"x" * (4 * 1024 * 1024 + 1))).code \
        == v2.MESSAGE_BODY_TOO_LARGE
    assert status_of(proxy.addr, "SendMessage", send_request(ok_topic, tag="a|b")).code == v2.ILLEGAL_MESSAGE_TAG
    assert status_of(proxy.addr, "SendMessage", send_request(ok_topic, message_group="g")).code \
        == v2.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    many = send_request(ok_topic)
    for _ in range(1000):
        many.messages.append(many.messages[0])
    assert status_of(proxy.addr, "SendMessage", many).code == v2.BAD_REQUEST  # 1001 messages: too many
    assert status_of(proxy.addr, "SendMessage", v2.SendMessageRequest()).code == v2.BAD_REQUEST  # none
    req = send_request(ok_topic)
    req.messages[0].user_properties["TAGS"] = "sneaky"
    assert status_of(proxy.addr, "SendMessage", req).code == v2.ILLEGAL_MESSAGE_PROPERTY_KEY
    req = send_request(ok_topic)
    req.messages[0].system_properties.message_id = ""
    assert status_of(proxy.addr, "SendMessage", req).code == v2.ILLEGAL_MESSAGE_ID
    ack = v2.AckMessageRequest(group=v2.Resource(name="g/../x"), topic=v2.Resource(name=ok_topic))
    assert status_of(proxy.addr, "AckMessage", ack).code == v2.ILLEGAL_CONSUMER_GROUP
    end = v2.EndTransactionRequest(topic=v2.Resource(name=ok_topic), message_id="m", transaction_id="../x",
                                   resolution=v2.COMMIT)
    assert status_of(proxy.addr, "EndTransaction", end).code == v2.INVALID_TRANSACTION_ID
    # a well-formed transaction id naming a host that is no broker of the cluster: not contacted
    end.transaction_id = "0A0000010000270F0000000000000000-0"
    assert status_of(proxy.addr, "EndTransaction", end).code == v2.INVALID_TRANSACTION_ID
    hb = raw_call(proxy.addr, "Heartbeat", v2.HeartbeatRequest(client_type=v2.PRODUCER).SerializeToString(),
                  metadata=())
    assert v2.HeartbeatResponse.FromString(hb).status.code == v2.CLIENT_ID_REQUIRED
    store = cluster.store_dir
    names = {n for _, dirs, files in os.walk(store) for n in dirs + files}
    assert not any("escape" in n or n.startswith("aaaa") for n in names)
    assert ok_topic not in names  # every refused send was refused before the broker


def test_sdk_producer_survives_a_proxy_restart(grpc_cluster):
    cluster, proxy = grpc_cluster
    second = GrpcProxy(cluster.namesrv_addr)
    second.start()
    port = second.port
    topic = unique("rs")
    try:
        with Producer(unique("pg"), endpoints=second.addr, protocol="grpc", send_msg_timeout=10_000) as p:
            p.send(Message(topic, b"before"))
            second.stop()
            second = GrpcProxy(cluster.namesrv_addr, port=port)  # same port, new process state
            second.start()
            assert p.send(Message(topic, b"after")).queue_offset >= 0  # reconnected
            # the Telemetry stream was re-opened: the new proxy knows the producer's topic
            sessions = second.service.sessions
            wait_until(lambda: any(topic in s.topics and s.outbox is not None for s in sessions._by_id.values()),
                       15, "the producer's Telemetry stream to come back")
    finally:
        second.stop()


def test_sends_from_threads_across_a_proxy_restart_lose_nothing(grpc_cluster):
    """Four threads send through one gRPC producer (the SDK's HTTP/2 transport) while the proxy is
    stopped and started again on its port: every send that returned OK is stored (at least once);
    sends during the outage are retried by the policy."""
    import threading

    from .test_official_client import consume

    cluster, _ = grpc_cluster
    proxy = GrpcProxy(cluster.namesrv_addr)
    proxy.start()
    port, topic = proxy.port, unique("rr")
    acked: list[str] = []
    failures: list[BaseException] = []
    halfway = threading.Event()
    try:
        with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc", send_msg_timeout=15_000,
                      retry_times_when_send_failed=20) as p:
            def sender(t: int) -> None:
                for i in range(40):
                    if i == 10:
                        halfway.set()
                    try:
                        acked.append(p.send(Message(topic, f"{t}-{i}".encode())).msg_id)
                    except Exception as exc:  # noqa: BLE001 - counted below
                        failures.append(exc)

            threads = [threading.Thread(target=sender, args=(t,)) for t in range(4)]
            for t in threads:
                t.start()
            assert halfway.wait(30)
            proxy.stop()
            proxy = GrpcProxy(cluster.namesrv_addr, port=port)
            proxy.start()
            for t in threads:
                t.join(120)
    finally:
        proxy.stop()
    assert not failures, failures[:3]
    assert len(acked) == 160
    stored = {m.msg_id for m in consume(cluster.namesrv_addr, topic, 160)}
    assert set(acked) <= stored


def test_proxy_command_alone_and_a_consumer_across_its_restart(grpc_cluster, server_process):
    """``python -m rocketmq_broker proxy -n NAMESRV`` in its own process; a gRPC SimpleConsumer
    gets a connection error while it is down and receives again once it is back on its port."""
    import sys

    from rocketmq_sdk.consumer.simple_consumer import SimpleConsumer
    from rocketmq_sdk.exceptions import RemotingError

    cluster, _ = grpc_cluster
    cmd = [sys.executable, "-m", "rocketmq_broker", "proxy", "-n", cluster.namesrv_addr, "--grpc-port", "0"]
    first = server_process(cmd)
    addr = first.lines["GRPC"]
    port = addr.rsplit(":", 1)[1]
    topic, group = unique("pr"), unique("gpr")
    consumer = SimpleConsumer(group, endpoints=addr, protocol="grpc", await_duration=1, mq_client_api_timeout=2000)
    consumer.subscribe(topic)
    with consumer, Producer(unique("pg"), cluster.namesrv_addr) as remoting:
        remoting.send(Message(topic, b"one"))
        got = []
        wait_until(lambda: got.extend(consumer.receive(16, 10)) or got, 20, "the first message")
        consumer.ack(got[0])
        assert first.stop() == 0
        with pytest.raises(RemotingError):
            consumer.receive(16, 10)
        server_process(cmd[:-1] + [port])  # back on the same port
        remoting.send(Message(topic, b"two"))
        again: list = []

        def received() -> bool:
            try:
                again.extend(consumer.receive(16, 10))
            except RemotingError:  # until the channel reconnects (0.2 s, doubling up to 2 s)
                return False
            return bool(again)

        wait_until(received, 30, "a receive after the restart")
        assert [m.body for m in again] == [b"two"]
        consumer.ack(again[0])
